// The mirror's maintenance run, on the workflow alone: the real workflow code runs on Temporal's test
// environment (the run's dev server) with its activities replaced by fakes typed against the real ones.
// What is checked is what the workflow decides: history past its retention is purged first, and only
// once that purge has ended are unused accounts made idle; the run reports both; a purge that fails
// for good fails the run before any account is touched.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { ApplicationFailure } from '@temporalio/common';
import type { Activities } from '../../../activities/index.ts';
import type { ExpiredCounts } from '../../../mirror/ops/retention.ts';
import { rootMessage } from '../../../workflows/shared.ts';
import { activitiesOf, runToEnd, suiteWorkflowEnv } from '../../helpers/workflow-env.ts';

const counts: ExpiredCounts = { tombstones: 4, syncRuns: 2, inboxEvents: 9, storageAccesses: 0, asyncRequests: 1, unlinkedAccounts: ['acct-gone'] };

/** The two maintenance activities, recording when each began and ended. */
function fakes(o: { purgeFails?: Error } = {}) {
  const log: string[] = [];
  const activities: Pick<Activities, 'purgeExpired' | 'markIdleAccounts'> = {
    async purgeExpired() {
      log.push('purge began');
      await sleep(100);
      log.push('purge ended');
      if (o.purgeFails) throw o.purgeFails;
      return counts;
    },
    async markIdleAccounts() {
      log.push('idle began');
      return { idle: ['acct-7', 'acct-9'] };
    },
  };
  return { activities, log };
}

describe('the maintenance workflow, with its activities faked', { timeout: 180_000 }, () => {
  const env = suiteWorkflowEnv();

  it('purges history past its retention, then makes unused accounts idle, and reports both', async () => {
    const { activities, log } = fakes();
    const r = await runToEnd(env(), 'maintenanceWorkflow', [], activities);
    assert.equal(r.error, undefined, String(r.error));
    assert.deepEqual(log, ['purge began', 'purge ended', 'idle began']);
    assert.deepEqual(activitiesOf(r.history), ['purgeExpired', 'markIdleAccounts']);
    assert.deepEqual(r.result, { purged: counts, idle: ['acct-7', 'acct-9'] });
  });

  it('fails before making any account idle when the purge fails for good', async () => {
    const { activities, log } = fakes({ purgeFails: ApplicationFailure.nonRetryable('the retention policy is invalid') });
    const r = await runToEnd(env(), 'maintenanceWorkflow', [], activities);
    assert.ok(r.error, 'the run failed');
    assert.match(rootMessage(r.error), /retention policy is invalid/);
    assert.deepEqual(log, ['purge began', 'purge ended']);
    assert.deepEqual(activitiesOf(r.history), ['purgeExpired']);
  });
});
