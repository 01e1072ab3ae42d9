// The account's change workflow, on the workflow alone: the real workflow code runs on Temporal's test
// environment (the run's dev server) with its activities replaced by fakes typed against the real ones:
// the inbox (on the worker's prompt queue) and the plan of the full passes it starts. What is checked is
// what the workflow decides: it looks at the inbox once at start and again while a batch says there is
// more, then waits for the events signal; it starts one full pass per resource a batch names (however
// often it names it), and goes on when such a pass is running already; an inbox it failed to apply is
// retried. The workflow runs for the account's lifetime: each test ends it.
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { describe, it } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { ApplicationFailure } from '@temporalio/common';
import type { Activities } from '../../../activities/index.ts';
import type { ApplyResult } from '../../../activities/inbox.ts';
import { accountSyncWorkflowId } from '../../../lib/workflow-ids.ts';
import { activitiesOf, suiteWorkflowEnv, until } from '../../helpers/workflow-env.ts';

type Batch = Partial<ApplyResult> | Error;

describe('the account change workflow, with its activities faked', { timeout: 180_000 }, () => {
  const env = suiteWorkflowEnv();

  /**
   * Starts the change workflow of a new account on workers of these fakes; `batches` answers each
   * apply of the inbox in turn (then: nothing more). The full passes it starts wait in their plan
   * until the test ends, which terminates them and the change workflow.
   */
  async function changes(batches: Batch[]) {
    const accountId = randomUUID();
    const applied: string[] = [];
    const planned: string[] = [];
    const inbox: Pick<Activities, 'applyInbox'> = {
      async applyInbox(input) {
        applied.push(input.accountId);
        const batch = batches.shift() ?? {};
        if (batch instanceof Error) throw batch;
        return { applied: 0, deleted: 0, skipped: 0, fullPassTypes: [], more: false, ...batch };
      },
    };
    let release!: () => void;
    const held = new Promise<void>((resolve) => (release = resolve));
    const passes: Pick<Activities, 'planAccount'> = {
      async planAccount(input) {
        planned.push(input.accountId);
        await held;
        return { sourceSystem: 'buildpro', resources: [] };
      },
    };
    const taskQueue = `changes-unit-${randomUUID()}`;
    const worker = await env().worker(taskQueue, passes);
    const prompt = await env().worker(`${taskQueue}-prompt`, inbox);
    const handle = await env().env.client.workflow.start('accountChangesWorkflow', {
      taskQueue,
      workflowId: `changes-unit-${accountId}`,
      args: [{ accountId }],
    });
    const running = Promise.all([worker.run(), prompt.run()]);
    const children = async () => {
      const history = await handle.fetchHistory();
      const events = history.events ?? [];
      return {
        initiated: events.map((e) => e.startChildWorkflowExecutionInitiatedEventAttributes?.workflowId).filter((id): id is string => typeof id === 'string'),
        refused: events.map((e) => e.startChildWorkflowExecutionFailedEventAttributes?.workflowId).filter((id): id is string => typeof id === 'string'),
        history,
      };
    };
    // Workers first (the held plans let go), then the workflows: none is ended under a worker's running task.
    const end = async () => {
      release();
      worker.shutdown();
      prompt.shutdown();
      await running;
      const { initiated } = await children();
      for (const id of new Set(initiated))
        await env()
          .env.client.workflow.getHandle(id)
          .terminate('the test ended')
          .catch(() => undefined);
      await handle.terminate('the test ended');
    };
    return { accountId, handle, applied, planned, children, end };
  }

  it('applies the inbox at start and while a batch says there is more, then again at each signal', async () => {
    const c = await changes([{ applied: 500, more: true }, { applied: 20 }, { applied: 3 }]);
    try {
      await until('two applies', () => c.applied.length === 2);
      // No more until a signal says events landed (the next look without one is minutes away).
      await sleep(500);
      assert.equal(c.applied.length, 2);
      await c.handle.signal('events');
      await until('the apply the signal asked for', () => c.applied.length === 3);
      assert.deepEqual(c.applied, Array(3).fill(c.accountId));
      assert.equal((await c.handle.describe()).status.name, 'RUNNING');
    } finally {
      await c.end();
    }
  });

  it('starts one full pass per resource a batch names, and goes on when that pass is running already', async () => {
    const c = await changes([{ fullPassTypes: ['vendors', 'vendors', 'projects'], more: true }, { fullPassTypes: ['vendors'] }, {}]);
    try {
      await until('both passes planning', () => c.planned.length === 2);
      await until('the second batch', () => c.applied.length === 2);
      const vendors = accountSyncWorkflowId(c.accountId, { resource: 'vendors' });
      const projects = accountSyncWorkflowId(c.accountId, { resource: 'projects' });
      let seen = await c.children();
      for (let i = 0; i < 100 && seen.refused.length === 0; i++) {
        await sleep(50);
        seen = await c.children();
      }
      assert.deepEqual(seen.initiated, [vendors, projects, vendors]);
      assert.deepEqual(seen.refused, [vendors], 'the second start of a pass still running is refused, and not a failure');
      const child = await env().env.client.workflow.getHandle(vendors).describe();
      assert.equal(child.type, 'accountSyncWorkflow');
      // The change workflow goes on: a signal is applied.
      await c.handle.signal('events');
      await until('the apply after the refused start', () => c.applied.length === 3);
      assert.equal((await c.handle.describe()).status.name, 'RUNNING');
    } finally {
      await c.end();
    }
  });

  it('retries an inbox it failed to apply', async () => {
    const c = await changes([ApplicationFailure.retryable('the database went away'), { applied: 7 }]);
    try {
      await until('the retried apply', () => c.applied.length === 2);
      const { history } = await c.children();
      assert.deepEqual(activitiesOf(history), ['applyInbox'], 'the same apply attempted again');
      assert.equal((await c.handle.describe()).status.name, 'RUNNING');
    } finally {
      await c.end();
    }
  });
});
