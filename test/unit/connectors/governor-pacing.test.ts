import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import {
  baseSpacing,
  blockAfterRejection,
  learnWindowMs,
  observeWindow,
  paceFor,
  reserveSlot,
  resetSlack,
  type PacingOptions,
} from '../../../connectors/governor/pacing.ts';

const exact: PacingOptions = { utilization: 1, resetSlackMs: 0 };
const t0 = 1_700_000_000_000;

describe('baseSpacing', () => {
  it('spreads a full window evenly, less the utilization margin', () => {
    assert.equal(baseSpacing({ total: 150, windowMs: 60_000 }, exact), 400);
    assert.ok(Math.abs(baseSpacing({ total: 150, windowMs: 60_000 }) - 60_000 / 147) < 1e-9);
    assert.equal(baseSpacing({ windowMs: 60_000 }, exact), 0, 'an unknown total does not pace');
    assert.equal(baseSpacing({ total: 0, windowMs: 60_000 }, exact), 60_000);
  });
});

describe('resetSlack', () => {
  it('is capped by the gap even pacing leaves before each reset', () => {
    assert.equal(resetSlack(60_000, { utilization: 0.98, resetSlackMs: 1000 }), 1000);
    assert.ok(Math.abs(resetSlack(1_000, { utilization: 0.98, resetSlackMs: 1000 }) - 1000 * (1 / 0.98 - 1)) < 1e-9);
    assert.equal(resetSlack(60_000, exact), 0);
  });
});

