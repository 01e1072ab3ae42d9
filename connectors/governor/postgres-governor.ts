// The governor every worker process shares: each budget's schedule is a row of a shared store
// (`rate_budgets` in Postgres: mirror/control/rate-budgets.ts, passed in by bin/), and `acquire` reserves the
// next send slot of all the request's budgets in one operation (one round trip), on the store's clock.
// Responses' headers update the pace in coalesced background writes. Small concurrency caps (serial
// source systems) are also held across processes, as leases (`rate_leases`).
import { randomUUID } from 'node:crypto';
import { hostname } from 'node:os';
import { MirrorError } from '../../lib/errors.ts';
import type { RateBudgetStore } from '../../lib/rate-budget-store.ts';
import { initialSpacing, lanedKeys, type BudgetSpec, type CapSpec, type RateGovernorOptions } from './budgets.ts';
import { resetResolution, type Pace, type WindowFacts } from './pacing.ts';
import { appUseSlots } from './reserve.ts';
import { RateGovernor, type BudgetView, type ReserveRequest, type Reservation, type SharedRelease } from './rate-governor.ts';
import { abortReason } from './semaphore.ts';

export interface PostgresRateGovernorOptions extends RateGovernorOptions {
  /** Concurrency caps up to this size are held across processes (leases); larger ones per process. Default 1. */
  sharedConcurrencyUpTo?: number;
  /** A lease outlives a crashed holder by at most this long; live holders renew it. Default 120 s. */
  leaseTtlMs?: number;
  /** First wait between tries for a busy lease. Default 50 ms. */
  leasePollMs?: number;
  /**
   * A waiting process's claim on a busy lease stands this long unrefreshed (it retries at least three
   * times as often), and a lease handed to it is taken back after this long. Default 1.5 s.
   */
  leaseClaimMs?: number;
  /** An unchanged pace is still written this often, so the row shows recent headers. Default 5 s. */
  refreshMs?: number;
}

interface PendingWrite {
  facts: WindowFacts;
  pace: Pace;
}

interface Written {
  spacingMs: number;
  total: number | undefined;
  resetsAt: number | undefined;
  at: number;
}

export class PostgresRateGovernor extends RateGovernor {
  private readonly store: RateBudgetStore;
  private readonly sharedUpTo: number;
  private readonly leaseTtlMs: number;
  private readonly leasePollMs: number;
  private readonly claimMs: number;
  private readonly refreshMs: number;
  private readonly instance = `${hostname()}:${process.pid}`;
  private readonly ensured = new Set<string>();
  private readonly ensuring = new Map<string, Promise<void>>();
  private readonly ensuredLeases = new Map<string, number>();
  private readonly written = new Map<string, Written>();
  private readonly pending = new Map<string, PendingWrite>();
  private flushing: Promise<void> = Promise.resolve();
  private running = false;
  private blockPending = false;
  private readonly leases = new Map<string, { key: string; slot: number }>();
  private renewTimer: NodeJS.Timeout | undefined;
  private readonly releasing = new Set<Promise<void>>();

  constructor(store: RateBudgetStore, options: PostgresRateGovernorOptions = {}) {
    super(options);
    this.store = store;
    this.sharedUpTo = options.sharedConcurrencyUpTo ?? 1;
    this.leaseTtlMs = options.leaseTtlMs ?? 120_000;
    this.leasePollMs = options.leasePollMs ?? 50;
    this.claimMs = options.leaseClaimMs ?? 1_500;
    this.refreshMs = options.refreshMs ?? 5_000;
  }

  /** Writes what is pending, waits for lease releases, stops renewing leases (held ones then expire). The store stays open. */
  async close(): Promise<void> {
    if (this.renewTimer) clearInterval(this.renewTimer);
    this.renewTimer = undefined;
    await this.flushed();
    await Promise.allSettled([...this.releasing]);
  }

  /** Resolves once every pace reported so far is written. */
  async flushed(): Promise<void> {
    while (this.running) await this.flushing;
  }

