import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { ActivityFailure, ApplicationFailure, ChildWorkflowFailure, RetryState } from '@temporalio/common';
import { rootMessage } from '../../../workflows/shared.ts';

describe('rootMessage', () => {
  it("gives the application's message, through child workflow and activity failures but not into its causes", () => {
    const notFound = ApplicationFailure.create({ message: 'Upstream has no async request r1 (customers page 1)', type: 'upstream_not_found' });
    const expired = ApplicationFailure.create({
      message: 'The results of async request r1 expired before they were read',
      type: 'async_expired',
      cause: notFound,
    });
    const activity = new ActivityFailure('Activity task failed', 'syncSlice', 'a1', RetryState.NON_RETRYABLE_FAILURE, 'worker', expired);
    const child = new ChildWorkflowFailure('default', { workflowId: 'stream:1', runId: 'r' }, 'streamSync', RetryState.NON_RETRYABLE_FAILURE, activity);
    assert.equal(rootMessage(child), expired.message);
    assert.equal(rootMessage(activity), expired.message);
    assert.equal(rootMessage(new Error('plain')), 'plain');
    assert.equal(rootMessage('not an error'), 'not an error');
  });
});
