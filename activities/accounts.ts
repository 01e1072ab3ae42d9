// An account over time: the probe that asks whether the upstream takes a refused token again, and the
// purge of an unlinked account's data once its retention has run out.
import type { AccountCredentials } from '../connectors/credentials.ts';
import type { AccountStatus } from '../mirror/control/accounts.ts';
import type { Logger } from '../lib/logger.ts';
import type { Pool } from '../mirror/db/pool.ts';
import { purgeUnlinkedAccount, type PurgeCounts } from '../mirror/ops/retention.ts';
import { asActivity } from './failures.ts';

export interface AccountActivityDeps {
  pool: Pool;
  logger: Logger;
  /** Without it (a worker wired without an upstream check), a probe leaves the account as it is. */
  credentials?: AccountCredentials;
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
  };
}

export type AccountActivities = ReturnType<typeof createAccountActivities>;
