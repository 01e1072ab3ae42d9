// The governor every worker process shares: each budget's schedule is a row of `rate_budgets`, and
// `acquire` reserves the next send slot of all the request's budgets in one statement (one round trip),
// on the database's clock. Responses' headers update the pace in coalesced background writes. Small
// concurrency caps (serial source systems) are also held across processes, as leases in `rate_leases`.
import { randomUUID } from 'node:crypto';
import { hostname } from 'node:os';
import type pg from 'pg';
import { MirrorError } from '../../lib/errors.ts';
import type { BudgetSpec, CapSpec, RateGovernorOptions } from './budgets.ts';
import { baseSpacing, type Pace, type WindowFacts } from './pacing.ts';
import { RateGovernor, type BudgetView, type Reservation, type SharedRelease } from './rate-governor.ts';
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

// One slot in every budget of the request: the latest of their next slots (and blocks), now at the
// earliest; each budget's next slot one of its spacings later. Rows are locked in key order, so two
// requests with overlapping budgets cannot deadlock. Nothing is reserved unless every row exists.
const reserveSql = `
WITH cur AS (
  SELECT key, next_at, blocked_until, window_ms, resets_at FROM rate_budgets WHERE key = ANY($1::text[]) ORDER BY key FOR UPDATE
), slot AS (
  SELECT greatest(clock_timestamp(), max(next_at), max(blocked_until)) AS at, count(*) AS n FROM cur
), upd AS (
  UPDATE rate_budgets b
     SET next_at = slot.at + b.spacing_ms * interval '1 millisecond'
    FROM slot
   WHERE b.key = ANY($1::text[]) AND slot.n = cardinality($1::text[])
     AND slot.at <= clock_timestamp() + $2::float8 * interval '1 millisecond'
  RETURNING b.key, b.next_at
)
SELECT c.key, c.window_ms, u.key IS NOT NULL AS reserved,
  (extract(epoch FROM slot.at - clock_timestamp()) * 1000)::float8 AS wait_ms,
  (extract(epoch FROM coalesce(u.next_at, c.next_at) - clock_timestamp()) * 1000)::float8 AS next_in_ms,
  (extract(epoch FROM c.resets_at - clock_timestamp()) * 1000)::float8 AS resets_in_ms
  FROM cur c CROSS JOIN slot LEFT JOIN upd u ON u.key = c.key`;

const ensureBudgetsSql = `
INSERT INTO rate_budgets (key, total, window_ms, spacing_ms)
SELECT * FROM unnest($1::text[], $2::int[], $3::int[], $4::float8[])
ON CONFLICT (key) DO NOTHING`;

// Times travel as "milliseconds from now" and are placed on the database's clock, which every
// process shares; blocks only ever extend.
const reportSql = `
UPDATE rate_budgets b
   SET total = coalesce(u.total, b.total),
       -- A window learned shorter by any process is every process's (see learnWindowMs).
       window_ms = least(b.window_ms, u.window_ms),
       remaining = u.remaining,
       -- The tightest bound on the current window's reset any process knows (see resetBound): a
       -- later time less than a second (or a window) after the stored one is the same reset, rounded.
       resets_at = CASE
         WHEN b.resets_at IS NOT NULL AND u.resets_in_ms IS NOT NULL
          AND clock_timestamp() + u.resets_in_ms * interval '1 millisecond' > b.resets_at
          AND clock_timestamp() + u.resets_in_ms * interval '1 millisecond' < b.resets_at + least(1000, b.window_ms) * interval '1 millisecond'
         THEN b.resets_at
         ELSE clock_timestamp() + u.resets_in_ms * interval '1 millisecond' END,
       spacing_ms = u.spacing_ms,
       blocked_until = CASE WHEN u.blocked_in_ms IS NULL THEN b.blocked_until
                            ELSE greatest(b.blocked_until, clock_timestamp() + u.blocked_in_ms * interval '1 millisecond') END,
       updated_at = clock_timestamp()
  FROM unnest($1::text[], $2::int[], $3::int[], $4::float8[], $5::float8[], $6::float8[], $7::int[])
       AS u(key, total, remaining, resets_in_ms, spacing_ms, blocked_in_ms, window_ms)
 WHERE b.key = u.key`;

