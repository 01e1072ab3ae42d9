// One stream's pass, on the workflow alone: the real workflow code runs on Temporal's test environment
// (the run's dev server) with its slice activity replaced by a fake typed against the real one. What is
// checked is what the workflow decides: slices run one after another until one says the stream is done
// (or stalled: its reason is the pass's), each asked for the same stream with async pages left to the
// workflow, their counts adding up; a page that is an upstream async request still running is polled
// again after a durable timer of the contract's interval; a failed slice is retried, and one that
// fails for good fails the pass.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { randomUUID } from 'node:crypto';
import { ApplicationFailure } from '@temporalio/common';
import type { Activities } from '../../../activities/index.ts';
import type { SyncSliceInput, SyncSliceResult } from '../../../activities/sync.ts';
import { asyncPollIntervalMs } from '../../../lib/async-requests.ts';
import { rootMessage, type StreamProgress } from '../../../workflows/shared.ts';
import { activitiesOf, runToEnd, suiteWorkflowEnv, timersOf, until } from '../../helpers/workflow-env.ts';

type Slice = Partial<SyncSliceResult> | Error;

const zero = { pages: 0, records: 0, inserted: 0, updated: 0, unchanged: 0, deleted: 0, done: false, generation: 1 };

/** A syncSlice that answers each slice as scripted, recording what it was asked. */
function scripted(slices: Slice[], o: { beforeEach?: () => Promise<void> } = {}) {
  const asked: SyncSliceInput[] = [];
  const activities: Pick<Activities, 'syncSlice'> = {
    async syncSlice(input) {
      asked.push(input);
      await o.beforeEach?.();
      const slice = slices.shift() ?? { done: true };
      if (slice instanceof Error) throw slice;
      return { ...zero, ...slice };
    },
  };
  return { activities, asked };
}

const stream = { accountId: 'acct-1', resource: 'vendors', scope: '', path: '/vendors', passKey: 'pass-1', mode: 'full' as const, maxPages: 50 };

describe('the stream pass workflow, with its activity faked', { timeout: 180_000 }, () => {
  const env = suiteWorkflowEnv();

  it('runs slices of the same stream until one is done, adding up their counts', async () => {
    const { activities, asked } = scripted([
      { pages: 50, records: 5000, inserted: 5000 },
      { pages: 50, records: 5000, inserted: 4000, updated: 1000 },
      { pages: 3, records: 250, unchanged: 250, deleted: 7, done: true },
      { pages: 99 },
    ]);
    const r = await runToEnd<SyncSliceResult>(env(), 'streamSyncWorkflow', [stream], activities);
    assert.equal(r.error, undefined, String(r.error));
    assert.equal(asked.length, 3, 'no slice after the one that finished the stream');
    assert.ok(
      asked.every((a) => JSON.stringify(a) === JSON.stringify({ ...stream, asyncPages: true })),
      'each slice is asked for the same stream, with async pages polled by the workflow',
    );
    assert.deepEqual(r.result, { pages: 103, records: 10250, inserted: 9000, updated: 1000, unchanged: 250, deleted: 7 });
    assert.deepEqual(timersOf(r.history), []);
  });

  it('ends the pass with the reason when a slice says the stream is stalled', async () => {
    const { activities, asked } = scripted([
      { pages: 2, records: 20 },
      { done: true, stalled: 'same page returned 3 times: vendors page 3 came back as page 2 again' },
    ]);
    const r = await runToEnd<SyncSliceResult>(env(), 'streamSyncWorkflow', [stream], activities);
    assert.equal(r.error, undefined, String(r.error));
    assert.equal(asked.length, 2);
    assert.deepEqual(r.result, {
      pages: 2,
      records: 20,
      inserted: 0,
      updated: 0,
      unchanged: 0,
      deleted: 0,
      stalled: 'same page returned 3 times: vendors page 3 came back as page 2 again',
    });
  });

  it('waits a durable timer of the poll interval for a page still produced upstream, then slices again', async () => {
    const { activities, asked } = scripted([
      { pages: 2, records: 200, waitAsync: { id: 'async-1', expiresAt: null } },
      { pages: 1, records: 10, done: true },
    ]);
    const r = await runToEnd<SyncSliceResult>(env(), 'streamSyncWorkflow', [stream], activities);
    assert.equal(r.error, undefined, String(r.error));
    assert.equal(asked.length, 2);
    assert.deepEqual(timersOf(r.history), [asyncPollIntervalMs]);
    assert.equal(r.result?.pages, 3);
  });

  it('retries a failed slice; a slice that fails for good fails the pass with its reason', async () => {
    const once = scripted([ApplicationFailure.retryable('the upstream answered 503'), { pages: 1, done: true }]);
    const retried = await runToEnd<SyncSliceResult>(env(), 'streamSyncWorkflow', [stream], once.activities);
    assert.equal(retried.error, undefined, String(retried.error));
    assert.equal(once.asked.length, 2);
    assert.deepEqual(activitiesOf(retried.history), ['syncSlice'], 'the same slice attempted again');

    const broken = scripted([{ pages: 1 }, ApplicationFailure.nonRetryable("Upstream's vendors page 2 repeats page 1 of the same pass")]);
    const failed = await runToEnd<SyncSliceResult>(env(), 'streamSyncWorkflow', [stream], broken.activities);
    assert.ok(failed.error, 'the pass failed');
    assert.match(rootMessage(failed.error), /repeats page 1/);
    assert.equal(broken.asked.length, 2);
  });

  it('answers the progress query with the pages and records so far', async () => {
    let release!: () => void;
    const gate = new Promise<void>((resolve) => (release = resolve));
    let calls = 0;
    const { activities } = scripted(
      [
        { pages: 4, records: 400 },
        { pages: 1, records: 5, done: true },
      ],
      {
        beforeEach: async () => {
          if (++calls === 2) await gate;
        },
      },
    );
    const workflowId = `stream-unit-${randomUUID()}`;
    const running = runToEnd<SyncSliceResult>(env(), 'streamSyncWorkflow', [stream], activities, { workflowId });
    await until('the second slice', () => calls === 2);
    const progress = await env().env.client.workflow.getHandle(workflowId).query<StreamProgress>('progress');
    release();
    const r = await running;
    assert.deepEqual(progress, { resource: 'vendors', scope: '', pages: 4, records: 400, done: false });
    assert.equal(r.result?.pages, 5);
  });
});
