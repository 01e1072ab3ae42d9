// The purge of an unlinked account, on the workflow alone: the real workflow code runs on Temporal's
// test environment (the run's dev server) with its activity replaced by a fake typed against the real
// one, and a retention of milliseconds given in its input. What is checked is what the workflow
// decides: the purge waits out the retention on a durable timer (none when there is none left), then
// purges once, and says whether anything was purged (nothing when the account was linked again
// meanwhile or purged already); a purge that fails for good fails the workflow.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { ApplicationFailure } from '@temporalio/common';
import type { Activities } from '../../../activities/index.ts';
import type { PurgeCounts } from '../../../mirror/ops/retention.ts';
import { rootMessage } from '../../../workflows/shared.ts';
import { runToEnd, suiteWorkflowEnv, timersOf } from '../../helpers/workflow-env.ts';

/** A purgeUnlinkedAccount that answers as given, recording what it was asked and when. */
function answering(answer: PurgeCounts | null | Error) {
  const asked: { accountId: string; at: number }[] = [];
  const activities: Pick<Activities, 'purgeUnlinkedAccount'> = {
    async purgeUnlinkedAccount(input) {
      asked.push({ accountId: input.accountId, at: Date.now() });
      if (answer instanceof Error) throw answer;
      return answer;
    },
  };
  return { activities, asked };
}

describe('the purge workflow of an unlinked account, with its activity faked', { timeout: 180_000 }, () => {
  const env = suiteWorkflowEnv();

  it('waits out the retention, then purges the account once', async () => {
    const { activities, asked } = answering({ records: 12, streams: 3 });
    const began = Date.now();
    const r = await runToEnd<{ purged: boolean }>(env(), 'accountPurgeWorkflow', [{ accountId: 'acct-1', afterMs: 300 }], activities);
    assert.equal(r.error, undefined, String(r.error));
    assert.deepEqual(r.result, { purged: true });
    assert.deepEqual(timersOf(r.history), [300]);
    assert.deepEqual(
      asked.map((a) => a.accountId),
      ['acct-1'],
    );
    assert.ok(asked[0]!.at - began >= 300, 'the purge came after the retention');
  });

  it('purges at once when no retention is left, and says when there was nothing to purge', async () => {
    const { activities, asked } = answering(null);
    const r = await runToEnd<{ purged: boolean }>(env(), 'accountPurgeWorkflow', [{ accountId: 'acct-2', afterMs: 0 }], activities);
    assert.deepEqual(r.result, { purged: false });
    assert.deepEqual(timersOf(r.history), []);
    assert.equal(asked.length, 1);
  });

  it('fails when the purge fails for good', async () => {
    const { activities } = answering(ApplicationFailure.nonRetryable('the records table is gone'));
    const r = await runToEnd<{ purged: boolean }>(env(), 'accountPurgeWorkflow', [{ accountId: 'acct-3', afterMs: 0 }], activities);
    assert.ok(r.error, 'the workflow failed');
    assert.match(rootMessage(r.error), /records table is gone/);
  });
});
