// A subscription's delivery loop, on the workflow alone: the real workflow code runs on Temporal's test
// environment (the run's dev server) with its activity replaced by a fake typed against the real one.
// What is checked is what the workflow decides: it delivers round after round until the subscription
// is gone, waits between rounds only when one delivered nothing (500 ms more for each idle round in a
// row, back to none after a delivery), and a failed round is retried by Temporal, not dropped.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { ApplicationFailure } from '@temporalio/common';
import type { Activities } from '../../../activities/index.ts';
import { activitiesOf, runToEnd, suiteWorkflowEnv, timersOf } from '../../helpers/workflow-env.ts';

type Round = { delivered: number } | 'gone' | 'fails';

/** A deliverChanges that answers each round as scripted, recording what it was asked. */
function scripted(rounds: Round[]) {
  const asked: string[] = [];
  const activities: Pick<Activities, 'deliverChanges'> = {
    async deliverChanges(input) {
      asked.push(input.subscriptionId);
      const round = rounds.shift() ?? 'gone';
      if (round === 'fails') throw ApplicationFailure.retryable('the callback answered 503');
      return round === 'gone' ? { delivered: 0, active: false } : { ...round, active: true };
    },
  };
  return { activities, asked };
}

describe('the subscription delivery workflow, with its activity faked', { timeout: 180_000 }, () => {
  const env = suiteWorkflowEnv();

  it('delivers until the subscription is gone, waiting only after idle rounds and longer for each in a row', async () => {
    const { activities, asked } = scripted([{ delivered: 3 }, { delivered: 0 }, { delivered: 0 }, { delivered: 2 }, { delivered: 0 }, 'gone']);
    const r = await runToEnd(env(), 'subscriptionDeliveryWorkflow', [{ subscriptionId: 'sub-1' }], activities);
    assert.equal(r.error, undefined, String(r.error));
    assert.deepEqual(asked, Array(6).fill('sub-1'), 'six rounds for the subscription, the last finding it gone');
    // No wait after a delivery; 500 ms after the first idle round, 1000 after the second; a delivery starts over.
    assert.deepEqual(timersOf(r.history), [500, 1000, 500]);
  });

  it('ends at once when the subscription is gone', async () => {
    const { activities, asked } = scripted(['gone']);
    const r = await runToEnd(env(), 'subscriptionDeliveryWorkflow', [{ subscriptionId: 'sub-2' }], activities);
    assert.equal(r.error, undefined, String(r.error));
    assert.equal(asked.length, 1);
    assert.deepEqual(timersOf(r.history), []);
  });

  it('retries a failed round with its backoff and delivers on from it', async () => {
    const { activities, asked } = scripted(['fails', { delivered: 1 }, 'gone']);
    const r = await runToEnd(env(), 'subscriptionDeliveryWorkflow', [{ subscriptionId: 'sub-3' }], activities);
    assert.equal(r.error, undefined, String(r.error));
    assert.equal(asked.length, 3, 'the failed round was attempted again');
    assert.deepEqual(activitiesOf(r.history), ['deliverChanges', 'deliverChanges'], 'a retry of the same round, not a round of its own');
  });
});
