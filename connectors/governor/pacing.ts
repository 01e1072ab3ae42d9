// The governor's arithmetic, with no I/O and no clock of its own: how far apart requests must go so a
// window's budget is spent evenly across it, when a spent window (or a 429) forbids any request, and
// which send slot a request gets when several windows apply at once.
import type { RateLimitWindow } from '../rate-limit-headers.ts';

export interface PacingOptions {
  /**
   * Share of a window's budget to plan for. Below 1 it leaves a gap before each reset that absorbs
   * jitter between our clock, the network and the upstream's counter (0.98 leaves 2% of the window).
   */
  utilization: number;
  /** Extra wait after a reported reset (reset timestamps are whole seconds and clocks differ). */
  resetSlackMs: number;
}

export const defaultPacing: PacingOptions = { utilization: 0.98, resetSlackMs: 1000 };

/** What is known of one window. */
export interface WindowFacts {
  /** Length of the window (60 s for the service; "typically 60 s" for source systems). */
  windowMs: number;
  /** Requests allowed per window, as reported (or the first guess before any report). */
  total?: number;
  /** Requests left in the current window, as last reported. */
  remaining?: number;
  /** Epoch ms when the current window resets, when the upstream says (whole seconds, rounded up). */
  resetsAt?: number;
  /**
   * A tighter bound on the same reset, never earlier than the real one: the window began before the
   * first answer seen from it came back, so it resets no later than that plus its length.
   * Whole-second reset headers can otherwise be up to a second late, which in a short window
   * spreads the budget over time that is not the window's.
   */
  resetBound?: number;
  /**
   * The length is only the first guess (a source system's "typically 60 s"): not yet learned from
   * the headers (two resets seen, or taken from another process that saw them). Until then a window known to reset sooner is paced by what is left of it (see
   * {@link pacedSpan}).
   */
  lengthGuessed?: boolean;
}

/** The pacing of one budget: how far apart its send slots are, and none before `blockedUntil`. */
export interface Pace {
  spacingMs: number;
  blockedUntil?: number;
  /** A background lane's schedule is moved on to this slot at least (see {@link laneAnchor}). */
  anchor?: LaneAnchor;
  /** Requests the window has left before its reset, by the report less ours it cannot have counted (see Schedule.left). */
  left?: number;
}

/**
 * Where a background lane's next slot may come at the earliest once one of its requests is answered
 * from a window: it is at least the lane's second request of that window, so it comes no earlier than
 * `spanMs` (the slots the window holds after its first, at the lane's spacing) before the window's
 * end. `notBefore` is that slot by this process's bound on the end; a store shared by processes takes
 * the tightest bound any of them knows, less `spanMs`.
 */
interface LaneAnchor {
  notBefore: number;
  spanMs: number;
}

/** The even spacing of a full window: `windowMs / (total × utilization)`; 0 when the total is unknown. */
export function baseSpacing(facts: Pick<WindowFacts, 'total' | 'windowMs'>, options: PacingOptions = defaultPacing): number {
  if (facts.total === undefined) return 0;
  if (facts.total <= 0) return facts.windowMs;
  return facts.windowMs / (facts.total * options.utilization);
}

/**
 * The slack added after a reset, capped by the gap that even pacing leaves before each reset anyway
 * (`windowMs × (1/utilization − 1)`), so in steady state waiting for a reset costs no throughput.
 */
export function resetSlack(windowMs: number, options: PacingOptions = defaultPacing): number {
  return Math.max(0, Math.min(options.resetSlackMs, windowMs * (1 / options.utilization - 1)));
}

/**
 * The length of window that pacing assumes. A learned length as it is. A guessed one (60 s until two
 * resets are seen) yields to a reset in sight: the first answer of a 2 s window says it resets in
 * 2 s, and pacing 20 requests over the guessed 60 s (3 s apart) would leave the first windows all
 * but unused and hold an application's call for seconds. Spending what the window has left before
 * the reset it reports is safe whatever its length; the length itself is learned at the next reset.
 */
