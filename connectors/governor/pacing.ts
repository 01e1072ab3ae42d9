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
}

/** The pacing of one budget: how far apart its send slots are, and none before `blockedUntil`. */
export interface Pace {
  spacingMs: number;
  blockedUntil?: number;
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

export interface PaceInput {
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
  const resetsAt = facts.resetBound ?? facts.resetsAt;
  if (resetsAt === undefined || facts.remaining === undefined || resetsAt <= now) return { spacingMs: base };
  const from = Math.max(now, input.nextAt ?? now);
  if (from >= resetsAt) return { spacingMs: base };
  const slack = resetSlack(facts.windowMs, options);
  const left = facts.remaining - (input.unseen ?? 0);
  if (left <= 0) return { spacingMs: base, blockedUntil: resetsAt + slack };
  // `left` slots from `from` on, the last of them a spacing before the reset (plus slack).
  return { spacingMs: Math.max(base, (resetsAt + slack - from) / left) };
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
 * two consecutive windows are seen. Resets are whole seconds, hence the 1 s floor.
 */
export function learnWindowMs(previous: WindowFacts, reported: RateLimitWindow): number {
  if (reported.resetsAt === undefined || previous.resetsAt === undefined || previous.remaining === undefined) return previous.windowMs;
  const distance = reported.resetsAt - previous.resetsAt;
  // A window whose only request is ours began after the previous one ended, whatever was left then.
  const fresh = reported.total !== undefined && reported.remaining === reported.total - 1;
  if (distance <= 0 || (reported.remaining <= previous.remaining && !fresh)) return previous.windowMs;
  return Math.min(previous.windowMs, Math.max(1_000, distance));
}

/**
 * Folds one reported window into what is known, ignoring a report that arrives after a fresher one.
 * `receivedAt` (when its response came back) bounds the reset of a window first seen in it (see
 * {@link WindowFacts.resetBound}).
 */
export function observeWindow(previous: WindowFacts, reported: RateLimitWindow, receivedAt?: number): WindowFacts {
  const sameWindow = reported.resetsAt !== undefined && reported.resetsAt === previous.resetsAt;
  const stale = sameWindow && previous.remaining !== undefined && reported.remaining > previous.remaining;
  const windowMs = learnWindowMs(previous, reported);
  let resetBound: number | undefined;
  if (reported.resetsAt !== undefined) {
    if (sameWindow) resetBound = previous.resetBound;
    // The first answer seen from this window: the window began before it came back.
    else if (receivedAt !== undefined) resetBound = Math.min(reported.resetsAt, receivedAt + windowMs);
  }
  return {
    windowMs,
    total: reported.total,
    remaining: stale ? previous.remaining : reported.remaining,
    ...(reported.resetsAt !== undefined ? { resetsAt: reported.resetsAt } : {}),
    ...(resetBound !== undefined && resetBound < (reported.resetsAt ?? Infinity) ? { resetBound } : {}),
  };
}

/** One budget's schedule (a GCRA: the next slot is at least one spacing after the last one). */
export interface Schedule {
  /** The earliest slot not yet reserved (epoch ms). */
  nextAt: number;
  spacingMs: number;
  blockedUntil?: number;
}

/**
 * Reserves one send slot in every schedule at once: the latest of their earliest slots (a request
 * waits for the later window), and each schedule's next slot one of its own spacings after it.
 * An idle budget does not bank unused slots: a slot is never earlier than `now`.
 */
export function reserveSlot(schedules: readonly Schedule[], now: number): { at: number; schedules: Schedule[] } {
  let at = now;
  for (const s of schedules) at = Math.max(at, s.nextAt, s.blockedUntil ?? at);
  return { at, schedules: schedules.map((s) => ({ ...s, nextAt: at + s.spacingMs })) };
}
