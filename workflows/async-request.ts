// One async request of a mirror user, run durably: a restart of the API or the worker loses nothing.
import { proxyActivities } from '@temporalio/workflow';
import type { AsyncActivities } from '../activities/async-requests.ts';
import { activityProfiles } from './activity-profiles.ts';

const { executeAsyncRequest } = proxyActivities<AsyncActivities>(activityProfiles.asyncRequest);

export async function asyncRequestWorkflow(input: { id: string }): Promise<{ status: number | null }> {
  return executeAsyncRequest(input);
}
