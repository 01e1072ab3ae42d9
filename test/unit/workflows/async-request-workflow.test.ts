// One async request of a mirror user, on the workflow alone: the real workflow code runs on Temporal's
// test environment (the run's dev server) with its activity replaced by a fake typed against the real
// one. What is checked is what the workflow decides: the stored request is run once by its id and its
// status is the workflow's result (none when the request is gone), a failed attempt is retried, and a
// request that fails for good fails the workflow with its reason.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { ApplicationFailure } from '@temporalio/common';
import type { Activities } from '../../../activities/index.ts';
import { rootMessage } from '../../../workflows/shared.ts';
import { activitiesOf, runToEnd, suiteWorkflowEnv } from '../../helpers/workflow-env.ts';

/** An executeAsyncRequest that answers each attempt as scripted, recording what it was asked. */
function scripted(answers: (number | null | Error)[]) {
  const asked: string[] = [];
  const activities: Pick<Activities, 'executeAsyncRequest'> = {
    async executeAsyncRequest(input) {
      asked.push(input.id);
      const answer = answers.shift();
      if (answer instanceof Error) throw answer;
      return { status: answer ?? null };
    },
  };
  return { activities, asked };
}

describe('the async request workflow, with its activity faked', { timeout: 180_000 }, () => {
  const env = suiteWorkflowEnv();

  it("runs the stored request once and answers with its response's status", async () => {
    const { activities, asked } = scripted([201]);
    const r = await runToEnd(env(), 'asyncRequestWorkflow', [{ id: 'req-1' }], activities);
    assert.equal(r.error, undefined, String(r.error));
    assert.deepEqual(r.result, { status: 201 });
    assert.deepEqual(asked, ['req-1']);
  });

  it('answers no status when the request is gone', async () => {
    const { activities } = scripted([null]);
    const r = await runToEnd(env(), 'asyncRequestWorkflow', [{ id: 'req-2' }], activities);
    assert.deepEqual(r.result, { status: null });
  });

  it('retries a failed attempt; a request that fails for good fails the workflow with its reason', async () => {
    const once = scripted([ApplicationFailure.retryable('the API handlers are not built yet'), 200]);
    const retried = await runToEnd(env(), 'asyncRequestWorkflow', [{ id: 'req-3' }], once.activities);
    assert.deepEqual(retried.result, { status: 200 });
    assert.deepEqual(once.asked, ['req-3', 'req-3']);
    assert.deepEqual(activitiesOf(retried.history), ['executeAsyncRequest']);

    const broken = scripted([ApplicationFailure.nonRetryable('the request names no account')]);
    const failed = await runToEnd(env(), 'asyncRequestWorkflow', [{ id: 'req-4' }], broken.activities);
    assert.ok(failed.error, 'the workflow failed');
    assert.match(rootMessage(failed.error), /names no account/);
    assert.deepEqual(broken.asked, ['req-4']);
  });
});