  protected async reserve(budgets: readonly BudgetSpec[], request: ReserveRequest, signal?: AbortSignal): Promise<Reservation> {
    // A 429's block must reach the table before this process takes another slot.
    if (this.blockPending) await this.flushed();
    if (signal?.aborted) throw abortReason(signal);
    const keys = budgets.map((b) => b.key);
    if (keys.some((k) => !this.ensured.has(k))) await this.ensureBudgets(budgets);
    const horizon = request.horizonMs;
    // Lanes bank one spacing; an interactive request may come a spacing early (see reserveSlot).
    // A lane's slot at a window's edge banks less (Schedule.edge): how finely its reset is known, and
    // whether its length is still a guess, as this process knows them (the bound itself is the row's).
    const lanes = budgets.filter((b) => b.lane);
    const facts = lanes.map((b) => this.view(b).facts);
    const resetResolutionMs = Math.max(1, ...facts.map((f) => (f.resetsAt === undefined ? 1_000 : resetResolution(f.resetsAt))));
    const lengthGuessed = lanes.filter((_, i) => facts[i]!.lengthGuessed === true).map((b) => b.key);
    // The budgets whose lanes a background request takes count its slot from when it was due (reserveSlot's `fromDue` in pacing.ts).
    const how = {
      banking: lanes.map((b) => b.key),
      early: request.early,
      resetResolutionMs,
      lengthGuessed,
      interactive: request.interactive,
      fromDue: lanedKeys(budgets),
    };
    let rows = await this.store.reserve(keys, horizon, how);
    if (rows.length < keys.length) {
      // A row went missing (someone emptied the table): create it again and retry once.
      await this.ensureBudgets(budgets);
      rows = await this.store.reserve(keys, horizon, how);
      if (rows.length < keys.length) throw new MirrorError(`rate governor: could not reserve a slot in ${keys.join(', ')}`);
    }
    const nextInMs = new Map(rows.map((r) => [r.key, r.nextInMs]));
    for (const r of rows) {
      // A lane's window is its budget's: learned there.
      const spec = budgets.find((b) => b.key === r.key && !b.lane);
      if (spec) this.adoptWindow(spec, r.windowMs);
      if (spec && r.resetsInMs !== null) this.adoptResetBound(spec, this.clock.now() + r.resetsInMs);
      if (spec && r.appUse.counts.length === appUseSlots && r.appUse.windows.length === appUseSlots) {
        // What every process's interactive requests took, on the store's clock (the adaptive reserve).
        const view = this.view(spec);
        view.appUse = r.appUse;
        view.appClock = { offsetMs: r.nowMs - this.clock.now() };
      }
    }
    return { waitMs: Math.max(0, rows[0]!.waitMs), nextInMs, reserved: rows.every((r) => r.reserved) };
  }

  /** Creates missing budget rows (with the first guesses); concurrent first requests share one insert. */
  private ensureBudgets(budgets: readonly BudgetSpec[]): Promise<void> {
    const id = budgets.map((b) => b.key).join('\n');
    let ensuring = this.ensuring.get(id);
    if (!ensuring) {
      ensuring = this.insertBudgets(budgets).finally(() => this.ensuring.delete(id));
      this.ensuring.set(id, ensuring);
    }
    return ensuring;
  }

  private async insertBudgets(budgets: readonly BudgetSpec[]): Promise<void> {
    await this.store.ensureBudgets(
      budgets.map((b) => ({
        key: b.key,
        total: b.initial.total ?? null,
        windowMs: Math.round(b.initial.windowMs),
        spacingMs: initialSpacing(b, this.options.pacing),
      })),
    );
    for (const b of budgets) this.ensured.add(b.key);
  }