const ensureLeasesSql = `
INSERT INTO rate_leases (key, slot) SELECT $1, s FROM generate_series(0, $2::int - 1) AS s
ON CONFLICT (key, slot) DO NOTHING`;

// One try for a lease, in one round trip: take a free slot (or the one handed to us), unless another
// process claimed it first; if none can be taken, claim one (or refresh our claim), so its holder hands
// it to us on release. $1 key, $2 holder, $3 lease ms, $4 cap, $5 how long a claim stands unrefreshed.
const takeLeaseSql = `
WITH pick AS (
  SELECT slot FROM rate_leases
   WHERE key = $1 AND slot < $4
     AND (holder IS NULL OR holder = $2 OR expires_at < clock_timestamp())
     AND (claimed_by IS NULL OR claimed_by = $2 OR claimed_at < clock_timestamp() - $5::float8 * interval '1 millisecond')
   ORDER BY holder = $2 DESC NULLS LAST, slot LIMIT 1 FOR UPDATE SKIP LOCKED
), taken AS (
  UPDATE rate_leases l
     SET holder = $2, expires_at = clock_timestamp() + $3::float8 * interval '1 millisecond', claimed_by = NULL, claimed_at = NULL
    FROM pick WHERE l.key = $1 AND l.slot = pick.slot
  RETURNING l.slot
), unclaim AS (
  UPDATE rate_leases SET claimed_by = NULL, claimed_at = NULL
   WHERE key = $1 AND claimed_by = $2 AND EXISTS (SELECT 1 FROM pick) AND slot NOT IN (SELECT slot FROM pick)
), wanted AS (
  SELECT slot FROM rate_leases
   WHERE key = $1 AND slot < $4 AND NOT EXISTS (SELECT 1 FROM pick)
     AND (claimed_by IS NULL OR claimed_by = $2 OR claimed_at < clock_timestamp() - $5::float8 * interval '1 millisecond')
   ORDER BY claimed_by = $2 DESC NULLS LAST, expires_at NULLS FIRST, slot LIMIT 1 FOR UPDATE SKIP LOCKED
), claimed AS (
  UPDATE rate_leases l SET claimed_by = $2, claimed_at = clock_timestamp()
    FROM wanted WHERE l.key = $1 AND l.slot = wanted.slot
  RETURNING l.slot
)
SELECT slot, true AS taken FROM taken
UNION ALL SELECT slot, false AS taken FROM claimed`;

// Hands the slot to the process that claimed it (which takes it on its next try), for a short while
// only, so a claimant that went away does not keep it.
const releaseLeaseSql = `
UPDATE rate_leases
   SET holder = claimed_by,
       expires_at = CASE WHEN claimed_by IS NULL THEN NULL ELSE clock_timestamp() + $4::float8 * interval '1 millisecond' END
 WHERE key = $1 AND slot = $2 AND holder = $3`;

const renewLeasesSql = `
UPDATE rate_leases SET expires_at = clock_timestamp() + $2::float8 * interval '1 millisecond' WHERE holder = ANY($1::text[])`;

interface PendingWrite {
  facts: WindowFacts;
  pace: Pace;
}

interface Written {
  spacingMs: number;
  total: number | undefined;
  at: number;
}

export class PostgresRateGovernor extends RateGovernor {
  private readonly pool: pg.Pool;
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

  constructor(pool: pg.Pool, options: PostgresRateGovernorOptions = {}) {
    super(options);
    this.pool = pool;
    this.sharedUpTo = options.sharedConcurrencyUpTo ?? 1;
    this.leaseTtlMs = options.leaseTtlMs ?? 120_000;
    this.leasePollMs = options.leasePollMs ?? 50;
    this.claimMs = options.leaseClaimMs ?? 1_500;
    this.refreshMs = options.refreshMs ?? 5_000;
  }

  /** Writes what is pending, waits for lease releases, stops renewing leases (held ones then expire). The pool stays open. */
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

