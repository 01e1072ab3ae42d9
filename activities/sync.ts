// Sync activities: the side effects of a stream's pass. An activity fetches a bounded slice of
// pages, writes each with its checkpoint, heartbeats, and returns only counts: records never travel
// through workflow history. A slice's pages go through three stages, each in a file of its own:
// fetched ahead (page-fetcher.ts), judged in the slice loop (sync-slice.ts), written and committed
// in order (page-writer.ts). A retried or restarted activity resumes at the last committed page.
// The planning activities are in plan-activities.ts, the ones that run streams in stream-activities.ts;
// what they share (the account check, slices run to the end, the poll recorded) in sync-context.ts.
import { listParentIds, planAccount, planChildren, retireRemovedProjects } from './plan-activities.ts';
import { sweepScopes, syncChildren, syncSlice } from './stream-activities.ts';
import { SyncContext } from './sync-context.ts';
import type { SyncSliceInput } from './sync-slice.ts';
import type { ChildrenPlanInput, ParentScopesInput, SweepInput, SyncChildrenInput, SyncDeps } from './sync-types.ts';

export { writeDepth } from './page-writer.ts';
export type { SliceCounts, SyncSliceInput, SyncSliceResult } from './sync-slice.ts';
export type {
  AccountPlan,
  ChildrenPlan,
  ChildrenPlanInput,
  ParentScopesInput,
  SweepInput,
  SweepItem,
  SweepResult,
  SyncChildrenInput,
  SyncDeps,
} from './sync-types.ts';

/** The sync activities, by the names the workflows call them. */
export function createSyncActivities(deps: SyncDeps) {
  const ctx = new SyncContext(deps);
  return {
    planAccount: (input: { accountId: string }) => planAccount(ctx, input),
    listParentIds: (input: ParentScopesInput) => listParentIds(ctx, input),
    planChildren: (input: ChildrenPlanInput) => planChildren(ctx, input),
    sweepScopes: (input: SweepInput) => sweepScopes(ctx, input),
    retireRemovedProjects: (input: { accountId: string; passKey: string }) => retireRemovedProjects(ctx, input),
    syncSlice: (input: SyncSliceInput) => syncSlice(ctx, input),
    syncChildren: (input: SyncChildrenInput) => syncChildren(ctx, input),
  };
}

export type SyncActivities = ReturnType<typeof createSyncActivities>;
