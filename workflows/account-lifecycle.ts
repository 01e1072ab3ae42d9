// An account over time, durably: the probe of an account whose credentials the upstream refuses
// (backing off, one request a step, until the token is taken again or the account is unlinked), the
// purge of an unlinked account's data once its retention has run out, and the mirror's hourly
// maintenance (history past its retention, idle accounts).
import { continueAsNew, proxyActivities, sleep, workflowInfo } from '@temporalio/workflow';
import type { AccountActivities } from '../activities/accounts.ts';
import { activityProfiles } from './activity-profiles.ts';

const { probeAccount, purgeUnlinkedAccount } = proxyActivities<AccountActivities>(activityProfiles.lifecycle);

interface AccountProbeInput {
  accountId: string;
  /** The first wait (MIRROR_CREDENTIALS_PROBE_AFTER); each refused probe doubles it up to `maxDelayMs`. */
  firstDelayMs: number;
  maxDelayMs: number;
  /** Carried over continue-as-new. */
  delayMs?: number;
}

export async function accountProbeWorkflow(input: AccountProbeInput): Promise<{ status: string; probes: number }> {
  let delay = input.delayMs ?? input.firstDelayMs;
  for (let probes = 1; ; probes++) {
    await sleep(delay);
    const { status } = await probeAccount({ accountId: input.accountId });
    if (status !== 'credentials_refused') return { status, probes };
    delay = Math.min(delay * 2, input.maxDelayMs);
    if (workflowInfo().continueAsNewSuggested || workflowInfo().historyLength > 2000) {
      await continueAsNew<typeof accountProbeWorkflow>({ ...input, delayMs: delay });
    }
  }
}

interface AccountPurgeInput {
  accountId: string;
  /** MIRROR_RETENTION_AFTER_UNLINK, from the unlink. */
  afterMs: number;
}

export async function accountPurgeWorkflow(input: AccountPurgeInput): Promise<{ purged: boolean }> {
  if (input.afterMs > 0) await sleep(input.afterMs);
  return { purged: (await purgeUnlinkedAccount({ accountId: input.accountId })) !== null };
}

// A purge deletes in short batches and heartbeats; a big one may take long.
const { purgeExpired, markIdleAccounts } = proxyActivities<AccountActivities>({
  startToCloseTimeout: '2 hours',
  heartbeatTimeout: '1 minute',
  retry: { initialInterval: '10 seconds', backoffCoefficient: 2, maximumInterval: '10 minutes', maximumAttempts: 5 },
});

/** The maintenance schedule's run: history past its retention purged, then unused accounts made idle. */
export async function maintenanceWorkflow(): Promise<{ purged: Awaited<ReturnType<typeof purgeExpired>>; idle: string[] }> {
  const purged = await purgeExpired();
  const { idle } = await markIdleAccounts();
  return { purged, idle };
}
