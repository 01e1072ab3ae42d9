// Every workflow the mirror starts carries its account as the fairness key and a priority by why it
// runs (lib/work-priority.ts), and the child workflows and activities it starts inherit both: an
// account's first full pass (a backfill), a pass a read asked for, the account's change workflow, and
// the schedules' passes. Against the real Temporal dev server, which the test runner starts with
// fairness on (bin/temporal-cli.ts).
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { Client } from '@temporalio/client';
import { changesWorkflowId, promptTaskQueue } from '../../lib/workflow-ids.ts';
import { priorityKeys } from '../../lib/work-priority.ts';
import { eventually, sandboxAdmin, startHarness, upstreamAll, type Harness } from '../helpers/harness.ts';

let h: Harness;

before(async () => {
  h = await startHarness();
});

after(async () => {
  await h.close();
});

/** The priority the server holds for an execution (the effective one: a child's or an activity's inherited). */
async function executionPriority(client: Client, workflowId: string, runId?: string): Promise<{ priorityKey?: number; fairnessKey?: string }> {
  const d = await client.workflow.getHandle(workflowId, runId).describe();
  return { priorityKey: d.priority?.priorityKey, fairnessKey: d.priority?.fairnessKey };
}

/** The children a workflow started, from its history. */
async function childrenOf(client: Client, workflowId: string): Promise<{ workflowId: string; runId: string }[]> {
  const history = await client.workflow.getHandle(workflowId).fetchHistory();
  return (history.events ?? [])
    .map((e) => e.childWorkflowExecutionStartedEventAttributes?.workflowExecution)
    .filter((w) => w?.workflowId && w.runId)
    .map((w) => ({ workflowId: w!.workflowId!, runId: w!.runId! }));
}

/** The priorities the activities of a workflow were scheduled with, as its history records them. */
async function activityPriorities(client: Client, workflowId: string, runId?: string): Promise<{ priorityKey?: number; fairnessKey?: string }[]> {
  const history = await client.workflow.getHandle(workflowId, runId).fetchHistory();
  return (history.events ?? [])
    .map((e) => e.activityTaskScheduledEventAttributes)
    .filter((a) => a !== undefined && a !== null)
    .map((a) => ({ priorityKey: a.priority?.priorityKey ?? undefined, fairnessKey: a.priority?.fairnessKey ?? undefined }));
}

describe('work priority and fairness keys', () => {
  it("an account's first full pass is a backfill of its own fairness key, and so are its children and activities", async () => {
    const { accountId } = await h.link('crmcloud');
    const handle = await h.sync.onLinked(accountId);
    await handle.result();
    const expected = { priorityKey: priorityKeys.backfill, fairnessKey: accountId };
    assert.deepEqual(await executionPriority(h.temporal, handle.workflowId), expected);
    const children = await childrenOf(h.temporal, handle.workflowId);
    assert.ok(children.length > 0, 'the pass started child workflows');
    for (const c of children) assert.deepEqual(await executionPriority(h.temporal, c.workflowId, c.runId), expected, c.workflowId);
    // Activities inherit the workflow's priority: scheduled without one of their own, or with the same.
    for (const a of await activityPriorities(h.temporal, handle.workflowId)) {
      assert.ok(a.priorityKey === undefined || a.priorityKey === 0 || a.priorityKey === expected.priorityKey, JSON.stringify(a));
      assert.ok(!a.fairnessKey || a.fairnessKey === accountId, JSON.stringify(a));
    }
    // The schedules' passes: incremental ones scheduled, full ones backfills, each of the account.
    for (const [id, kind] of [
      [h.sync.scheduleIds(accountId).incremental, 'scheduled'],
      [h.sync.scheduleIds(accountId).full, 'backfill'],
    ] as const) {
      const { action } = await h.temporal.schedule.getHandle(id).describe();
      assert.equal(action.type, 'startWorkflow');
      assert.deepEqual(
        { priorityKey: action.priority?.priorityKey, fairnessKey: action.priority?.fairnessKey },
        { priorityKey: priorityKeys[kind], fairnessKey: accountId },
        id,
      );
    }
    await h.sync.deleteSchedules(accountId);
  });

  it('a pass a read asks for goes on demand, and the change workflow as event-driven work, each with the account as its key', async () => {
    const { accountId } = await h.link('crmcloud', 'priority-2');
    assert.equal(await h.sync.startOnDemand({ accountId, mode: 'full', resource: 'customers' }), true);
    const onDemand = h.sync.workflowId({ accountId, resource: 'customers' });
    await h.temporal.workflow.getHandle(onDemand).result();
    assert.deepEqual(await executionPriority(h.temporal, onDemand), { priorityKey: priorityKeys['on-demand'], fairnessKey: accountId });
    await h.sync.signalEvents(accountId);
    assert.deepEqual(await executionPriority(h.temporal, changesWorkflowId(accountId)), { priorityKey: priorityKeys.event, fairnessKey: accountId });
    await h.temporal.workflow.getHandle(changesWorkflowId(accountId)).terminate('test over');
  });

  it("the change workflow runs and applies events on the worker's prompt task queue, where no pass activity takes its slots", async () => {
    const { accountId, accountToken } = await h.link('crmcloud', 'priority-3');
    await (await h.sync.start({ accountId, mode: 'full', resource: 'leads', registerWebhooks: true })).result();
    const [lead] = await upstreamAll(h, '/leads', { 'account-token': accountToken });
    await sandboxAdmin(h, 'PATCH', '/_admin/objects', { account_token: accountToken, resource: 'leads', id: lead!.id, patch: { customer: 'prompt' } });
    await eventually('the change to be applied', async () => {
      const read = await h.app.inject({ method: 'GET', url: `/leads/${String(lead!.id)}`, headers: { ...h.clientHeaders, 'account-token': accountToken } });
      return read.json<{ customer?: string }>().customer === 'prompt' ? true : undefined;
    });
    const history = await h.temporal.workflow.getHandle(changesWorkflowId(accountId)).fetchHistory();
    const queues = (history.events ?? [])
      .map((e) => e.activityTaskScheduledEventAttributes)
      .filter((a) => a?.activityType?.name === 'applyInbox')
      .map((a) => a!.taskQueue?.name);
    assert.ok(queues.length > 0, 'the change workflow applied its inbox');
    assert.deepEqual(new Set(queues), new Set([promptTaskQueue(h.taskQueue)]));
    // The workflow itself runs there too: its turns are the prompt worker's, not the main queue's.
    assert.equal((await h.temporal.workflow.getHandle(changesWorkflowId(accountId)).describe()).taskQueue, promptTaskQueue(h.taskQueue));
    await h.temporal.workflow.getHandle(changesWorkflowId(accountId)).terminate('test over');
  });
});