describe('paceFor', () => {
  it('without a reset time, paces evenly by total and window whatever remains', () => {
    assert.deepEqual(paceFor({ facts: { windowMs: 60_000, total: 150, remaining: 3 }, now: t0 }, exact), { spacingMs: 400 });
    assert.deepEqual(paceFor({ facts: { windowMs: 60_000, total: 150, remaining: 0 }, now: t0 }, exact), { spacingMs: 400 });
  });
  it('spreads what remains evenly until the reset when that is slower than the full-window pace', () => {
    // 10 left for the next 30 s: one every 3 s, not ten at once and then a wait.
    const pace = paceFor({ facts: { windowMs: 60_000, total: 100, remaining: 10, resetsAt: t0 + 30_000 }, now: t0 }, exact);
    assert.deepEqual(pace, { spacingMs: 3_000 });
    // Plenty left: the full-window pace rules.
    assert.deepEqual(paceFor({ facts: { windowMs: 60_000, total: 100, remaining: 90, resetsAt: t0 + 30_000 }, now: t0 }, exact), { spacingMs: 600 });
  });
  it('starts spreading at the end of the schedule and counts our requests the upstream has not seen', () => {
    const facts = { windowMs: 60_000, total: 100, remaining: 10, resetsAt: t0 + 30_000 };
    assert.deepEqual(paceFor({ facts, now: t0, nextAt: t0 + 10_000, unseen: 5 }, exact), { spacingMs: 4_000 });
  });
  it('a spent window blocks until its reset even when the schedule already reaches past it', () => {
    // The schedule's next slot lies past the reset (the last request was spread over what was left),
    // and the window, reported spent, is now paced by another length (25 ms): an interactive request
    // takes its slot a spacing before the schedule's next, which without the block fell before the
    // reset (a 429, governor-dual-window.test.ts).
    const facts = { windowMs: 1_000, total: 40, remaining: 0, resetsAt: t0 + 1_419 };
    const pace = paceFor({ facts, now: t0, nextAt: t0 + 1_440 }, exact);
    assert.deepEqual(pace, { spacingMs: 25, blockedUntil: t0 + 1_419 });
  });
  it('a long window (an hourly budget) is paced by its reset even though the window length is a guess', () => {
    const pace = paceFor({ facts: { windowMs: 60_000, total: 3600, remaining: 3599, resetsAt: t0 + 3_599_000 }, now: t0 }, exact);
    assert.equal(pace.spacingMs, 1_000);
  });
  it('a guessed window length yields to a sooner reset: the first answer of a 2 s window paces it, not the 60 s guess', () => {
    const opts = { utilization: 0.98, resetSlackMs: 1000 };
    const first = { windowMs: 60_000, lengthGuessed: true, total: 20, remaining: 19, resetsAt: t0 + 2_000 };
    // 19 left over the 2 s to the reset (and its slack, scaled to that span): ~107 ms apart, not 3 s.
    const pace = paceFor({ facts: first, now: t0 }, opts);
    assert.ok(Math.abs(pace.spacingMs - (2_000 + resetSlack(2_000, opts)) / 19) < 1e-3, String(pace.spacingMs));
    // Past the reset, or once spent, the guess holds until the headers teach the length.
    assert.deepEqual(paceFor({ facts: first, now: t0 + 2_500 }, opts), { spacingMs: 60_000 / (20 * 0.98) });
    assert.deepEqual(paceFor({ facts: { ...first, remaining: 0 }, now: t0 }, opts), {
      spacingMs: 60_000 / (20 * 0.98),
      blockedUntil: t0 + 2_000 + resetSlack(2_000, opts),
    });
    // A learned length paces as before.
    const { lengthGuessed: _g, ...learned } = first;
    assert.deepEqual(paceFor({ facts: learned, now: t0 }, opts), { spacingMs: 60_000 / (20 * 0.98) });
    // The guess is dropped once two resets show the length.
    const next = observeWindow(first, { total: 20, remaining: 19, resetsAt: t0 + 4_000 }, t0 + 2_050);
    assert.equal(next.windowMs, 2_000);
    assert.equal(next.lengthGuessed, undefined);
    assert.equal(observeWindow(first, { total: 20, remaining: 10, resetsAt: t0 + 2_000 }, t0 + 1_000).lengthGuessed, true, 'same window: still a guess');
  });
  it('waits for the reset when the budget is spent, or will be by requests in flight', () => {
    const opts = { utilization: 0.98, resetSlackMs: 500 };
    assert.deepEqual(paceFor({ facts: { windowMs: 60_000, total: 100, remaining: 0, resetsAt: t0 + 20_000 }, now: t0 }, opts), {
      spacingMs: 60_000 / 98,
      blockedUntil: t0 + 20_500,
    });
    assert.equal(paceFor({ facts: { windowMs: 60_000, total: 100, remaining: 2, resetsAt: t0 + 20_000 }, now: t0, unseen: 2 }, opts).blockedUntil, t0 + 20_500);
  });
  it('ignores a reset in the past, and spreads nothing past one the schedule already reaches', () => {
    assert.deepEqual(paceFor({ facts: { windowMs: 60_000, total: 150, remaining: 0, resetsAt: t0 - 1 }, now: t0 }, exact), { spacingMs: 400 });
    assert.deepEqual(paceFor({ facts: { windowMs: 60_000, total: 150, remaining: 5, resetsAt: t0 + 1000 }, now: t0, nextAt: t0 + 1000 }, exact), {
      spacingMs: 400,
    });
    // Spent, it still blocks until the reset (no slot before it, an early one included).
    assert.deepEqual(paceFor({ facts: { windowMs: 60_000, total: 150, remaining: 0, resetsAt: t0 + 1000 }, now: t0, nextAt: t0 + 1000 }, exact), {
      spacingMs: 400,
      blockedUntil: t0 + 1000,
    });
  });
  it('in steady state at the full-window pace, the adaptive pace never slows it down', () => {
    // Fixed window of 150 from t0, paced at 0.98: after k requests the upstream reports 150 - k and
    // `inFlight` more are reserved ahead at the even spacing.
    const opts = { utilization: 0.98, resetSlackMs: 1000 };
    const spacing = baseSpacing({ total: 150, windowMs: 60_000 }, opts);
    for (let k = 1; k < 147; k++) {
      for (const inFlight of [0, 3, 10]) {
        const now = t0 + (k - 1) * spacing + 50;
        const pace = paceFor(
          { facts: { windowMs: 60_000, total: 150, remaining: 150 - k, resetsAt: t0 + 60_000 }, now, nextAt: t0 + (k + inFlight) * spacing, unseen: inFlight },
          opts,
        );
        // A block (the requests in flight spend the window) comes no later than the schedule's next slot.
        assert.ok(pace.blockedUntil === undefined || pace.blockedUntil <= t0 + (k + inFlight) * spacing, `k=${k}`);
        assert.ok(Math.abs(pace.spacingMs - spacing) < 1e-9, `k=${k} inFlight=${inFlight}: ${pace.spacingMs}`);
      }
    }
  });
});

