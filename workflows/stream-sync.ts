// One stream's pass: pages through the upstream in bounded, heartbeating activity slices. Only
// counts travel through history; the checkpoint lives in Postgres beside the records.
import { continueAsNew, proxyActivities, setHandler, sleep, workflowInfo } from '@temporalio/workflow';
import type { SliceCounts, SyncActivities, SyncSliceInput } from '../activities/sync.ts';
import { asyncPollIntervalMs } from '../lib/async-requests.ts';
import { streamProgressQuery, type StreamProgress } from './shared.ts';
import { activityProfiles } from './activity-profiles.ts';

const { syncSlice } = proxyActivities<SyncActivities>(activityProfiles.slice);

interface StreamSyncInput extends SyncSliceInput {
  /** Totals of earlier runs of this pass (carried over continue-as-new). */
  carried?: SliceCounts;
}

/** The pass's counts; `stalled`: the stream is stalled (why), so the pass ended without completing it. */
type StreamSyncResult = SliceCounts & { stalled?: string };

const zero = (): SliceCounts => ({ pages: 0, records: 0, inserted: 0, updated: 0, unchanged: 0, deleted: 0 });

export async function streamSyncWorkflow(input: StreamSyncInput): Promise<StreamSyncResult> {
  const totals = input.carried ?? zero();
  let done = false;
  setHandler(streamProgressQuery, (): StreamProgress => ({ resource: input.resource, scope: input.scope, pages: totals.pages, records: totals.records, done }));
  const { carried: _carried, ...rest } = input;
  const slice: SyncSliceInput = { ...rest, asyncPages: true };
  for (;;) {
    const r = await syncSlice(slice);
    for (const k of Object.keys(totals) as (keyof SliceCounts)[]) totals[k] += r[k];
    if (r.done) {
      done = true;
      return r.stalled === undefined ? totals : { ...totals, stalled: r.stalled };
    }
    // A page produced by an upstream async request: a durable timer, then the slice polls it.
    if (r.waitAsync) await sleep(asyncPollIntervalMs);
    if (workflowInfo().continueAsNewSuggested) {
      await continueAsNew<typeof streamSyncWorkflow>({ ...slice, carried: totals });
    }
  }
}
