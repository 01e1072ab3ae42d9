// The probe of an account whose credentials the upstream refuses, on the workflow alone: the real
// workflow code runs on Temporal's test environment (the run's dev server) with its activity replaced
// by a fake typed against the real one, and waits of milliseconds given in its input. What is checked is
// what the workflow decides: a wait before every probe, doubling after each refused one up to its most,
// the probe ending at the first answer that is not a refusal (the token taken again, or the account
// unlinked), a wait carried over a continue-as-new taken up where it was, and a probe that failed
// (a worker or database gone, not the upstream's refusal) retried instead of counted.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { ApplicationFailure } from '@temporalio/common';
import type { Activities } from '../../../activities/index.ts';
import type { AccountStatus } from '../../../mirror/control/accounts.ts';
import { activitiesOf, runToEnd, suiteWorkflowEnv, timersOf } from '../../helpers/workflow-env.ts';

type ProbeResult = { status: string; probes: number };

/** A probeAccount that answers each probe as scripted, recording what it was asked. */
function scripted(answers: (AccountStatus | Error)[]) {
  const asked: string[] = [];
  const activities: Pick<Activities, 'probeAccount'> = {
    async probeAccount(input) {
      asked.push(input.accountId);
      const answer = answers.shift() ?? 'linked';
      if (answer instanceof Error) throw answer;
      return { status: answer };
    },
  };
  return { activities, asked };
}

const refused = 'credentials_refused' as const;

describe('the credentials probe workflow, with its activity faked', { timeout: 180_000 }, () => {
  const env = suiteWorkflowEnv();

  it('waits before each probe, doubling the wait up to its most, until the token is taken again', async () => {
    const { activities, asked } = scripted([refused, refused, refused, refused, 'linked']);
    const r = await runToEnd<ProbeResult>(env(), 'accountProbeWorkflow', [{ accountId: 'acct-1', firstDelayMs: 20, maxDelayMs: 70 }], activities);
    assert.equal(r.error, undefined, String(r.error));
    assert.deepEqual(r.result, { status: 'linked', probes: 5 });
    assert.deepEqual(asked, Array(5).fill('acct-1'));
    assert.deepEqual(timersOf(r.history), [20, 40, 70, 70, 70]);
  });

  it('ends when the account was unlinked meanwhile', async () => {
    const { activities } = scripted([refused, 'unlinked', 'linked']);
    const r = await runToEnd<ProbeResult>(env(), 'accountProbeWorkflow', [{ accountId: 'acct-2', firstDelayMs: 10, maxDelayMs: 1000 }], activities);
    assert.deepEqual(r.result, { status: 'unlinked', probes: 2 });
    assert.deepEqual(timersOf(r.history), [10, 20]);
  });

  it('takes up the wait a continued run carried over', async () => {
    const { activities } = scripted([refused, 'linked']);
    const r = await runToEnd<ProbeResult>(env(), 'accountProbeWorkflow', [{ accountId: 'acct-3', firstDelayMs: 10, maxDelayMs: 100, delayMs: 60 }], activities);
    assert.deepEqual(r.result, { status: 'linked', probes: 2 });
    assert.deepEqual(timersOf(r.history), [60, 100]);
  });

  it('retries a probe that failed instead of counting it', async () => {
    const { activities, asked } = scripted([ApplicationFailure.retryable('the database went away'), 'linked']);
    const r = await runToEnd<ProbeResult>(env(), 'accountProbeWorkflow', [{ accountId: 'acct-4', firstDelayMs: 10, maxDelayMs: 100 }], activities);
    assert.deepEqual(r.result, { status: 'linked', probes: 1 });
    assert.equal(asked.length, 2, 'the probe attempted again');
    assert.deepEqual(activitiesOf(r.history), ['probeAccount']);
    assert.deepEqual(timersOf(r.history), [10]);
  });
});