function pacedSpan(facts: WindowFacts, now: number): number {
  if (!facts.lengthGuessed) return facts.windowMs;
  const known = countToReset(facts, now);
  return known ? Math.min(facts.windowMs, known.resetsAt - now) : facts.windowMs;
}

/** The count a report left and the reset it runs to (its latest bound), when both are known and the reset lies ahead. */
function countToReset(facts: WindowFacts, now: number): { remaining: number; resetsAt: number } | undefined {
  const resetsAt = facts.resetBound ?? facts.resetsAt;
  if (resetsAt === undefined || facts.remaining === undefined || resetsAt <= now) return undefined;
  return { remaining: facts.remaining, resetsAt };
}

/**
 * The spacing of a budget's background lane (the sync share): the window's even pace, `1 / share`
 * slower. It keeps the window's utilization margin: the sandbox's windows start with their first
 * request, so a window that began with a late one would otherwise hold one lane slot more than the
 * share (the integration test counted 6 of 5 with the margin left out).
 */
export function laneSpacing(facts: WindowFacts, now: number, share: number, options: PacingOptions = defaultPacing): number {
  return baseSpacing({ total: facts.total, windowMs: pacedSpan(facts, now) }, options) / share;
}

interface PaceInput {
  facts: WindowFacts;
  now: number;
  /** The earliest slot not yet reserved (the end of the schedule); spreading starts there. */
  nextAt?: number;
  /** Our requests reserved before the reset that the reported `remaining` cannot have counted yet. */
  unseen?: number;
}

/**
 * The pace that spends what is left of the window evenly until its reset:
 * - never faster than the full window's even spacing (`baseSpacing`);
 * - with a reset time, what remains (less our requests the upstream has not counted yet) is spread
 *   over the time left from the end of the schedule to the reset, so a budget that others share
 *   (the same account's other clients) is not spent in a burst and then waited out;
 * - when nothing remains, no request until the reset.
 * Without a reset time `remaining` says nothing about when budget returns (the window may slide), so
 * the even spacing alone keeps any span of one window within `total`.
 */
export function paceFor(input: PaceInput, options: PacingOptions = defaultPacing): Pace {
  const { facts, now } = input;
  const base = baseSpacing(facts, options);
  const known = countToReset(facts, now);
  if (!known) return { spacingMs: base };
  const { resetsAt } = known;
  const from = Math.max(now, input.nextAt ?? now);
  // A guessed length yields to the reset in sight, for spending what is left before it; past the
  // reset (a block, a schedule beyond it) the guess holds until the headers teach the length.
  const span = pacedSpan(facts, now);
  const slack = resetSlack(span, options);
  const left = known.remaining - (input.unseen ?? 0);
  // A spent window blocks until its reset even when the schedule already reaches past it: an
  // interactive request may take its slot a spacing before the schedule's next, and that spacing is
  // the new one (the window switched to another of the system's limits, paced 1 s apart: 25 ms).
  if (left <= 0) return { spacingMs: base, blockedUntil: resetsAt + slack };
  if (from >= resetsAt) return { spacingMs: base };
  // `left` slots from `from` on, the last of them a spacing before the reset (plus slack).
  return { spacingMs: Math.max(baseSpacing({ total: facts.total, windowMs: span }, options), (resetsAt + slack - from) / left) };
}

/** What a report leaves of its window before the reset, less our requests it cannot have counted; unknown without a reset ahead. */
export function windowLeft(facts: WindowFacts, now: number, unseen: number): number | undefined {
  const known = countToReset(facts, now);
  return known && known.remaining - unseen;
}

