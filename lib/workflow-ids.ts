// Every Temporal workflow and schedule id the mirror makes, in one place: workflows, the API, the
// CLI and the status page build them here (pure functions: safe inside workflow code). Running
// workflows are found by these strings, so a change here strands them: the strings stay as they are.

/** The account's own sync pass, or one targeted at a resource (and a scope of it). */
export function accountSyncWorkflowId(accountId: string, target: { resource?: string | undefined; scope?: string | undefined } = {}): string {
  const suffix = target.resource ? `:${target.resource}${target.scope ? `:${target.scope}` : ''}` : '';
  return `account-sync:${accountId}${suffix}`;
}

/** One stream's pass (a child of the account's pass). */
export function streamWorkflowId(accountId: string, resource: string, scope: string): string {
  return `stream:${accountId}:${resource}:${scope || '-'}`;
}

/** The children of one parent list (line items of every invoice, ...), synced in batches. */
export function childrenWorkflowId(accountId: string, resource: string, parentScope: string): string {
  return `children:${accountId}:${resource}:${parentScope || '-'}`;
}

/** The account's change workflow, which applies the inbox of upstream webhook events. */
export function changesWorkflowId(accountId: string): string {
  return `account-changes:${accountId}`;
}

/** A prompt process's warm-up run at its start (bin/temporal-worker.ts): one per process start. */
export function promptWarmUpWorkflowId(taskQueue: string, nonce: string): string {
  return `prompt-warm-up:${taskQueue}:${nonce}`;
}

/** The delivery workflow of one of the mirror's own webhook subscriptions. */
export function subscriptionWorkflowId(subscriptionId: string): string {
  return `subscription:${subscriptionId}`;
}

/** The workflow that runs one stored async request. */
export function asyncRequestWorkflowId(requestId: string): string {
  return `async-request:${requestId}`;
}

/** The probe of an account whose credentials the upstream refuses. */
export function accountProbeWorkflowId(accountId: string): string {
  return `account-probe:${accountId}`;
}

/** The purge of an unlinked account's data, after its retention. */
export function accountPurgeWorkflowId(accountId: string): string {
  return `account-purge:${accountId}`;
}

/** The schedule of the mirror's maintenance (retention purges, idle accounts), one per task queue. */
export function maintenanceScheduleId(taskQueue: string): string {
  return `mirror-maintenance:${taskQueue}`;
}

/** The workflow the maintenance schedule starts each hour. */
export function maintenanceWorkflowId(taskQueue: string): string {
  return `mirror-maintenance:${taskQueue}:run`;
}

/** The account's two schedules: full passes and incremental passes. */
export function scheduleIds(accountId: string): { full: string; incremental: string } {
  return { full: `account-full:${accountId}`, incremental: `account-incremental:${accountId}` };
}

/** The workflow a schedule starts at each of its times. */
export function scheduledRunWorkflowId(scheduleId: string): string {
  return `${scheduleId}:run`;
}

/** The account a pass's workflow (its own, targeted or scheduled) belongs to, if it is one. */
export const passWorkflowAccount = /^(?:account-sync|account-full|account-incremental):([0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})/i;

/**
 * The task queue of prompt work beside a worker's task queue: the change workflow and its event
 * activities run there, on slots of their own and (under `mirror worker`) in a process of their own, so
 * pass activities holding every slot and the CPU of the main queue's process (a backfill's long
 * slices) do not hold an account's changes back. Every worker polls both (bin/temporal-worker.ts).
 */
export function promptTaskQueue(taskQueue: string): string {
  return `${taskQueue}-prompt`;
}
