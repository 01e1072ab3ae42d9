// Adaptive polling's budget per pass (issue 22), without a database: hundreds of project lists that back
// off in step (linked at once, never changing) are listed at most `pollsPerPass` a pass beyond the ones
// that must be (named by an event, changed last poll, at the full-pass bound), the most overdue first,
// and none is ever staler than the full-pass period. The simulation runs the same functions the sweep's
// decision runs (mirror/streams/polling.ts): `pollClass`, `withinBudget`, `pollingAfter`.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import {
  deferredReason,
  pollClass,
  pollingAfter,
  pollsPerPass,
  scopeHash,
  withinBudget,
  type PollClass,
  type PollState,
  type PollingPolicy,
} from '../../../mirror/streams/polling.ts';

const minute = 60_000;
const policy: PollingPolicy = { incrementalMs: 15 * minute, fullMs: 24 * 60 * minute, pollsPerPass: 13 };
const t0 = new Date('2026-11-25T10:00:00Z').getTime();

interface List extends PollState {
  resource: string;
  scope: string;
  polls: number;
}

/** `n` project lists first listed by a full pass at t0 (their first poll: not a change). */
function firstListed(n: number): List[] {
  return Array.from({ length: n }, (_, i) => {
    const plan = pollingAfter({ kind: 'project', covered: false, changed: true, first: true, unchangedBefore: 0, polledAt: new Date(t0) }, policy);
    return {
      resource: 'budget-line-items',
      scope: `project=p${i}`,
      lastPolledAt: new Date(t0),
      nextDueAt: plan.nextDueAt,
      unchangedPolls: plan.unchangedPolls,
      reason: plan.reason,
      touchedAt: null,
      polls: 1,
    };
  });
}

/** One incremental pass at `now`: what it lists, by class, after the budget; the listed lists are polled (`changes`: those that find a change). */
function pass(lists: List[], now: number, k: number, changes: ReadonlySet<string> = new Set()) {
  const by = new Map<PollClass, List[]>();
  for (const l of lists) {
    const cls = pollClass(l, new Date(now), policy);
    by.set(cls, [...(by.get(cls) ?? []), l]);
  }
  const { granted, deferred } = withinBudget(by.get('clock') ?? [], k);
  for (const l of deferred) l.reason = deferredReason(k);
  const listed = [...(by.get('event') ?? []), ...(by.get('changed') ?? []), ...(by.get('forced') ?? []), ...granted];
  const staleness: number[] = [];
  for (const l of listed) {
    staleness.push(now - l.lastPolledAt.getTime());
    const changed = changes.has(l.scope) || (by.get('event') ?? []).includes(l);
    const plan = pollingAfter({ kind: 'project', covered: false, changed, unchangedBefore: l.unchangedPolls, polledAt: new Date(now) }, policy);
    Object.assign(l, {
      lastPolledAt: new Date(now),
      nextDueAt: plan.nextDueAt,
      unchangedPolls: plan.unchangedPolls,
      reason: plan.reason,
      touchedAt: null,
      polls: l.polls + 1,
    });
  }
  return {
    listed: listed.length,
    granted: granted.map((l) => l.scope),
    deferred: deferred.length,
    forced: (by.get('forced') ?? []).length,
    exempt: listed.length - granted.length,
    staleness,
  };
}

test('the budget defaults to the resources served and is overridden by SYNC_POLLS_PER_PASS', () => {
  assert.equal(pollsPerPass({ incrementalMs: 1, fullMs: 2 }, 13), 13);
  assert.equal(pollsPerPass({ incrementalMs: 1, fullMs: 2, pollsPerPass: 0 }, 13), 13);
  assert.equal(pollsPerPass({ incrementalMs: 1, fullMs: 2, pollsPerPass: 3 }, 13), 3);
  assert.equal(pollsPerPass({ incrementalMs: 1, fullMs: 2 }, 0), 1);
});