/**
 * The anchor of a background lane after one of its requests was answered from the window `facts`
 * report: its next slot no earlier than `ceil(window / spacing) - 1` spacings before the window's
 * latest end. The lane's slots are spaced from its schedule, not from when they reached the upstream,
 * and the slot that began a window may have reached it late (the store's answer, the event loop and
 * the network between them: 200 ms of that put 6 of 5 in a window in 36 of 60 simulated runs,
 * governor-window-edge.test.ts), after a reset that the schedule took it to precede; from its answer
 * on, the lane's slots of that window are counted from where the window really is. Only with the
 * window's end known to the ms (a whole-second header alone may be a second late, and a lane held a
 * second for nothing in each window starved the application's share of a system's other, longer
 * window in governor-dual-window.test.ts); not while the window's length is a guess, nor for a reset
 * further than a window away (another of the system's limits, an hourly one, is reported).
 */
export function laneAnchor(facts: WindowFacts, spacingMs: number, now: number): LaneAnchor | undefined {
  // A reset known to the ms: a bound from an answer's time, or a header that is not whole seconds.
  const end = facts.resetBound ?? (facts.resetsAt !== undefined && resetResolution(facts.resetsAt) === 1 ? facts.resetsAt : undefined);
  if (end === undefined || facts.lengthGuessed || !(spacingMs > 0) || end <= now || end - now > facts.windowMs) return undefined;
  const spanMs = (slotsPerWindow(facts.windowMs, spacingMs) - 1) * spacingMs;
  return { notBefore: end - spanMs, spanMs };
}

/** After a 429: nothing until the window resets (a whole window from now when the reset is unknown). */
export function blockAfterRejection(facts: WindowFacts, now: number, options: PacingOptions = defaultPacing): number {
  const resetsAt = facts.resetsAt !== undefined && facts.resetsAt > now ? facts.resetsAt : now + facts.windowMs;
  return resetsAt + resetSlack(facts.windowMs, options);
}

/**
 * The window's length, learned from two reports of it: the headers give a window's total and its
 * reset time, never its length. When a later report names a later reset and its budget came back
 * (more remaining than before, or all of it but our request), a new window began, and the distance between the two resets is a
 * whole number of windows: at least one window long, so the smaller of it and what was known is
 * never shorter than the real window (no 429 for pacing too fast), and converges on it as soon as
 * two consecutive windows are seen. Resets are whole seconds, hence the 1 s floor. Also from one
 * answer, when our request (sent at `sentAt`) began the window: see {@link freshSpan}.
 */
export function learnWindowMs(previous: WindowFacts, reported: RateLimitWindow, sentAt?: number): number {
  return Math.min(previous.windowMs, resetDistance(previous, reported) ?? Infinity, freshSpan(reported, sentAt) ?? Infinity);
}

/**
 * The span from our request to the reset of a window it began: the answer counts it as the window's
 * only request (all of the total remains but ours), so the window began after the request was sent
 * and resets no later than `sentAt` plus its length; the span is at least the window's length (the
 * reset's whole-second rounding only adds to it), never shorter. It teaches a first length from the
 * very first answer, instead of keeping the 60 s guess until a second reset: past the first reset
 * the guess paced one slot 3 s after the last (60 s / 20 / 0.98, for 20 per 2 s window), which the
 * length learned a moment later could not take back, and an application's call behind it waited
 * 1.4 s or was refused (governor-first-reset.test.ts; bench [10] saw a 300 ms wait in its second
 * window). Like the reset times it compares our clock with the upstream's: a clock of theirs behind
 * ours by d reads d short, as `resetBound` would.
 */
function freshSpan(reported: RateLimitWindow, sentAt: number | undefined): number | undefined {
  if (sentAt === undefined || reported.resetsAt === undefined || reported.total === undefined) return undefined;
  if (reported.remaining !== reported.total - 1 || reported.resetsAt <= sentAt) return undefined;
  return Math.max(1_000, reported.resetsAt - sentAt);
}

