// `mirror worker` polls the prompt task queue (the change workflows and their event activities) from a
// process of its own, so a backfill that keeps the main queue's process busy does not hold up an
// account's webhook changes; that process ends with the worker, however the worker ends.
import assert from 'node:assert/strict';
import { hostname } from 'node:os';
import { after, before, describe, it } from 'node:test';
import { promptTaskQueue } from '../../lib/workflow-ids.ts';
import { cliEnv, startHarness, type Harness } from '../helpers/harness.ts';
import { alive, LogCollector, MirrorProcess, waitFor } from '../helpers/processes.ts';

/** The pids of this machine's processes polling a task queue, for workflow tasks (1) or activity tasks (2). */
async function pollerPids(h: Harness, taskQueue: string, taskQueueType: 1 | 2): Promise<Set<number>> {
  const res = await h.temporal.workflowService.describeTaskQueue({ namespace: 'default', taskQueue: { name: taskQueue }, taskQueueType });
  const pids = new Set<number>();
  // A worker's identity is `<pid>@<host> construction-mirror/<release>` (lib/build-info.ts workerIdentity).
  for (const p of res.pollers ?? []) {
    const m = /^(\d+)@(\S+)/.exec(p.identity ?? '');
    if (m && m[2] === hostname()) pids.add(Number(m[1]));
  }
  return pids;
}

describe('mirror worker: the prompt task queue in a process of its own', { timeout: 180_000 }, () => {
  let h: Harness;
  let worker: MirrorProcess | undefined;
  const taskQueue = `prompt-process-${process.pid}`;

  before(async () => {
    h = await startHarness();
  });
  after(async () => {
    await worker?.stop();
    await h?.close();
  });

  it('polls the main and the prompt task queue from two processes, and the second ends with the first', async () => {
    worker = new MirrorProcess({ command: 'worker', env: { ...cliEnv(h), TEMPORAL_TASK_QUEUE: taskQueue, LOG_LEVEL: 'info' }, logs: new LogCollector() });
    await worker.start();
    const { main, prompt } = await waitFor(
      'both task queues to be polled',
      async () => {
        const main = await pollerPids(h, taskQueue, 2);
        const prompt = new Set([...(await pollerPids(h, promptTaskQueue(taskQueue), 1)), ...(await pollerPids(h, promptTaskQueue(taskQueue), 2))]);
        return main.size > 0 && prompt.size > 0 ? { main, prompt } : undefined;
      },
      { timeoutMs: 90_000, intervalMs: 250 },
    );
    assert.equal(prompt.size, 1, `one process polls the prompt queue: ${[...prompt].join(', ')}`);
    for (const pid of prompt) assert.ok(!main.has(pid), `the prompt queue's poller ${pid} is not the main queue's (${[...main].join(', ')})`);
    // Its workflow tasks too (the change workflow runs there), not only its activities.
    assert.deepEqual(await pollerPids(h, promptTaskQueue(taskQueue), 1), prompt);

    // Before it takes changes, the prompt process runs a workflow task and an event activity of its own,
    // so the first change it takes does not pay for code run the first time.
    const warmUp = await waitFor(
      "the prompt process's warm-up to complete",
      async () => {
        for await (const w of h.temporal.workflow.list({ query: `WorkflowType = 'promptWarmUpWorkflow' AND TaskQueue = '${promptTaskQueue(taskQueue)}'` }))
          if (w.status.name === 'COMPLETED') return w;
        return undefined;
      },
      { timeoutMs: 60_000, intervalMs: 250 },
    );
    const history = await h.temporal.workflow.getHandle(warmUp.workflowId, warmUp.runId).fetchHistory();
    const ranBy = new Set<number>();
    for (const e of history.events ?? []) {
      const identity = e.workflowTaskCompletedEventAttributes?.identity ?? e.activityTaskStartedEventAttributes?.identity;
      const pid = /^(\d+)@/.exec(identity ?? '')?.[1];
      if (pid) ranBy.add(Number(pid));
    }
    assert.deepEqual(ranBy, prompt, 'its workflow task and activity ran in the prompt process');

    // Killed with SIGKILL, the worker takes its prompt process with it: nothing polls on without it.
    await worker.kill9();
    const [promptPid] = [...prompt];
    await waitFor('the prompt process to end with the worker', () => !alive(promptPid!), { timeoutMs: 20_000 });
  });
});
