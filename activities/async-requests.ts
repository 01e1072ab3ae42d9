// Runs a stored async request through the API's own handlers (in process) and stores the response.
import type { AsyncRequestStore, StoredRequest, StoredResponse } from '../mirror/control/async-requests.ts';
import { asActivity } from './failures.ts';

/** Executes a stored request as the API would have, on behalf of its account. */
export type RequestExecutor = (req: StoredRequest) => Promise<StoredResponse>;

export interface AsyncDeps {
  asyncRequests: AsyncRequestStore;
  /** Built lazily: the worker only needs the API's handlers when an async request arrives. */
  executor: () => Promise<RequestExecutor>;
}

export function createAsyncActivities(deps: AsyncDeps) {
  return {
    async executeAsyncRequest(input: { id: string }): Promise<{ status: number | null }> {
      return asActivity(async () => {
        const req = await deps.asyncRequests.start(input.id);
        if (!req) return { status: null };
        try {
          const exec = await deps.executor();
          const res = await exec(req);
          await deps.asyncRequests.finish(input.id, res);
          return { status: res.status };
        } catch (error) {
          await deps.asyncRequests.fail(input.id, error instanceof Error ? error.message : String(error));
          throw error;
        }
      });
    },
  };
}

export type AsyncActivities = ReturnType<typeof createAsyncActivities>;
