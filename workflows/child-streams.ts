// The children of one parent scope (e.g. the line items of every AP invoice of an account): one
// stream per parent, synced by activities in batches of parents.
import { continueAsNew, patched, proxyActivities, setHandler, workflowInfo } from '@temporalio/workflow';
import type { SliceCounts, SyncActivities } from '../activities/sync.ts';
import { streamProgressQuery, type StreamProgress } from './shared.ts';
import { activityProfiles } from './activity-profiles.ts';

const { listParentIds } = proxyActivities<SyncActivities>(activityProfiles.parents);
const { syncChildren } = proxyActivities<SyncActivities>(activityProfiles.children);

export interface ChildStreamsInput {
  accountId: string;
  resource: string;
  parentResource: string;
  parentScope: string;
  projectId?: string;
  passKey: string;
  mode: 'full' | 'incremental';
  batchSize?: number;
  /** Batches synced at once (default 4; runs begun before `children-batches-side-by-side`: one). */
  concurrency?: number;
  /** Only the parents whose children of this resource are due again (an incremental pass). */
  changedFor?: string;
  /** Carried over continue-as-new. */
  offset?: number;
  carried?: ChildStreamsResult;
}

export interface ChildStreamsResult extends SliceCounts {
  streams: number;
  failed: { scope: string; error: string }[];
  /** Streams that are stalled, and why (absent from runs recorded before it was reported). */
  stalled?: { scope: string; reason: string }[];
}

export async function childStreamsWorkflow(input: ChildStreamsInput): Promise<ChildStreamsResult> {
  const totals: ChildStreamsResult = input.carried ?? { pages: 0, records: 0, inserted: 0, updated: 0, unchanged: 0, deleted: 0, streams: 0, failed: [] };
  let done = false;
  setHandler(streamProgressQuery, (): StreamProgress => ({
    resource: input.resource,
    scope: input.parentScope,
    pages: totals.pages,
    records: totals.records,
    done,
  }));
  const ids = await listParentIds({
    accountId: input.accountId,
    parentResource: input.parentResource,
    parentScope: input.parentScope,
    ...(input.changedFor ? { changedFor: input.changedFor, passKey: input.passKey } : {}),
  });
  const batch = input.batchSize ?? 25;
  // Batches side by side, as the sweeps of small scopes run (account-sync.ts): one batch at a time kept
  // 4 requests in flight and drained at each batch's end, so 5,000 invoices' line items under the
  // published rate left a third of the sync's share of each window unused (bench [9]: 90-144 of 168 a
  // window, 1.52x the time the rate imposes). Runs begun before replay one batch at a time.
  const side = patched('children-batches-side-by-side') ? Math.max(1, input.concurrency ?? 4) : 1;
  for (let offset = input.offset ?? 0; offset < ids.length; offset += batch * side) {
    const groups: string[][] = [];
    for (let i = 0; i < side && offset + i * batch < ids.length; i++) groups.push(ids.slice(offset + i * batch, offset + (i + 1) * batch));
    // Every batch ends before the workflow goes on (or fails): a retry never races a batch still running.
    const settled = await Promise.allSettled(
      groups.map((parentIds) =>
        syncChildren({
          accountId: input.accountId,
          resource: input.resource,
          parentResource: input.parentResource,
          parentScope: input.parentScope,
          parentIds,
          ...(input.projectId ? { projectId: input.projectId } : {}),
          passKey: input.passKey,
          mode: input.mode,
        }),
      ),
    );
    for (const [i, outcome] of settled.entries()) {
      if (outcome.status === 'rejected') throw outcome.reason;
      const r = outcome.value;
      totals.pages += r.pages;
      totals.records += r.records;
      totals.inserted += r.inserted;
      totals.updated += r.updated;
      totals.unchanged += r.unchanged;
      totals.deleted += r.deleted;
      totals.streams += groups[i]!.length;
      totals.failed.push(...r.failed);
      if (r.stalled?.length) (totals.stalled ??= []).push(...r.stalled);
    }
    if (workflowInfo().continueAsNewSuggested && offset + batch * side < ids.length) {
      await continueAsNew<typeof childStreamsWorkflow>({ ...input, offset: offset + batch * side, carried: totals });
    }
  }
  done = true;
  return totals;
}