/** The distance between two resets when a new window began between them (see learnWindowMs). */
function resetDistance(previous: WindowFacts, reported: RateLimitWindow): number | undefined {
  if (reported.resetsAt === undefined || previous.resetsAt === undefined || previous.remaining === undefined) return undefined;
  const distance = reported.resetsAt - previous.resetsAt;
  // A window whose only request is ours began after the previous one ended, whatever was left then.
  const fresh = reported.total !== undefined && reported.remaining === reported.total - 1;
  if (distance <= 0 || (reported.remaining <= previous.remaining && !fresh)) return undefined;
  return Math.max(1_000, distance);
}

/**
 * Folds one reported window into what is known, ignoring a report that arrives after a fresher one.
 * `receivedAt` (when its response came back) bounds the reset of a window first seen in it (see
 * {@link WindowFacts.resetBound}); `sentAt` (when its request went) bounds the length of a window
 * the request began (see {@link freshSpan}).
 */
export function observeWindow(previous: WindowFacts, reported: RateLimitWindow, receivedAt?: number, sentAt?: number): WindowFacts {
  const sameWindow = reported.resetsAt !== undefined && reported.resetsAt === previous.resetsAt;
  const stale = sameWindow && previous.remaining !== undefined && reported.remaining > previous.remaining;
  // Another window than the one last reported: a source system with two limits at once (an hourly and
  // a 10 s one) reports whichever is nearer to running out, told apart by their totals. The length
  // known is the other window's: it neither bounds this one's reset (an hourly window's remainder
  // was spread over 1 s and spent, 4 of 40 answered 429 per window in governor-dual-window.test.ts),
  // nor does the distance between the two windows' resets say anything of either length.
  const otherWindow = previous.remaining !== undefined && previous.total !== undefined && reported.total !== previous.total;
  const windowMs = otherWindow ? Math.min(previous.windowMs, freshSpan(reported, sentAt) ?? Infinity) : learnWindowMs(previous, reported, sentAt);
  const lengthGuessed = previous.lengthGuessed === true && windowMs === previous.windowMs && (otherWindow || resetDistance(previous, reported) === undefined);
  // An answer from a window before the one known (sent before that window began, back after an answer
  // from it): what it says of its window is past, and taken as current it would move the reset back,
  // so a lane's slot at the next window's start would be counted in the window before. Only the
  // length it may teach is kept.
  if (!otherWindow && isEarlierWindow(previous, reported, receivedAt)) {
    const { lengthGuessed: _guessed, ...known } = previous;
    return { ...known, windowMs, ...(lengthGuessed ? { lengthGuessed } : {}) };
  }
  let resetBound: number | undefined;
  if (reported.resetsAt !== undefined) {
    if (sameWindow) resetBound = previous.resetBound;
    // The first answer seen from this window: the window began before it came back.
    else if (receivedAt !== undefined && !otherWindow) resetBound = Math.min(reported.resetsAt, receivedAt + windowMs);
  }
  return {
    windowMs,
    total: reported.total,
    remaining: stale ? previous.remaining : reported.remaining,
    ...(reported.resetsAt !== undefined ? { resetsAt: reported.resetsAt } : {}),
    ...(resetBound !== undefined && resetBound < (reported.resetsAt ?? Infinity) ? { resetBound } : {}),
    ...(lengthGuessed ? { lengthGuessed } : {}),
  };
}

/**
 * The reported reset lies at least a resolution (a second, or a shorter window) before the known one:
 * the limit's windows only follow each other, so the answer came from an earlier window. A known reset
 * further ahead than a window (and a second of rounding) from `receivedAt` is no window's: a report
 * replaces it, so a wrong one cannot make every later report look earlier.
 */
function isEarlierWindow(previous: WindowFacts, reported: RateLimitWindow, receivedAt: number | undefined): boolean {
  if (reported.resetsAt === undefined || previous.resetsAt === undefined) return false;
  if (receivedAt !== undefined && previous.resetsAt > receivedAt + previous.windowMs + 1_000) return false;
  return reported.resetsAt <= previous.resetsAt - Math.min(1_000, previous.windowMs);
}

