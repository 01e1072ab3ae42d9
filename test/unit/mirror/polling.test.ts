// Polling's rule, without a database: the due time and reason written with each stream after a poll
// (a project's list is left to the freshness scheduler), and the visits a minute polling may spend.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { formatEvery, pollKind, pollingAfter, pollingVisitsPerMinute, scheduledReason, type PollOutcome } from '../../../mirror/streams/polling.ts';

const policy = { incrementalMs: 15 * 60_000, fullMs: 24 * 3_600_000 };
const at = new Date('2026-11-25T10:00:00Z');
const outcome = (o: Partial<PollOutcome>): PollOutcome => ({ kind: 'project', covered: false, changed: false, unchangedBefore: 0, polledAt: at, ...o });
const minutesAfter = (d: Date | null) => (d ? (d.getTime() - at.getTime()) / 60_000 : null);

test('each poll says when the stream is due next and why', () => {
  // A project's list: the scheduler weighs it at each pass, webhook-covered or not.
  assert.deepEqual(pollingAfter(outcome({ changed: true, unchangedBefore: 5 }), policy), { unchangedPolls: 0, nextDueAt: null, reason: scheduledReason });
  assert.equal(pollingAfter(outcome({ covered: true, unchangedBefore: 2 }), policy).reason, scheduledReason);
  const covered = pollingAfter(outcome({ kind: 'across', covered: true }), policy);
  assert.equal(covered.reason, 'webhook-covered: full pass only');
  assert.equal(minutesAfter(covered.nextDueAt), 24 * 60);
  assert.equal(pollingAfter(outcome({ kind: 'children' }), policy).nextDueAt, null);
  assert.equal(minutesAfter(pollingAfter(outcome({ kind: 'across' }), policy).nextDueAt), 15);
});

test('polling spends its share of the sync share of the rate, less the lists every pass lists', () => {
  // 60 requests a minute, the sync's 0.8, polling's 0.5: 24 a minute; 30 lists every 15-minute pass cost 2 a minute.
  const v = pollingVisitsPerMinute({ ...policy, syncShare: 0.8, pollingShare: 0.5 }, { requestsPerMinute: 60, everyPass: 30 });
  assert.ok(Math.abs(v! - 22) < 1e-9);
  assert.equal(pollingVisitsPerMinute(policy, { requestsPerMinute: null, everyPass: 0 }), null);
  // Never less than a visit a pass.
  assert.equal(pollingVisitsPerMinute({ ...policy, pollingShare: 0.01 }, { requestsPerMinute: 60, everyPass: 300 }), 1 / 15);
});

test('kinds of streams, and intervals in words', () => {
  assert.deepEqual(['', 'project=*', 'project=12', 'project=12/files=3', 'ap-invoices=9'].map(pollKind), [
    'account',
    'across',
    'project',
    'children',
    'children',
  ]);
  assert.deepEqual(
    [15, 30, 60, 90, 120, 1440, 4320].map((m) => formatEvery(m * 60_000)),
    ['15 min', '30 min', '1 h', '1.5 h', '2 h', '24 h', '3 d'],
  );
});
