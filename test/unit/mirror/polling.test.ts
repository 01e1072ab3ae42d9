// Adaptive polling's rule, without a database: intervals doubling from the incremental period to the
// full-pass period, and the reason written with each stream.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { formatEvery, pollInterval, pollKind, pollingAfter, type PollOutcome } from '../../../mirror/streams/polling.ts';

const policy = { incrementalMs: 15 * 60_000, fullMs: 24 * 3_600_000 };
const at = new Date('2026-11-25T10:00:00Z');
const outcome = (o: Partial<PollOutcome>): PollOutcome => ({ kind: 'project', covered: false, changed: false, unchangedBefore: 0, polledAt: at, ...o });
const minutesAfter = (d: Date | null) => (d ? (d.getTime() - at.getTime()) / 60_000 : null);

test('the interval doubles with each unchanged poll and stops at the full-pass period', () => {
  assert.deepEqual(
    [0, 1, 2, 3, 4, 5, 6, 7, 8, 50].map((n) => pollInterval(policy, n) / 60_000),
    [15, 30, 60, 120, 240, 480, 960, 1440, 1440, 1440],
  );
});

test('each poll says when the stream is due next and why', () => {
  assert.deepEqual(pollingAfter(outcome({ changed: true, unchangedBefore: 5 }), policy), {
    unchangedPolls: 0,
    nextDueAt: new Date(at.getTime() + 15 * 60_000),
    reason: 'changed last poll: every 15 min',
  });
  const third = pollingAfter(outcome({ unchangedBefore: 2 }), policy);
  assert.equal(third.reason, 'unchanged 3 polls: every 2 h');
  assert.equal(minutesAfter(third.nextDueAt), 120);
  assert.equal(pollingAfter(outcome({ unchangedBefore: 9 }), policy).reason, 'unchanged 10 polls: every 24 h (the bound: the full-pass period)');
  const covered = pollingAfter(outcome({ covered: true }), policy);
  assert.equal(covered.reason, 'webhook-covered: full pass only');
  assert.equal(minutesAfter(covered.nextDueAt), 24 * 60);
  assert.equal(pollingAfter(outcome({ kind: 'children' }), policy).nextDueAt, null);
  assert.equal(minutesAfter(pollingAfter(outcome({ kind: 'across' }), policy).nextDueAt), 15);
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
