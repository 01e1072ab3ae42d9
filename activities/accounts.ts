// An account over time: the probe that asks whether the upstream takes a refused token again, the
// purge of an unlinked account's data once its retention has run out, and the mirror's maintenance:
// history past its retention purged, accounts nobody uses slowed down.
import type { AccountCredentials } from '../connectors/credentials.ts';
import type { AccountStatus } from '../mirror/control/accounts.ts';
import type { Logger } from '../lib/logger.ts';
import type { Pool } from '../mirror/db/pool.ts';
import { idleCandidates, markIdle } from '../mirror/control/account-use.ts';
import { purgeExpired, purgeUnlinkedAccount, type ExpiredCounts, type PurgeCounts, type RetentionPolicy } from '../mirror/ops/retention.ts';
import { asActivity } from './failures.ts';
import { withHeartbeat } from './heartbeat.ts';

/** The Temporal side of idle accounts (api/sync-control.ts): schedules slowed, or back to the usual cadence. */
interface IdleSchedules {
  slowSchedules(accountId: string, slowdown: number): Promise<void>;
  woke(accountId: string): Promise<void>;
}

/** MIRROR_IDLE_AFTER and MIRROR_IDLE_SLOWDOWN, and the schedules they act on. */
interface IdlePolicy {
  afterMs: number;
  slowdown: number;
  schedules: IdleSchedules;
}

export interface AccountActivityDeps {
  pool: Pool;
  logger: Logger;
  /** Without it (a worker wired without an upstream check), a probe leaves the account as it is. */
  credentials?: AccountCredentials;
  /** Without it, maintenance purges nothing. */
  retention?: RetentionPolicy;
  /** Without it, no account is made idle. */
  idle?: IdlePolicy;
}

export function createAccountActivities(deps: AccountActivityDeps) {
  return {
    /**
     * One probe: at most one upstream request (none when the account is no longer refused). Trouble
     * reaching the upstream counts as a refused probe, so the workflow's backoff, not a retry, decides
     * when the next request goes.
     */
    async probeAccount(input: { accountId: string }): Promise<{ status: AccountStatus }> {
      return asActivity(async () => {
        if (!deps.credentials) return { status: 'credentials_refused' as const };
        try {
          return { status: await deps.credentials.probe(input.accountId) };
        } catch (error) {
          deps.logger.warn({ account: input.accountId, err: error }, 'the credentials probe could not reach the upstream; it tries again after its backoff');
          return { status: 'credentials_refused' as const };
        }
      });
    },

    /** Purges an unlinked account's mirrored data; null when it was linked again meanwhile or purged already. */
    async purgeUnlinkedAccount(input: { accountId: string }): Promise<PurgeCounts | null> {
      return asActivity(async () => {
        const counts = await purgeUnlinkedAccount(deps.pool, input.accountId);
        if (counts) deps.logger.info({ account: input.accountId, counts }, "purged an unlinked account's mirrored data");
        return counts;
      });
    },

    /** History past its retention, in batches (mirror/ops/retention.ts); nothing without a retention policy. */
    async purgeExpired(): Promise<ExpiredCounts | null> {
      return withHeartbeat(() =>
        asActivity(async () => {
          if (!deps.retention) return null;
          const counts = await purgeExpired(deps.pool, deps.retention);
          deps.logger.info({ counts }, 'purged history past its retention');
          return counts;
        }),
      );
    },

    /**
     * Accounts nobody used for MIRROR_IDLE_AFTER: their schedules slowed, then marked idle (an account
     * used meanwhile gets its usual cadence back). Their next use through the API wakes them.
     */
    async markIdleAccounts(): Promise<{ idle: string[] }> {
      return withHeartbeat(() =>
        asActivity(async () => {
          const idle = deps.idle;
          if (!idle || idle.slowdown <= 1) return { idle: [] };
          const marked: string[] = [];
          for (const accountId of await idleCandidates(deps.pool, idle.afterMs)) {
            await idle.schedules.slowSchedules(accountId, idle.slowdown);
            if (await markIdle(deps.pool, accountId, idle.afterMs)) marked.push(accountId);
            else await idle.schedules.woke(accountId);
          }
          if (marked.length > 0)
            deps.logger.info({ accounts: marked, slowdown: idle.slowdown }, 'accounts unused for MIRROR_IDLE_AFTER are idle: their schedules slowed');
          return { idle: marked };
        }),
      );
    },
  };
}

export type AccountActivities = ReturnType<typeof createAccountActivities>;