describe('blockAfterRejection', () => {
  it('blocks until the reported reset, else for a whole window', () => {
    const opts = { utilization: 0.98, resetSlackMs: 250 };
    assert.equal(blockAfterRejection({ windowMs: 60_000, total: 150, remaining: 0, resetsAt: t0 + 7_000 }, t0, opts), t0 + 7_250);
    assert.equal(blockAfterRejection({ windowMs: 60_000, total: 150, remaining: 0 }, t0, opts), t0 + 60_250);
    assert.equal(blockAfterRejection({ windowMs: 60_000, total: 150, remaining: 0, resetsAt: t0 - 5 }, t0, opts), t0 + 60_250);
  });
});

describe('observeWindow', () => {
  it('takes the latest report, but not one older than what is known of the same window', () => {
    const known = { windowMs: 60_000, total: 150, remaining: 40, resetsAt: t0 + 9_000 };
    assert.deepEqual(observeWindow(known, { total: 150, remaining: 39, resetsAt: t0 + 9_000 }), { ...known, remaining: 39 });
    assert.deepEqual(observeWindow(known, { total: 150, remaining: 41, resetsAt: t0 + 9_000 }), known);
    assert.deepEqual(observeWindow(known, { total: 150, remaining: 149, resetsAt: t0 + 69_000 }), { ...known, remaining: 149, resetsAt: t0 + 69_000 });
    assert.deepEqual(observeWindow({ windowMs: 60_000, total: 150 }, { total: 600, remaining: 5 }), { windowMs: 60_000, total: 600, remaining: 5 });
  });

  it('keeps the known window when an answer from the window before it comes back late', () => {
    // A 5 s window first seen at t0 + 100 (reset by t0 + 5,100); then the answer to a request sent in
    // the window before, slow to come back: its reset, 5 s earlier, is past, and its count is that window's.
    const known = { windowMs: 5_000, total: 10, remaining: 9, resetsAt: t0 + 6_000, resetBound: t0 + 5_100 };
    assert.deepEqual(observeWindow(known, { total: 10, remaining: 0, resetsAt: t0 + 1_000 }, t0 + 900, t0 - 1_000), known);
    // The length it teaches is still taken: a request that began its window bounds the length.
    const guessed = { windowMs: 60_000, total: 10, remaining: 9, resetsAt: t0 + 6_000, lengthGuessed: true };
    assert.deepEqual(observeWindow(guessed, { total: 10, remaining: 9, resetsAt: t0 + 1_000 }, t0 + 900, t0 - 4_000), {
      windowMs: 5_000,
      total: 10,
      remaining: 9,
      resetsAt: t0 + 6_000,
    });
    // Less than a resolution earlier: the same reset, rounded another way; taken.
    assert.equal(observeWindow(known, { total: 10, remaining: 8, resetsAt: t0 + 5_500 }, t0 + 900).remaining, 8);
    // A known reset further ahead than a window is no window's (a clock that jumped): replaced.
    const far = { ...known, resetsAt: t0 + 600_000, resetBound: t0 + 600_000 };
    assert.equal(observeWindow(far, { total: 10, remaining: 8, resetsAt: t0 + 5_000 }, t0 + 900).resetsAt, t0 + 5_000);
  });

  it('bounds the reset of a window by its first answer seen plus the window, tighter than whole seconds', () => {
    // A 2 s window first seen in an answer at t0 + 120: it resets by t0 + 2,120, though the header
    // (whole seconds, rounded up) says t0 + 3,000.
    const known = { windowMs: 2_000, total: 20, remaining: 0, resetsAt: t0 + 1_000 };
    const opened = observeWindow(known, { total: 20, remaining: 19, resetsAt: t0 + 3_000 }, t0 + 120);
    assert.equal(opened.resetBound, t0 + 2_120);
    assert.equal(opened.resetsAt, t0 + 3_000);
    // Kept through the window; the pace spreads what is left until the bound, not the header's second.
    const later = observeWindow(opened, { total: 20, remaining: 10, resetsAt: t0 + 3_000 }, t0 + 1_000);
    assert.equal(later.resetBound, t0 + 2_120);
    assert.ok(Math.abs(paceFor({ facts: later, now: t0 + 1_000 }).spacingMs - (2_120 + resetSlack(2_000) - 1_000) / 10) < 1e-3);
    // Seen later in the window (others spent some of it): a looser bound, still never early.
    assert.equal(observeWindow(known, { total: 20, remaining: 15, resetsAt: t0 + 3_000 }, t0 + 500).resetBound, t0 + 2_500);
    // A window length not learned yet: the header alone.
    assert.equal(observeWindow({ windowMs: 60_000 }, { total: 20, remaining: 19, resetsAt: t0 + 3_000 }, t0 + 120).resetBound, undefined);
  });
});