  protected applyPace(view: BudgetView, pace: Pace, now: number): void {
    const key = view.spec.key;
    const last = this.written.get(key);
    // A new window's reset is written at once: a lane's slots at the edge of a window are told by it.
    const resetsAt = view.facts.resetBound ?? view.facts.resetsAt;
    const unchanged =
      last !== undefined &&
      pace.blockedUntil === undefined &&
      pace.anchor === undefined &&
      last.total === view.facts.total &&
      last.resetsAt === resetsAt &&
      Math.abs(pace.spacingMs - last.spacingMs) <= 0.01 * last.spacingMs &&
      now - last.at < this.refreshMs;
    if (unchanged) return;
    const prior = this.pending.get(key);
    const blockedUntil = Math.max(prior?.pace.blockedUntil ?? 0, pace.blockedUntil ?? 0);
    // The later of two anchors not yet written (the later window's).
    const anchors = [prior?.pace.anchor, pace.anchor].filter((a) => a !== undefined);
    const anchor = anchors.length > 0 ? anchors.reduce((a, b) => (b.notBefore > a.notBefore ? b : a)) : undefined;
    if (anchor) view.nextAt = Math.max(view.nextAt ?? anchor.notBefore, anchor.notBefore);
    this.pending.set(key, {
      facts: view.facts,
      pace: {
        spacingMs: pace.spacingMs,
        ...(blockedUntil > 0 ? { blockedUntil } : {}),
        ...(anchor ? { anchor } : {}),
        ...(pace.left !== undefined ? { left: pace.left } : {}),
      },
    });
    this.written.set(key, { spacingMs: pace.spacingMs, total: view.facts.total, resetsAt, at: now });
    if (blockedUntil > 0) this.blockPending = true;
    if (!this.running) {
      this.running = true;
      this.flushing = this.flush();
    }
  }

  /** Writes pending paces in batches until none is left; one statement in flight at a time. */
  private async flush(): Promise<void> {
    try {
      while (this.pending.size > 0) {
        const batch = [...this.pending.entries()];
        this.pending.clear();
        const now = this.clock.now();
        const relative = (t: number | undefined) => (t === undefined ? null : t - now);
        try {
          await this.store.report(
            batch.map(([key, w]) => ({
              key,
              total: w.facts.total ?? null,
              remaining: w.facts.remaining ?? null,
              resetsInMs: relative(w.facts.resetBound ?? w.facts.resetsAt),
              spacingMs: w.pace.spacingMs,
              blockedInMs: relative(w.pace.blockedUntil),
              anchorInMs: relative(w.pace.anchor?.notBefore),
              anchorSpanMs: w.pace.anchor?.spanMs ?? null,
              windowLeft: w.pace.left ?? null,
              windowMs: Math.round(w.facts.windowMs),
            })),
          );
        } catch (error) {
          for (const [key] of batch) this.written.delete(key);
          this.logger?.warn({ err: error }, 'rate governor: writing reported rate limits failed');
        }
      }
    } finally {
      // In the same turn as the last check of `pending`: a report that comes later starts a new flush.
      this.running = false;
      this.blockPending = false;
    }
  }

  protected override async acquireShared(cap: CapSpec, signal?: AbortSignal): Promise<SharedRelease | undefined> {
    if (cap.limit > this.sharedUpTo) return undefined;
    if ((this.ensuredLeases.get(cap.key) ?? 0) < cap.limit) {
      await this.store.ensureLeases(cap.key, cap.limit);
      this.ensuredLeases.set(cap.key, cap.limit);
    }
    const holder = `${this.instance}:${randomUUID()}`;
    let delay = this.leasePollMs;
    for (;;) {
      if (signal?.aborted) throw abortReason(signal);
      const rows = await this.store.takeLease({ key: cap.key, holder, leaseMs: this.leaseTtlMs, limit: cap.limit, claimMs: this.claimMs });
      const row = rows.find((r) => r.taken);
      if (row) {
        this.holdLease(holder, cap.key, row.slot);
        return () => {
          this.leases.delete(holder);
          if (this.leases.size === 0 && this.renewTimer) {
            clearInterval(this.renewTimer);
            this.renewTimer = undefined;
          }
          const released = this.store.releaseLease({ key: cap.key, slot: row.slot, holder, claimMs: this.claimMs });
          this.releasing.add(released);
          return released.finally(() => this.releasing.delete(released));
        };
      }
      // Our claim stands while we keep trying within `claimMs`.
      await this.clock.sleep(delay, signal);
      delay = Math.min(delay * 1.5, this.claimMs / 3);
    }
  }

  private holdLease(holder: string, key: string, slot: number): void {
    this.leases.set(holder, { key, slot });
    this.renewTimer ??= setInterval(
      () => {
        const holders = [...this.leases.keys()];
        if (holders.length === 0) return;
        this.store
          .renewLeases(holders, this.leaseTtlMs)
          .catch((error: unknown) => this.logger?.warn({ err: error }, 'rate governor: renewing concurrency leases failed'));
      },
      Math.max(1_000, this.leaseTtlMs / 3),
    );
    this.renewTimer.unref();
  }
}
