// The application's reserve sized by its use: unless MIRROR_SYNC_BUDGET_SHARE fixes it, the part of
// each window kept free of background work follows what interactive requests (an application's
// forwarded calls) took in the budget's recent windows, plus a margin, never below a floor. Pure
// arithmetic; the counts live where the schedules do (in memory, or in the budget's Postgres row).

/** The rule's numbers, as shares of a window's total. */
export interface ReserveRule {
  /** The reserve never falls below this, so an application that wakes up finds room at once. */
  floor: number;
  /** Added to the application's recent use (its use varies from window to window). */
  margin: number;
  /** The reserve never rises above this: background work keeps at least the rest. */
  ceiling: number;
  /** How many of the most recent complete windows the application's use is averaged over. */
  windows: number;
  /** The reserve before any window of the budget completed (nothing is known of the application yet). */
  initial: number;
}

export const defaultReserveRule: ReserveRule = { floor: 0.05, margin: 0.02, ceiling: 0.9, windows: 4, initial: 0.2 };

/**
 * Slots of the ring of per-window counts a budget keeps: the current window and the complete ones
 * before it (at least `windows + 1`).
 */
export const appUseSlots = 8;

/**
 * Interactive requests per window, by window number (`windowIndex`), in a ring of `appUseSlots`:
 * slot `n % appUseSlots` counts window `n` when `windows[slot] === n`. The Postgres store keeps the
 * same two arrays in the budget's row and counts there with the same arithmetic.
 */
export interface AppUse {
  counts: number[];
  windows: number[];
}

export function emptyAppUse(): AppUse {
  return { counts: new Array<number>(appUseSlots).fill(0), windows: new Array<number>(appUseSlots).fill(-1) };
}

/** The number of the window of length `windowMs` that time `at` (epoch ms) falls in. */
export function windowIndex(at: number, windowMs: number): number {
  return Math.floor(at / Math.max(1, windowMs));
}

/** Counts one interactive request in window `n`. */
export function countAppUse(use: AppUse, n: number): AppUse {
  const slot = n % appUseSlots;
  const counts = [...use.counts];
  const windows = [...use.windows];
  counts[slot] = windows[slot] === n ? counts[slot]! + 1 : 1;
  windows[slot] = n;
  return { counts, windows };
}

/**
 * The application's requests in each of the `windows` complete windows before window `now`, oldest
 * first (a window with none counted is 0); fewer when the budget is younger than that (`since`: the
 * first window it was seen in).
 */
export function recentAppUse(use: AppUse, now: number, windows: number, since: number): number[] {
  const out: number[] = [];
  for (let n = Math.max(since, now - windows); n < now; n++) {
    const slot = n % appUseSlots;
    out.push(use.windows[slot] === n ? use.counts[slot]! : 0);
  }
  return out;
}

/**
 * The share of a window background work may spend: 1 less the reserve, which is the application's
 * mean use of its recent complete windows (requests over the window's total) plus the margin,
 * between the floor and the ceiling; `initial` while no window completed.
 */
export function backgroundShare(recent: readonly number[], total: number, rule: ReserveRule = defaultReserveRule): number {
  if (recent.length === 0 || !(total > 0)) return 1 - rule.initial;
  const last = recent.slice(-rule.windows);
  const used = last.reduce((a, b) => a + b, 0) / last.length / total;
  return 1 - Math.min(rule.ceiling, Math.max(rule.floor, used + rule.margin));
}
