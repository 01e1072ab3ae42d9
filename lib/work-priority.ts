// Which of the mirror's work Temporal dispatches first when the workers are behind, and fairly across
// accounts: every workflow the mirror starts carries its account as the fairness key (one account's
// backfill does not hold back another account's changes on the same task queue) and a priority by
// why it runs. Child workflows and activities inherit both from the workflow that starts them.
import { createHash } from 'node:crypto';

/** Why a workflow runs. */
export type WorkKind =
  /** An upstream webhook's changes (the account's change workflow and the passes it starts). */
  | 'event'
  /** Asked for by a caller now: a read of a scope not synced yet, an async request, a pass started through the API. */
  | 'on-demand'
  /** An incremental pass by the schedule. */
  | 'scheduled'
  /** A full pass: an account's first (its backfill) or the daily one. */
  | 'backfill';

/**
 * Temporal's priority keys run from 1 (first) to 5; 3 is the default. Event-driven and on-demand work
 * comes before scheduled passes, and backfills last.
 */
export const priorityKeys: Record<WorkKind, number> = { event: 1, 'on-demand': 2, scheduled: 3, backfill: 4 };

/** What a workflow start carries (the shape of Temporal's `Priority`). */
interface WorkPriority {
  priorityKey: number;
  fairnessKey: string;
}

export function workPriority(accountId: string, kind: WorkKind): WorkPriority {
  return { priorityKey: priorityKeys[kind], fairnessKey: fairnessKeyOf(accountId) };
}

/** Fairness keys are limited to 64 bytes: an account id (a uuid) is its own key; a longer one is its SHA-256. */
function fairnessKeyOf(accountId: string): string {
  return Buffer.byteLength(accountId) <= 64 ? accountId : createHash('sha256').update(accountId).digest('hex');
}
