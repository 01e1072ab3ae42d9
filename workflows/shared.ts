// Names shared by workflows, the worker and clients: task queue, workflow ids, signals and queries.
import { ApplicationFailure, defineQuery, defineSignal } from '@temporalio/workflow';

// Workflow ids are made in lib/workflow-ids.ts (the API and the CLI make them too); re-exported for workflow code.
export { accountSyncWorkflowId, childrenWorkflowId, streamWorkflowId } from '../lib/workflow-ids.ts';

export interface StreamProgress {
  resource: string;
  scope: string;
  pages: number;
  records: number;
  done: boolean;
}

export const streamProgressQuery = defineQuery<StreamProgress>('progress');

export interface AccountProgress {
  phase: string;
  streamsTotal: number;
  streamsDone: number;
  streamsFailed: number;
  records: number;
}

export const accountProgressQuery = defineQuery<AccountProgress>('progress');

/** "Events are waiting in the inbox": carries nothing, the inbox holds the events. */
export const eventsSignal = defineSignal('events');

/**
 * What went wrong, in the words of the application's failure: a child workflow's failure wraps an
 * activity's, which wraps the application's ("Child Workflow execution failed" says nothing). The
 * application's own causes are not gone into: an error that says "expired" may have been caused by
 * a 404, and the message that matters is the one that says what the 404 meant.
 */
export function rootMessage(error: unknown): string {
  let e: unknown = error;
  while (e instanceof Error && !(e instanceof ApplicationFailure) && e.cause instanceof Error) e = e.cause;
  return e instanceof Error ? e.message : String(error);
}
