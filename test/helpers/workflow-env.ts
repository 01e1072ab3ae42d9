// Temporal's test environment on the run's dev server, for workflow unit tests with faked activities:
// the SDK's own log lines silenced as LOG_LEVEL says (bin/temporal-worker.ts does the same), the workflow bundle
// built once, and a worker on a task queue of its own.
import { TestWorkflowEnvironment } from '@temporalio/testing';
import { DefaultLogger, Runtime, Worker } from '@temporalio/worker';
import { workflowBundlePath } from '../../bin/workflow-bundle.ts';
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
    worker: (taskQueue, activities) =>
      Worker.create({ connection: env.nativeConnection, namespace: env.namespace ?? 'default', taskQueue, workflowBundle: { codePath: bundle }, activities }),
    async close() {
      await env.teardown();
      await temporal.stop();
    },
  };
}
