// The prompt process's warm-up, on the workflow alone: the real workflow code runs on Temporal's test
// environment (the run's dev server) with its activity replaced by a fake typed against the real one.
// What is checked is what the workflow decides: one event activity on its own task queue, for an
// account no one has (an empty inbox), then it ends; an activity that fails ends it at once, unretried
// (the process goes on cold rather than wait).
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { ApplicationFailure } from '@temporalio/common';
import type { Activities } from '../../../activities/index.ts';
import { activitiesOf, runToEnd, suiteWorkflowEnv } from '../../helpers/workflow-env.ts';

/** An applyInbox that answers as given, recording the accounts it was asked for. */
function answering(fail: boolean) {
  const asked: string[] = [];
  const activities: Pick<Activities, 'applyInbox'> = {
    async applyInbox(input) {
      asked.push(input.accountId);
      if (fail) throw ApplicationFailure.create({ message: 'the database is not there', nonRetryable: false });
      return { applied: 0, deleted: 0, skipped: 0, fullPassTypes: [], more: false };
    },
  };
  return { activities, asked };
}

describe("the prompt process's warm-up workflow, with its activity faked", { timeout: 180_000 }, () => {
  const env = suiteWorkflowEnv();

  it('applies the inbox of no account once, on its own task queue, and ends', async () => {
    const { activities, asked } = answering(false);
    const r = await runToEnd(env(), 'promptWarmUpWorkflow', [], activities);
    assert.equal(r.error, undefined, String(r.error));
    assert.deepEqual(activitiesOf(r.history), ['applyInbox']);
    assert.deepEqual(asked, ['00000000-0000-0000-0000-000000000000']);
  });

  it('ends failed after one attempt when the activity fails', async () => {
    const { activities, asked } = answering(true);
    const r = await runToEnd(env(), 'promptWarmUpWorkflow', [], activities);
    assert.ok(r.error, 'the workflow failed');
    assert.equal(asked.length, 1, 'not retried');
  });
});
