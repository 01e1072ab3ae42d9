// The port between the shared rate governor (connectors/governor/postgres-governor.ts) and the table
// its processes share: budgets and concurrency leases, each operation one statement on the database's
// clock. Declared here, beneath both: the Postgres store (mirror/control/rate-budgets.ts) implements it,
// the governor takes it, and bin/ passes the one to the other.

/** A budget's row after a try to reserve a slot in every budget of a request (times from now, in ms). */
export interface ReservedBudget {
  key: string;
  windowMs: number;
  /** Whether the slot was taken (in every budget of the request, or in none). */
  reserved: boolean;
  /** Until the request's slot. */
  waitMs: number;
  /** Until this budget's next free slot. */
  nextInMs: number;
  /** Until the tightest known bound on the window's reset; null when none is known. */
  resetsInMs: number | null;
  /** Interactive requests per window (see AppUse in reserve.ts), after this reservation. */
  appUse: { counts: number[]; windows: number[] };
  /** The store's clock (epoch ms), which its window numbers are on. */
  nowMs: number;
}

/** A budget's first guesses, for a row that does not exist yet. */
export interface BudgetSeed {
  key: string;
  total: number | null;
  windowMs: number;
  spacingMs: number;
}

/** What responses reported for a budget, and the pace that follows (times from now, in ms). */
export interface BudgetReport {
  key: string;
  total: number | null;
  remaining: number | null;
  resetsInMs: number | null;
  spacingMs: number;
  blockedInMs: number | null;
  windowMs: number;
  /**
   * A background lane's anchor (LaneAnchor in pacing.ts): its next slot no earlier than this (from
   * now), nor than the tightest reset bound of the row less `anchorSpanMs`. Null: none.
   */
  anchorInMs: number | null;
  anchorSpanMs: number | null;
  /** Requests the window has left before its reset, less those the report could not count (Pace.left). Null: unknown. */
  windowLeft?: number | null;
}

export interface LeaseTry {
  key: string;
  holder: string;
  /** A taken lease lasts this long unless renewed. */
  leaseMs: number;
  /** The cap: slots 0 to limit - 1. */
  limit: number;
  /** A claim stands this long unrefreshed. */
  claimMs: number;
}

/** How a reservation banks and counts (see RateBudgetStore.reserve). */
export interface ReserveHow {
  banking?: readonly string[];
  early?: boolean;
  resetResolutionMs?: number;
  lengthGuessed?: readonly string[];
  interactive?: boolean;
  fromDue?: readonly string[];
}

export interface RateBudgetStore {
  /**
   * Reserves the next slot in every one of `keys` (rows locked in key order), unless it is further
   * than `horizonMs` away or a row is missing (then fewer rows come back). The schedules of `banking`
   * (background lanes) bank one spacing: their next slot follows their own schedule, not the slot
   * taken, when that was less than a spacing late (see Schedule.banks in connectors/governor/pacing.ts). `early` (an
   * interactive request): the slot may come one spacing before the schedules' next (see reserveSlot
   * there).
   * A banking schedule's slot that may be its first of a window banks only the slack a window leaves
   * (see Schedule.edge): the row's reset bound less `resetResolutionMs` (default 1 s) is the earliest
   * the reset may be; the rows of `lengthGuessed` have no known window length yet. An `interactive`
   * request counts in its window's application use (countAppUse in connectors/governor/reserve.ts).
   * The schedules of `fromDue` (the budgets whose lanes a background request takes) count their next
   * slot from when the request's slot was due, not from when it was taken, when that was less than a
   * spacing late (see reserveSlot's `fromDue` there).
   */
  reserve(keys: readonly string[], horizonMs: number, how?: ReserveHow): Promise<ReservedBudget[]>;
  /** Creates the rows that do not exist yet. */
  ensureBudgets(seeds: readonly BudgetSeed[]): Promise<void>;
  /** Writes reported paces; a block only ever extends. */
  report(reports: readonly BudgetReport[]): Promise<void>;
  /** Creates the lease slots 0 to limit - 1 of a cap where missing. */
  ensureLeases(key: string, limit: number): Promise<void>;
  /** One try for a lease: a slot taken, else one claimed (so its holder hands it over on release). */
  takeLease(attempt: LeaseTry): Promise<{ slot: number; taken: boolean }[]>;
  /** Hands the slot to its claimant for `claimMs`, or frees it. */
  releaseLease(lease: { key: string; slot: number; holder: string; claimMs: number }): Promise<void>;
  /** Extends the leases of these holders by `leaseMs` from now. */
  renewLeases(holders: readonly string[], leaseMs: number): Promise<void>;
}