/** One budget's schedule (a GCRA: the next slot is at least one spacing after the last one). */
export interface Schedule {
  /** The earliest slot not yet reserved (epoch ms). */
  nextAt: number;
  spacingMs: number;
  blockedUntil?: number;
  /**
   * A background lane's schedule (see `syncShare`) banks up to one spacing: a slot taken late (the
   * lane's requests take their slot only just before it is due, and a timer's wake-up and a round
   * trip can make them late, or they wait behind the budget's own schedule when the application just
   * took a slot) does not push the lane's later slots back. Without it the lateness adds up slot after
   * slot: bench [10] measured 14 of the 15.7 a window at share 0.8. Over any span the lane still
   * grants at most one request more than its pace allows.
   */
  banks?: boolean;
  /**
   * A banking lane's view of the window's reset: it lies somewhere in [from, to) (the reported reset is
   * known only to its resolution, a whole second here; `to` is the tightest bound), and of the
   * window's length (none while it is a guess). A slot in that interval may fall in either window,
   * so it counts against both, the window ending and the next; and a slot while the lane's last one
   * may lie before `to` may be the lane's first of the current window. Such a slot banks less (see
   * {@link bankedCredit}), so the window it may begin holds no more lane requests than the spacing
   * allows: banking a full spacing there let a late first slot and the ones banked behind it make 6
   * lane requests in a window of 5 (share 0.5 of 10 per 5 s; governor-window-edge.test.ts).
   */
  edge?: { from: number; to: number; windowMs?: number };
  /** A budget's view of its window's reset (the latest bound known), for an early slot (see {@link earlySlot}). */
  resetAt?: number;
  /**
   * Requests the window has left before `resetAt`: the last report's less our requests it could not
   * count, less the slots reserved before the reset since. Unknown without a report of the window.
   */
  left?: number;
}

/**
 * Reserves one send slot in every schedule at once: the latest of their earliest slots (a request
 * waits for the later window), and each schedule's next slot one of its own spacings after it.
 * An idle budget does not bank unused slots: a slot is never earlier than `now` (a lane's schedule
 * banks one, see {@link Schedule.banks}; its budget's keeps to the due time, see `fromDue`).
 *
 * `fromDue[i]`: schedule `i` is that of a budget whose lane the request also takes (a background
 * request): its next slot counts from when the request's slot was due (the latest of its schedules'
 * next slots and blocks), not from when it was taken, when that was less than a spacing late. The
 * request takes its slot only just before it is due, and may be late by a timer's wake-up and a
 * round trip to the store; counted from the slot taken, that lateness added up in the budget's own
 * schedule, which then held the sync below its lane: with the application's reserve at its floor (the lane only 1 / 0.95 slower
 * than the budget) the sync got 0.70-0.77 of each window, no more than with a fixed share of 0.8 (100
 * per 2 s, ten sync loops of a worker on the Postgres store, two cores shared by many processes;
 * 0.87-0.94 so). Unlike a lane it banks no idle time: a slot never comes before the budget's own
 * schedule. It is the request's, not the schedule's: nothing of it is kept.
 *
 * `early` (an interactive request, an application waiting): the slot may come up to one spacing
 * before the schedule's next (not into a window its reserved slots spent, see {@link earlySlot}),
 * right behind the one taken last, and the schedule moves one spacing on as for any slot. So an application's call does not wait out the spacing of the sync's request just
 * sent (bench [10]: a p99 of two spacings without it); the budget's requests stay as many per window,
 * the background ones behind it going a spacing later, and no two slots but these are closer than a
 * spacing.
 */
export function reserveSlot(
  schedules: readonly Schedule[],
  now: number,
  early = false,
  fromDue: readonly boolean[] = [],
): { at: number; schedules: Schedule[] } {
  let due = Number.NEGATIVE_INFINITY;
  for (const s of schedules) due = Math.max(due, early ? earlySlot(s) : s.nextAt, s.blockedUntil ?? due);
  const at = Math.max(now, due);
  const from = (s: Schedule, i: number) => {
    if (s.banks) return Math.max(s.nextAt, at - bankedCredit(s, at));
    if (fromDue[i] === true && at - due < s.spacingMs) return Math.max(s.nextAt, due);
    return Math.max(s.nextAt, at);
  };
  const spend = (s: Schedule): Schedule => (s.left !== undefined && s.resetAt !== undefined && at < s.resetAt ? { ...s, left: s.left - 1 } : s);
  return { at, schedules: schedules.map((s, i) => spend({ ...s, nextAt: from(s, i) + s.spacingMs })) };
}

