// The children workflow of a big parent scope (more parents than a sweep takes inline: e.g. 5,000 AP
// invoices' line items), on the workflow alone: the real workflow code runs on Temporal's test
// environment with its two activities replaced by fakes that record what they were asked. Batches of
// parents run side by side (bench [9]: one at a time left a third of the sync's share of each rate
// window unused), each parent is synced exactly once, the totals add up, and a batch that fails fails
// the workflow only after every batch begun beside it ended.
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { after, before, describe, it } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { ApplicationFailure } from '@temporalio/common';
import type { Activities } from '../../../activities/index.ts';
import type { SyncChildrenInput } from '../../../activities/sync.ts';
import type { ChildStreamsInput, ChildStreamsResult } from '../../../workflows/child-streams.ts';
import { startWorkflowTestEnv, type WorkflowTestEnv } from '../../helpers/workflow-env.ts';

const zero = { pages: 0, records: 0, inserted: 0, updated: 0, unchanged: 0, deleted: 0 };

describe('the children workflow of a big parent scope, with its activities faked', { timeout: 180_000 }, () => {
  let t: WorkflowTestEnv;

  before(async () => {
    t = await startWorkflowTestEnv();
  });
  after(async () => {
    await t?.close();
  });

  async function run(parents: string[], o: { failBatchWith?: string } = {}) {
    const seen: string[] = [];
    let inFlight = 0;
    let most = 0;
    let ended = 0;
    const activities: Pick<Activities, 'listParentIds' | 'syncChildren'> = {
      async listParentIds(): Promise<string[]> {
        return parents;
      },
      async syncChildren(input: SyncChildrenInput) {
        inFlight++;
        most = Math.max(most, inFlight);
        try {
          // Long enough for the batches a workflow task starts together to overlap.
          await sleep(input.parentIds.includes(o.failBatchWith ?? '') ? 50 : 300);
          if (input.parentIds.includes(o.failBatchWith ?? '')) throw ApplicationFailure.nonRetryable('the upstream said 400');
          seen.push(...input.parentIds);
          return { ...zero, pages: input.parentIds.length, records: 2 * input.parentIds.length, inserted: 2 * input.parentIds.length, failed: [] };
        } finally {
          inFlight--;
          ended++;
        }
      },
    };
    const taskQueue = `children-unit-${randomUUID()}`;
    const worker = await t.worker(taskQueue, activities);
    const input: ChildStreamsInput = {
      accountId: randomUUID(),
      resource: 'ap-invoice-line-items',
      parentResource: 'ap-invoices',
      parentScope: '',
      passKey: randomUUID(),
      mode: 'full',
    };
    const outcome = await worker
      .runUntil(
        t.env.client.workflow.execute('childStreamsWorkflow', {
          taskQueue,
          workflowId: `children-unit-${randomUUID()}`,
          args: [input],
          retry: { maximumAttempts: 1 },
        }) as Promise<ChildStreamsResult>,
      )
      .then(
        (result) => ({ result }),
        (error: unknown) => ({ error }),
      );
    return { ...outcome, seen, most, ended, inFlightAtEnd: inFlight };
  }

  it('syncs batches of parents side by side, each parent once, the totals adding up', async () => {
    const parents = Array.from({ length: 230 }, (_, i) => `inv-${i}`);
    const r = await run(parents);
    assert.ok('result' in r, String('error' in r ? r.error : ''));
    assert.equal(r.most, 4, 'four batches of 25 parents in flight at once');
    assert.deepEqual([...r.seen].sort(), [...parents].sort());
    assert.equal(r.result.streams, parents.length);
    assert.equal(r.result.records, 2 * parents.length);
    assert.deepEqual(r.result.failed, []);
  });

  it('a failed batch fails the workflow once the batches beside it ended', async () => {
    const parents = Array.from({ length: 100 }, (_, i) => `inv-${i}`);
    const r = await run(parents, { failBatchWith: 'inv-0' });
    assert.ok('error' in r, 'the workflow failed');
    // The failing batch ended first (50 ms); its three neighbours (300 ms) ended before the workflow did.
    assert.equal(r.inFlightAtEnd, 0);
    assert.equal(r.seen.length, 75);
  });
});
