// The account's change workflow: woken by a small signal whenever webhook events land in the inbox,
// it applies them in coalesced batches. The inbox, not the signal, carries the events, so a lost or
// duplicated signal costs latency at most. Runs for the account's lifetime, continuing as new.
import {
  ParentClosePolicy,
  condition,
  continueAsNew,
  makeContinueAsNewFunc,
  patched,
  proxyActivities,
  setHandler,
  startChild,
  workflowInfo,
} from '@temporalio/workflow';
import { WorkflowExecutionAlreadyStartedError } from '@temporalio/common';
import type { EventActivities } from '../activities/events.ts';
import { promptTaskQueue } from '../lib/workflow-ids.ts';
import { accountSyncWorkflowId, eventsSignal } from './shared.ts';
import { accountSyncWorkflow } from './account-sync.ts';
import { activityProfiles } from './activity-profiles.ts';

interface AccountChangesInput {
  accountId: string;
  /**
   * The mirror's main task queue, where the passes it starts run. Given when the workflow itself runs on
   * the prompt task queue (it is started there); absent, the workflow runs on the main queue.
   */
  mainTaskQueue?: string;
}

export async function accountChangesWorkflow(input: AccountChangesInput): Promise<void> {
  // Events are applied on the worker's prompt slots (their own task queue), never behind a backfill's
  // slices. The task queue is an activity option: histories that scheduled them on the main queue replay.
  const mainQueue = input.mainTaskQueue ?? workflowInfo().taskQueue;
  // Started on the main queue (where a worker of any release polls workflow tasks), it moves itself to
  // the prompt queue, whose workflow tasks the prompt process takes: the API started before workers
  // of this release are up still has its events applied. Runs of an earlier release replay unchanged.
  if (workflowInfo().taskQueue !== promptTaskQueue(mainQueue) && patched('changes-on-prompt-queue')) {
    await makeContinueAsNewFunc<typeof accountChangesWorkflow>({ taskQueue: promptTaskQueue(mainQueue) })({ ...input, mainTaskQueue: mainQueue });
  }
  const { applyInbox } = proxyActivities<EventActivities>({ ...activityProfiles.inbox, taskQueue: promptTaskQueue(mainQueue) });
  // Events may have landed before this run started: look once at start.
  let pending = true;
  setHandler(eventsSignal, () => {
    pending = true;
  });
  for (;;) {
    // Also look now and then without a signal, in case one was lost.
    await condition(() => pending, '5 minutes');
    pending = false;
    for (;;) {
      const r = await applyInbox({ accountId: input.accountId });
      for (const resource of new Set(r.fullPassTypes)) {
        try {
          await startChild(accountSyncWorkflow, {
            workflowId: accountSyncWorkflowId(input.accountId, { resource }),
            // A pass runs on the main task queue, never on the prompt slots, wherever this workflow runs.
            taskQueue: mainQueue,
            args: [{ accountId: input.accountId, mode: 'full', resource }],
            parentClosePolicy: ParentClosePolicy.ABANDON,
          });
        } catch (error) {
          if (!(error instanceof WorkflowExecutionAlreadyStartedError)) throw error;
        }
      }
      if (!r.more) break;
    }
    // Continuing as new while deliveries keep signalling costs the run a workflow task that the
    // server refuses (a signal came in meanwhile) and a replay: over a second of events held back.
    // So between bursts, unless the history is really long.
    const info = workflowInfo();
    if (info.continueAsNewSuggested || info.historyLength > 20_000 || (!pending && info.historyLength > 5_000)) {
      await continueAsNew<typeof accountChangesWorkflow>(input);
    }
  }
}

/** No account has this id: its inbox is always empty. */
const noAccount = '00000000-0000-0000-0000-000000000000';

/**
 * Run once by a fresh prompt process before it reports running: one workflow task and one event
 * activity (an inbox with nothing in it) through its own worker. The first change a fresh process
 * handled otherwise paid for every code path run the first time: 1.4 s for its first workflow task and
 * 0.8 s for its first activity, against 0.1 s and 0.25 s in a process that had run them before.
 */
export async function promptWarmUpWorkflow(): Promise<void> {
  const { applyInbox } = proxyActivities<EventActivities>({ startToCloseTimeout: '30 seconds', retry: { maximumAttempts: 1 } });
  await applyInbox({ accountId: noAccount });
}