/**
 * The earliest an interactive request may take a schedule's slot: a spacing before its next, but not
 * before the window's reset when the slots reserved since the last report spent what it left. The
 * window's count is not the schedule's: a spacing early from a slot the pace put past the reset was one
 * request more than the window held when nothing was left (a 429 a few ms before the reset, with the
 * sync's slots taken 25 ms ahead in governor-reserve.test.ts), and made an application wait for the
 * reset when the window still had room (bench [10]: added wait p99 120 ms of a 100 ms spacing).
 */
function earlySlot(s: Schedule): number {
  const early = s.nextAt - s.spacingMs;
  return s.resetAt !== undefined && s.left !== undefined && s.left <= 0 ? Math.max(early, s.resetAt) : early;
}

/**
 * How late a banking lane's slot at `at` may be without pushing its next slot back: a spacing (see
 * Schedule.banks), less when the slot may be the lane's first of a window (see Schedule.edge), that
 * is while the lane's last slot may lie before the reset's latest bound `to` (it lies no earlier than
 * a spacing before the lane's next free slot). Then the `n`th slot after it (`n = ceil(window /
 * spacing)`, the most a window holds at the lane's spacing) must come no earlier than the latest the
 * slot's window may end, so that window holds no more than `n`: `to` for the current window; a
 * window's length after the slot for the next one, which begins at the reset, some time from `from`
 * on (its own reset is not reported yet; it began at the slot or before). While the window's length
 * is a guess, no credit.
 */
function bankedCredit(s: Schedule, at: number): number {
  const edge = s.edge;
  const spacing = s.spacingMs;
  if (!edge || !(spacing > 0) || s.nextAt - spacing >= edge.to) return spacing;
  const w = edge.windowMs;
  if (w === undefined) return 0;
  let credit = Math.min(spacing, at + slotsPerWindow(w, spacing) * spacing - edge.to);
  if (at >= edge.from) credit = Math.min(credit, windowSlack(w, spacing));
  return Math.max(0, credit);
}

/** The most slots a window holds at this spacing. */
function slotsPerWindow(windowMs: number, spacingMs: number): number {
  return Math.ceil(windowMs / spacingMs - 1e-9);
}

/** The time `ceil(windowMs / spacingMs)` slots take beyond the window, at most a spacing; 0 without a known length. */
export function windowSlack(windowMs: number | undefined, spacingMs: number): number {
  if (windowMs === undefined || !(spacingMs > 0)) return 0;
  return Math.max(0, Math.min(spacingMs, slotsPerWindow(windowMs, spacingMs) * spacingMs - windowMs));
}

/**
 * The interval a window's reported reset may lie in: from the report less its resolution (whole
 * seconds: a reset on a whole second is taken as rounded, one not on it as exact to the ms) to the
 * tightest bound known. Undefined without a reported reset.
 */
export function resetEdge(facts: WindowFacts): { from: number; to: number; windowMs?: number } | undefined {
  if (facts.resetsAt === undefined) return undefined;
  const to = facts.resetBound ?? facts.resetsAt;
  return { from: facts.resetsAt - resetResolution(facts.resetsAt), to, ...(facts.lengthGuessed ? {} : { windowMs: facts.windowMs }) };
}

/** How finely a reported reset is known: a whole second when it falls on one (the header's epoch seconds), else a millisecond. */
export function resetResolution(resetsAt: number): number {
  return resetsAt % 1000 === 0 ? 1000 : 1;
}
