// One async request of a mirror user, run durably: a restart of the API or the worker loses nothing.
import { proxyActivities } from '@temporalio/workflow';
import type { AsyncActivities } from '../activities/async-requests.ts';

const { executeAsyncRequest } = proxyActivities<AsyncActivities>({
  startToCloseTimeout: '10 minutes',
  retry: { initialInterval: '1 second', maximumInterval: '30 seconds', maximumAttempts: 5 },
});

export async function asyncRequestWorkflow(input: { id: string }): Promise<{ status: number | null }> {
  return executeAsyncRequest(input);
}