  protected async reserve(budgets: readonly BudgetSpec[], signal?: AbortSignal): Promise<Reservation> {
    // A 429's block must reach the table before this process takes another slot.
    if (this.blockPending) await this.flushed();
    if (signal?.aborted) throw abortReason(signal);
    const keys = budgets.map((b) => b.key);
    if (keys.some((k) => !this.ensured.has(k))) await this.ensureBudgets(budgets);
    const horizon = this.options.reserveHorizonMs;
    let result = await this.pool.query<{ key: string; window_ms: number; reserved: boolean; wait_ms: number; next_in_ms: number; resets_in_ms: number | null }>(reserveSql, [keys, horizon]);
    if (result.rows.length < keys.length) {
      // A row went missing (someone emptied the table): create it again and retry once.
      await this.ensureBudgets(budgets);
      result = await this.pool.query(reserveSql, [keys, horizon]);
      if (result.rows.length < keys.length) throw new MirrorError(`rate governor: could not reserve a slot in ${keys.join(', ')}`);
    }
    const nextInMs = new Map(result.rows.map((r) => [r.key, r.next_in_ms]));
    for (const r of result.rows) {
      const spec = budgets.find((b) => b.key === r.key);
      if (spec) this.adoptWindow(spec, r.window_ms);
      if (spec && r.resets_in_ms !== null) this.adoptResetBound(spec, this.clock.now() + r.resets_in_ms);
    }
    return { waitMs: Math.max(0, result.rows[0]!.wait_ms), nextInMs, reserved: result.rows.every((r) => r.reserved) };
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
    await this.pool.query(ensureBudgetsSql, [
      budgets.map((b) => b.key),
      budgets.map((b) => b.initial.total ?? null),
      budgets.map((b) => Math.round(b.initial.windowMs)),
      budgets.map((b) => baseSpacing(b.initial, this.options.pacing)),
    ]);
    for (const b of budgets) this.ensured.add(b.key);
  }

  protected applyPace(view: BudgetView, pace: Pace, now: number): void {
    const key = view.spec.key;
    const last = this.written.get(key);
    const unchanged =
      last !== undefined &&
      pace.blockedUntil === undefined &&
      last.total === view.facts.total &&
      Math.abs(pace.spacingMs - last.spacingMs) <= 0.01 * last.spacingMs &&
      now - last.at < this.refreshMs;
    if (unchanged) return;
    const prior = this.pending.get(key);
    const blockedUntil = Math.max(prior?.pace.blockedUntil ?? 0, pace.blockedUntil ?? 0);
    this.pending.set(key, { facts: view.facts, pace: { spacingMs: pace.spacingMs, ...(blockedUntil > 0 ? { blockedUntil } : {}) } });
    this.written.set(key, { spacingMs: pace.spacingMs, total: view.facts.total, at: now });
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
          await this.pool.query(reportSql, [
            batch.map(([key]) => key),
            batch.map(([, w]) => w.facts.total ?? null),
            batch.map(([, w]) => w.facts.remaining ?? null),
            batch.map(([, w]) => relative(w.facts.resetBound ?? w.facts.resetsAt)),
            batch.map(([, w]) => w.pace.spacingMs),
            batch.map(([, w]) => relative(w.pace.blockedUntil)),
            batch.map(([, w]) => Math.round(w.facts.windowMs)),
          ]);
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
      await this.pool.query(ensureLeasesSql, [cap.key, cap.limit]);
      this.ensuredLeases.set(cap.key, cap.limit);
    }
    const holder = `${this.instance}:${randomUUID()}`;
    let delay = this.leasePollMs;
    for (;;) {
      if (signal?.aborted) throw abortReason(signal);
      const result = await this.pool.query<{ slot: number; taken: boolean }>(takeLeaseSql, [cap.key, holder, this.leaseTtlMs, cap.limit, this.claimMs]);
      const row = result.rows.find((r) => r.taken);
      if (row) {
        this.holdLease(holder, cap.key, row.slot);
        return () => {
          this.leases.delete(holder);
          if (this.leases.size === 0 && this.renewTimer) {
            clearInterval(this.renewTimer);
            this.renewTimer = undefined;
          }
          const released = this.pool.query(releaseLeaseSql, [cap.key, row.slot, holder, this.claimMs]).then(() => undefined);
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
    this.renewTimer ??= setInterval(() => {
      const holders = [...this.leases.keys()];
      if (holders.length === 0) return;
      this.pool
        .query(renewLeasesSql, [holders, this.leaseTtlMs])
        .catch((error: unknown) => this.logger?.warn({ err: error }, 'rate governor: renewing concurrency leases failed'));
    }, Math.max(1_000, this.leaseTtlMs / 3));
    this.renewTimer.unref();
  }
}
