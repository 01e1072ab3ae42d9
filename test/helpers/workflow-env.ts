// Temporal's test environment on the run's dev server, for workflow unit tests with faked activities:
// the SDK's own log lines silenced as LOG_LEVEL says (bin/temporal-worker.ts does the same), the workflow bundle
// built once, and a worker on a task queue of its own.
import { randomUUID } from 'node:crypto';
import { after, before } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { TestWorkflowEnvironment } from '@temporalio/testing';
import { DefaultLogger, Runtime, Worker } from '@temporalio/worker';
import { workflowBundlePath } from '../../bin/workflow-bundle.ts';
import { promptTaskQueue } from '../../lib/workflow-ids.ts';
import { temporalForTests } from './temporal.ts';

export interface WorkflowTestEnv {
  env: TestWorkflowEnvironment;
  /** A worker of the real workflows with these activities, on a task queue of its own. */
  worker(taskQueue: string, activities: object): Promise<Worker>;
  close(): Promise<void>;
}

let runtimeInstalled = false;

export async function startWorkflowTestEnv(): Promise<WorkflowTestEnv> {
  if (!runtimeInstalled && (process.env.LOG_LEVEL ?? 'silent') === 'silent') {
    Runtime.install({ logger: new DefaultLogger('ERROR', () => undefined) });
    runtimeInstalled = true;
  }
  const temporal = await temporalForTests();
  const env = await TestWorkflowEnvironment.createFromExistingServer({ address: temporal.address });
  const bundle = await workflowBundlePath();
  return {
    env,
    // The workflows run in this process's thread (debugMode, as the SDK's replay worker does): a
    // workflow thread of each worker's own would load the test's TypeScript loader (--import tsx)
    // anew, 1.5 to 2 s per worker against 0.1 s. A workflow that never yields then hangs its test
    // until the test's timeout instead of failing in 5 s (the production worker keeps that check).
    worker: (taskQueue, activities) =>
      Worker.create({
        connection: env.nativeConnection,
        namespace: env.namespace ?? 'default',
        taskQueue,
        workflowBundle: { codePath: bundle },
        activities,
        debugMode: true,
      }),
    async close() {
      await env.teardown();
      await temporal.stop();
    },
  };
}

/** The environment of a suite's tests, started before them and closed after (call it inside the `describe`). */
export function suiteWorkflowEnv(): () => WorkflowTestEnv {
  let t: WorkflowTestEnv | undefined;
  before(async () => {
    t = await startWorkflowTestEnv();
  });
  after(async () => {
    await t?.close();
  });
  return () => t!;
}

type History = Awaited<ReturnType<ReturnType<TestWorkflowEnvironment['client']['workflow']['getHandle']>['fetchHistory']>>;

export interface WorkflowOutcome<R> {
  workflowId: string;
  /** The workflow's result, or undefined when it failed. */
  result?: R;
  /** Why the workflow failed (a WorkflowFailedError), or undefined when it completed. */
  error?: unknown;
  /** The history of the run that ended (the last one, after a continue-as-new). */
  history: History;
}

/**
 * Runs one workflow to its end on a worker of these activities, on a task queue of its own (and,
 * when `prompt` is given, a second worker on the prompt queue beside it: lib/workflow-ids.ts), and
 * returns its result or its failure with its history. The workflow is not retried.
 */
export async function runToEnd<R>(
  t: WorkflowTestEnv,
  workflowType: string,
  args: unknown[],
  activities: object,
  o: { prompt?: object; workflowId?: string } = {},
): Promise<WorkflowOutcome<R>> {
  const taskQueue = `${workflowType}-unit-${randomUUID()}`;
  const workflowId = o.workflowId ?? `${workflowType}-unit-${randomUUID()}`;
  const worker = await t.worker(taskQueue, activities);
  const prompt = o.prompt ? await t.worker(promptTaskQueue(taskQueue), o.prompt) : undefined;
  const run = t.env.client.workflow.execute(workflowType, { taskQueue, workflowId, args, retry: { maximumAttempts: 1 } }) as Promise<R>;
  const both = prompt ? prompt.runUntil(worker.runUntil(run)) : worker.runUntil(run);
  const outcome = await both.then(
    (result) => ({ result }),
    (error: unknown) => ({ error }),
  );
  const history = await t.env.client.workflow.getHandle(workflowId).fetchHistory();
  return { workflowId, ...outcome, history };
}

/** The durations of the timers a history started, in milliseconds, in order. */
export function timersOf(history: History): number[] {
  return (history.events ?? [])
    .map((e) => e.timerStartedEventAttributes?.startToFireTimeout)
    .filter((d) => d !== undefined && d !== null)
    .map((d) => Number(d.seconds ?? 0) * 1000 + Math.round((d.nanos ?? 0) / 1e6));
}

/** The activities a history scheduled, by type, in order (a retry is one scheduling). */
export function activitiesOf(history: History): string[] {
  return (history.events ?? []).map((e) => e.activityTaskScheduledEventAttributes?.activityType?.name).filter((n): n is string => typeof n === 'string');
}

/** Waits until `ok()` holds (checked every 20 ms), failing after `ms` with what was awaited. */
export async function until(what: string, ok: () => boolean, ms = 30_000): Promise<void> {
  const deadline = Date.now() + ms;
  while (!ok()) {
    if (Date.now() > deadline) throw new Error(`waited ${ms} ms for ${what}`);
    await sleep(20);
  }
}