describe('learnWindowMs', () => {
  const known = { windowMs: 60_000, total: 20, remaining: 3, resetsAt: t0 + 1_000 };
  it('learns a shorter window from the distance between two resets once the budget came back', () => {
    // Three 2 s windows went by unseen: an upper bound, never below the real length.
    assert.equal(learnWindowMs(known, { total: 20, remaining: 19, resetsAt: t0 + 7_000 }), 6_000);
    // Then two consecutive windows: the real length.
    assert.equal(learnWindowMs({ ...known, windowMs: 6_000 }, { total: 20, remaining: 18, resetsAt: t0 + 3_000 }), 2_000);
    assert.equal(observeWindow(known, { total: 20, remaining: 19, resetsAt: t0 + 3_000 }).windowMs, 2_000);
  });
  it('never lengthens what is known, and ignores reports that do not show a new window', () => {
    assert.equal(learnWindowMs({ ...known, windowMs: 2_000 }, { total: 20, remaining: 19, resetsAt: t0 + 61_000 }), 2_000);
    assert.equal(learnWindowMs(known, { total: 20, remaining: 2, resetsAt: t0 + 1_000 }), 60_000, 'same window');
    assert.equal(learnWindowMs(known, { total: 20, remaining: 2, resetsAt: t0 + 2_000 }), 60_000, 'a moving reset without budget returned (sliding)');
    assert.equal(learnWindowMs({ windowMs: 60_000 }, { total: 20, remaining: 19, resetsAt: t0 + 2_000 }), 60_000, 'a first report');
    assert.equal(learnWindowMs(known, { total: 20, remaining: 19, resetsAt: t0 + 1_200 }), 1_000, 'floored at 1 s');
    assert.equal(learnWindowMs({ ...known, remaining: 19 }, { total: 20, remaining: 19, resetsAt: t0 + 5_000 }), 4_000, 'one request in each of two windows');
    assert.equal(learnWindowMs({ ...known, remaining: 15 }, { total: 20, remaining: 15, resetsAt: t0 + 5_000 }), 60_000, 'no budget back');
  });
});