test("a stream's first load is not a change: it is due after one period, within the budget", () => {
  const [l] = firstListed(1);
  assert.equal(l!.reason, 'first listed: every 15 min');
  assert.equal(l!.unchangedPolls, 0);
  assert.equal(pollClass(l!, new Date(t0 + 15 * minute), policy), 'clock');
  // A change found, though, is listed at the next pass whatever the budget.
  const plan = pollingAfter({ kind: 'project', covered: false, changed: true, unchangedBefore: 4, polledAt: new Date(t0) }, policy);
  assert.equal(pollClass({ ...l!, ...plan, lastPolledAt: new Date(t0) }, new Date(t0 + 15 * minute), policy), 'changed');
  // An event, at once; a last poll a full-pass period old (less the slack), forced.
  assert.equal(pollClass({ ...l!, touchedAt: new Date(t0 + minute) }, new Date(t0 + 2 * minute), policy), 'event');
  assert.equal(pollClass({ ...l!, nextDueAt: new Date(t0 + 48 * 60 * minute) }, new Date(t0 + (24 * 60 - 7.5) * minute), policy), 'forced');
  assert.equal(pollClass(l!, new Date(t0 + 5 * minute), policy), 'not-due');
});

test('the most overdue first; ties in a stable order that differs between accounts', () => {
  const due = (scope: string, at: number) => ({ resource: 'r', scope, nextDueAt: new Date(at) });
  const { granted, deferred } = withinBudget([due('project=a', t0 + 2), due('project=b', t0), due('project=c', t0 + 1)], 2);
  assert.deepEqual(
    granted.map((g) => g.scope),
    ['project=b', 'project=c'],
  );
  assert.deepEqual(
    deferred.map((g) => g.scope),
    ['project=a'],
  );
  const tied = Array.from({ length: 50 }, (_, i) => due(`project=${i}`, t0));
  const first = withinBudget(tied, 10).granted.map((g) => g.scope);
  assert.deepEqual(
    withinBudget([...tied].reverse(), 10).granted.map((g) => g.scope),
    first,
    'the same order whatever order they come in',
  );
  assert.notDeepEqual(
    first,
    tied.slice(0, 10).map((g) => g.scope),
    'not the lists in their order of creation',
  );
  assert.notEqual(scopeHash('r', 'project=1'), scopeHash('r', 'project=2'));
  assert.equal(withinBudget(tied, -3).granted.length, 0);
});

test('500 lists that back off in step, 13 a pass: never staler than the full-pass period, at most K + forced a pass', () => {
  const k = 13;
  const lists = firstListed(500);
  const bound = policy.fullMs;
  const perPass: { at: number; listed: number; forced: number; exempt: number }[] = [];
  // Three days of passes every 15 minutes (no full pass: the bound must hold by itself), a few lists
  // changing now and then (each such list is listed the pass after, outside the budget).
  let seed = 7;
  const random = () => (seed = (Math.imul(seed, 1103515245) + 12345) >>> 0) / 2 ** 32;
  for (let i = 1; i <= 3 * 96; i++) {
    const now = t0 + i * policy.incrementalMs;
    const changes = new Set(lists.filter(() => random() < 0.002).map((l) => l.scope));
    const r = pass(lists, now, k, changes);
    perPass.push({ at: i * 15, listed: r.listed, forced: r.forced, exempt: r.exempt });
    assert.ok(r.listed - r.exempt <= k, `pass at +${i * 15} min: ${r.listed - r.exempt} lists by their clock, budget ${k}`);
    for (const s of r.staleness) assert.ok(s <= bound, `pass at +${i * 15} min listed a list ${s / minute} min after its last poll`);
    for (const l of lists)
      assert.ok(now - l.lastPolledAt.getTime() < bound, `pass at +${i * 15} min: ${l.scope} last polled ${(now - l.lastPolledAt.getTime()) / minute} min ago`);
  }
  // The idle passes of the first two hours (bench [9]'s "later passes"): the budget, no more.
  const firstTwoHours = perPass.slice(0, 8).map((p) => p.listed);
  assert.ok(
    firstTwoHours.every((n) => n <= k + 3),
    JSON.stringify(firstTwoHours),
  );
  // Every list was polled on its own clock more than once a day on average: the budget is spent.
  const polls = lists.reduce((a, l) => a + l.polls, 0);
  assert.ok(polls >= 500 * 3, `${polls} polls of 500 lists in three days`);
  // The pass budget spreads them: once spread, no pass lists hundreds because they came due together.
  const lastDay = perPass.slice(2 * 96);
  assert.ok(Math.max(...lastDay.map((p) => p.listed)) <= 4 * k, JSON.stringify(lastDay.filter((p) => p.listed > 2 * k)));
});