describe('reserveSlot', () => {
  it('spaces consecutive requests evenly and does not bank an idle budget', () => {
    let schedules = [{ nextAt: 0, spacingMs: 400 }];
    const slots: number[] = [];
    for (let i = 0; i < 4; i++) {
      const r = reserveSlot(schedules, t0);
      slots.push(r.at);
      schedules = r.schedules;
    }
    assert.deepEqual(slots, [t0, t0 + 400, t0 + 800, t0 + 1200]);
    // Idle for a minute: the next request goes at once, and the one after a spacing later.
    const later = reserveSlot(schedules, t0 + 60_000);
    assert.equal(later.at, t0 + 60_000);
    assert.equal(later.schedules[0]!.nextAt, t0 + 60_400);
  });
  it("a lane's schedule banks one spacing: a slot taken late does not push its later slots back", () => {
    const lane = { nextAt: t0, spacingMs: 125, banks: true };
    // Taken 40 ms late: the next slot stays on the schedule (t0 + 250), not 40 ms later.
    const r = reserveSlot([lane], t0 + 40);
    assert.equal(r.schedules[0]!.nextAt, t0 + 125);
    // Idle for long: one slot banked, no more.
    const idle = reserveSlot([lane], t0 + 60_000);
    assert.equal(idle.schedules[0]!.nextAt, t0 + 60_000);
    // Without banking: from the slot taken.
    assert.equal(reserveSlot([{ nextAt: t0, spacingMs: 125 }], t0 + 40).schedules[0]!.nextAt, t0 + 165);
  });
  it('the budget of a lane counts a background slot from when it was due, never banking idle time', () => {
    const lane = { nextAt: t0 + 107, spacingMs: 107, banks: true };
    const main = { nextAt: t0 + 102, spacingMs: 102 };
    // Due at t0 + 107 (the lane's), taken 40 ms late: the budget's next slot a spacing after the due time.
    const r = reserveSlot([main, lane], t0 + 147, false, [true, false]);
    assert.equal(r.at, t0 + 147);
    assert.equal(r.schedules[0]!.nextAt, t0 + 209);
    assert.equal(r.schedules[1]!.nextAt, t0 + 214);
    // Idle for long (late by more than a spacing): from the slot taken, as without.
    assert.equal(reserveSlot([main, lane], t0 + 60_000, false, [true, false]).schedules[0]!.nextAt, t0 + 60_102);
  });
  it('an early (interactive) request goes right behind the last slot, and the schedule moves one spacing on', () => {
    const main = { nextAt: t0 + 100, spacingMs: 102 };
    const r = reserveSlot([main], t0 + 10, true);
    assert.equal(r.at, t0 + 10);
    assert.equal(r.schedules[0]!.nextAt, t0 + 202);
    // One early slot per spacing: the next early request waits for the schedule.
    assert.equal(reserveSlot(r.schedules, t0 + 10, true).at, t0 + 100);
    // Never before a block.
    assert.equal(reserveSlot([{ ...main, blockedUntil: t0 + 500 }], t0 + 10, true).at, t0 + 500);
  });
  it('an early request takes no slot of a window its reserved slots spent, and counts the ones it takes', () => {
    // The last report left one request before the reset; a background slot took it.
    const one = { nextAt: t0 - 27, spacingMs: 102, resetAt: t0 + 2, left: 1 };
    const taken = reserveSlot([one], t0 - 27);
    assert.equal(taken.schedules[0]!.left, 0);
    // An application's call right behind it waits for the reset instead of going a spacing early.
    assert.equal(reserveSlot(taken.schedules, t0 - 20, true).at, t0 + 2);
    // With room left in the window, a spacing early as before, though the next slot lies past the reset.
    const room = reserveSlot([{ ...one, left: 3 }], t0 - 27).schedules;
    assert.equal(reserveSlot(room, t0 - 20, true).at, t0 - 20);
    // Past the reset the count is not the window's: nothing is taken from it.
    assert.equal(reserveSlot([{ ...one, left: 0 }], t0 + 5).schedules[0]!.left, 0);
  });
  it('with two windows, waits for the later one and spends one slot of each', () => {
    const service = { nextAt: t0 + 400, spacingMs: 400 };
    const source = { nextAt: t0 + 1000, spacingMs: 1000 };
    const r = reserveSlot([service, source], t0);
    assert.equal(r.at, t0 + 1000);
    assert.deepEqual(
      r.schedules.map((s) => s.nextAt),
      [t0 + 1400, t0 + 2000],
    );
  });
  it('nothing before a block, then the even pace resumes from it', () => {
    const r = reserveSlot([{ nextAt: t0, spacingMs: 400, blockedUntil: t0 + 30_000 }], t0 + 5);
    assert.equal(r.at, t0 + 30_000);
    assert.equal(r.schedules[0]!.nextAt, t0 + 30_400);
  });
});
