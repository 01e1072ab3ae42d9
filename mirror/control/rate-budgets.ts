// The rate budgets and concurrency leases every process shares, in Postgres (`rate_budgets`,
// `rate_leases`): the store of connectors/governor/postgres-governor.ts, which bin/ wires to it
// (the port between them is lib/rate-budget-store.ts). Each operation is one statement, on the
// database's clock.
import type { BudgetReport, BudgetSeed, LeaseTry, RateBudgetStore, ReserveHow, ReservedBudget } from '../../lib/rate-budget-store.ts';
import type { Pool } from '../db/pool.ts';

// One slot in every budget of the request: the latest of their next slots (and blocks), now at the
// earliest; each budget's next slot one of its spacings later. A banking row (a background lane, $3)
// counts its next slot from its own schedule when the slot taken was less than a spacing late, so the
// lateness of its requests (each takes its slot once due) does not add up (Schedule.banks in
// connectors/governor/pacing.ts). An early request ($4, an interactive one) may take its slot one
// spacing before the next, right behind the last one taken (reserveSlot there). Rows are locked in key order, so two requests with overlapping
// budgets cannot deadlock. Nothing is reserved unless every row exists.
// A banking row's slot that may be the lane's first of a window banks less (bankedCredit in
// connectors/governor/pacing.ts, the same arithmetic): the row's resets_at is the latest bound on the
// window's reset, which lies no earlier than that less $5 ms (the reported reset's resolution); the
// lane's last slot lies no earlier than a spacing before next_at; the rows of $6 have a length that
// is still a guess (no credit at an edge).
// The rows of $8 (the budgets whose lanes a background request takes) count their next slot from when
// the request's slot was due (the latest of the rows' next slots and blocks), when it was taken less
// than a spacing after that (reserveSlot's `fromDue` in connectors/governor/pacing.ts).
const reserveSql = `
WITH cur AS (
  SELECT key, next_at, spacing_ms, blocked_until, window_ms, resets_at, window_left, app_counts, app_windows
    FROM rate_budgets WHERE key = ANY($1::text[]) ORDER BY key FOR UPDATE
), slot AS (
  SELECT greatest(clock_timestamp(), due) AS at, due, n FROM (
    -- An interactive request ($4) may come a spacing early, but not before the reset of a window its
    -- reserved slots spent (earlySlot in connectors/governor/pacing.ts).
    SELECT greatest(max(CASE WHEN NOT $4::boolean THEN next_at
                             WHEN resets_at IS NOT NULL AND window_left <= 0
                             THEN greatest(next_at - spacing_ms * interval '1 millisecond', resets_at)
                             ELSE next_at - spacing_ms * interval '1 millisecond' END), max(blocked_until)) AS due,
           count(*) AS n FROM cur) d
), edge AS (
  SELECT c.key, c.spacing_ms, c.key = ANY($6::text[]) AS guessed, c.window_ms,
         -- the lane's last slot may lie before the reset's latest bound: this slot may begin a window
         c.resets_at IS NOT NULL AND c.spacing_ms > 0 AND c.next_at - c.spacing_ms * interval '1 millisecond' < c.resets_at AS at_edge,
         ceil(c.window_ms / nullif(c.spacing_ms, 0) - 1e-9) * c.spacing_ms AS slots_ms,
         (extract(epoch FROM slot.at - c.resets_at) * 1000)::float8 AS at_after_reset_ms,
         slot.at >= c.resets_at - $5::float8 * interval '1 millisecond' AS past_from
    FROM cur c CROSS JOIN slot
), credit AS (
  SELECT key, CASE WHEN NOT at_edge THEN spacing_ms WHEN guessed THEN 0
                   ELSE greatest(0, least(spacing_ms, at_after_reset_ms + slots_ms, CASE WHEN past_from THEN slots_ms - window_ms END)) END AS ms
    FROM edge
), win AS (
  -- The window the slot falls in (epoch ms / window_ms) and its place in the ring of app_counts
  -- (appUseSlots in connectors/governor/reserve.ts: 8, as the columns' defaults).
  SELECT c.key, w.n, (w.n % 8) + 1 AS i
    FROM cur c CROSS JOIN slot CROSS JOIN LATERAL (SELECT floor(extract(epoch FROM slot.at) * 1000 / greatest(1, c.window_ms))::bigint AS n) w
), upd AS (
  UPDATE rate_budgets b
     SET next_at = CASE WHEN b.key = ANY($3::text[]) THEN greatest(b.next_at, slot.at - credit.ms * interval '1 millisecond')
                        WHEN b.key = ANY($8::text[]) AND slot.at - slot.due < b.spacing_ms * interval '1 millisecond' THEN greatest(b.next_at, slot.due)
                        ELSE greatest(b.next_at, slot.at) END
                   + b.spacing_ms * interval '1 millisecond',
         -- A slot before the reset is one fewer the window has left.
         window_left = CASE WHEN slot.at < b.resets_at THEN b.window_left - 1 ELSE b.window_left END,
         -- An interactive request ($7) counts in its window (countAppUse in connectors/governor/reserve.ts).
         app_counts[win.i] = CASE WHEN NOT $7::boolean THEN b.app_counts[win.i] WHEN b.app_windows[win.i] = win.n THEN b.app_counts[win.i] + 1 ELSE 1 END,
         app_windows[win.i] = CASE WHEN $7::boolean THEN win.n ELSE b.app_windows[win.i] END
    FROM slot, credit, win
   WHERE b.key = ANY($1::text[]) AND credit.key = b.key AND win.key = b.key AND slot.n = cardinality($1::text[])
     AND slot.at <= clock_timestamp() + $2::float8 * interval '1 millisecond'
  RETURNING b.key, b.next_at, b.app_counts, b.app_windows
)
SELECT c.key, c.window_ms, u.key IS NOT NULL AS reserved,
  (extract(epoch FROM slot.at - clock_timestamp()) * 1000)::float8 AS wait_ms,
  (extract(epoch FROM coalesce(u.next_at, c.next_at) - clock_timestamp()) * 1000)::float8 AS next_in_ms,
  (extract(epoch FROM c.resets_at - clock_timestamp()) * 1000)::float8 AS resets_in_ms,
  coalesce(u.app_counts, c.app_counts) AS app_counts, coalesce(u.app_windows, c.app_windows) AS app_windows,
  (extract(epoch FROM clock_timestamp()) * 1000)::float8 AS now_ms
  FROM cur c CROSS JOIN slot LEFT JOIN upd u ON u.key = c.key`;

const ensureBudgetsSql = `
INSERT INTO rate_budgets (key, total, window_ms, spacing_ms)
SELECT * FROM unnest($1::text[], $2::int[], $3::int[], $4::float8[])
ON CONFLICT (key) DO NOTHING`;

// Times travel as "milliseconds from now" and are placed on the database's clock, which every
// process shares; blocks only ever extend.
// The tightest bound on the current window's reset any process knows (see resetBound): a later time
// less than a second (or a window) after the stored one is the same reset, rounded.
const reportedReset = `CASE
         WHEN b.resets_at IS NOT NULL AND u.resets_in_ms IS NOT NULL
          AND clock_timestamp() + u.resets_in_ms * interval '1 millisecond' > b.resets_at
          AND clock_timestamp() + u.resets_in_ms * interval '1 millisecond' < b.resets_at + least(1000, b.window_ms) * interval '1 millisecond'
         THEN b.resets_at
         ELSE clock_timestamp() + u.resets_in_ms * interval '1 millisecond' END`;

// Its rows are locked in key order first, as the reserve statement's are: two reports of overlapping
// budgets (or a report and a reservation) then never wait on each other in a circle.
const reportSql = `
WITH locked AS (SELECT key FROM rate_budgets WHERE key = ANY($1::text[]) ORDER BY key FOR UPDATE)
UPDATE rate_budgets b
   SET total = coalesce(u.total, b.total),
       -- A window learned shorter by any process is every process's (see learnWindowMs).
       window_ms = least(b.window_ms, u.window_ms),
       remaining = u.remaining,
       window_left = u.window_left,
       resets_at = ${reportedReset},
       -- A lane's anchor (LaneAnchor in connectors/governor/pacing.ts), by the tighter of the bounds.
       next_at = CASE WHEN u.anchor_span_ms IS NULL THEN b.next_at
                      ELSE greatest(b.next_at, least(clock_timestamp() + u.anchor_in_ms * interval '1 millisecond',
                                                     ${reportedReset} - u.anchor_span_ms * interval '1 millisecond')) END,
       spacing_ms = u.spacing_ms,
       blocked_until = CASE WHEN u.blocked_in_ms IS NULL THEN b.blocked_until
                            ELSE greatest(b.blocked_until, clock_timestamp() + u.blocked_in_ms * interval '1 millisecond') END,
       updated_at = clock_timestamp()
  FROM unnest($1::text[], $2::int[], $3::int[], $4::float8[], $5::float8[], $6::float8[], $7::int[], $8::float8[], $9::float8[], $10::int[])
       AS u(key, total, remaining, resets_in_ms, spacing_ms, blocked_in_ms, window_ms, anchor_in_ms, anchor_span_ms, window_left)
  JOIN locked l ON l.key = u.key
 WHERE b.key = u.key
   -- A report of a window before the one stored (the answer to a request sent before it began, back
   -- late) changes nothing: its reset would move the stored one back (isEarlierWindow in
   -- connectors/governor/pacing.ts). A report of another limit (another total) is not one, and a
   -- stored reset further ahead than a window and a second is no window's: a report replaces it.
   AND NOT (b.resets_at IS NOT NULL AND u.resets_in_ms IS NOT NULL AND u.total IS NOT DISTINCT FROM b.total
            AND b.resets_at <= clock_timestamp() + (b.window_ms + 1000) * interval '1 millisecond'
            AND clock_timestamp() + u.resets_in_ms * interval '1 millisecond'
                <= b.resets_at - least(1000, b.window_ms) * interval '1 millisecond')`;

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

/** One statement per operation; rows come back with times as milliseconds from now. */
export class PostgresRateBudgets implements RateBudgetStore {
  constructor(private readonly pool: Pool) {}

  async reserve(keys: readonly string[], horizonMs: number, how: ReserveHow = {}): Promise<ReservedBudget[]> {
    const { rows } = await this.pool.query<{
      key: string;
      window_ms: number;
      reserved: boolean;
      wait_ms: number;
      next_in_ms: number;
      resets_in_ms: number | null;
      app_counts: (number | null)[] | null;
      app_windows: (string | null)[] | null;
      now_ms: number;
    }>(reserveSql, [
      keys,
      horizonMs,
      how.banking ?? [],
      how.early ?? false,
      how.resetResolutionMs ?? 1_000,
      how.lengthGuessed ?? [],
      how.interactive ?? false,
      how.fromDue ?? [],
    ]);
    return rows.map((r) => ({
      key: r.key,
      windowMs: r.window_ms,
      reserved: r.reserved,
      waitMs: r.wait_ms,
      nextInMs: r.next_in_ms,
      resetsInMs: r.resets_in_ms,
      appUse: { counts: (r.app_counts ?? []).map((c) => c ?? 0), windows: (r.app_windows ?? []).map((w) => (w === null ? -1 : Number(w))) },
      nowMs: r.now_ms,
    }));
  }

  async ensureBudgets(seeds: readonly BudgetSeed[]): Promise<void> {
    await this.pool.query(ensureBudgetsSql, [seeds.map((s) => s.key), seeds.map((s) => s.total), seeds.map((s) => s.windowMs), seeds.map((s) => s.spacingMs)]);
  }

  async report(reports: readonly BudgetReport[]): Promise<void> {
    await this.pool.query(reportSql, [
      reports.map((r) => r.key),
      reports.map((r) => r.total),
      reports.map((r) => r.remaining),
      reports.map((r) => r.resetsInMs),
      reports.map((r) => r.spacingMs),
      reports.map((r) => r.blockedInMs),
      reports.map((r) => r.windowMs),
      reports.map((r) => r.anchorInMs),
      reports.map((r) => r.anchorSpanMs),
      reports.map((r) => r.windowLeft ?? null),
    ]);
  }

  async ensureLeases(key: string, limit: number): Promise<void> {
    await this.pool.query(ensureLeasesSql, [key, limit]);
  }

  async takeLease(attempt: LeaseTry): Promise<{ slot: number; taken: boolean }[]> {
    const { rows } = await this.pool.query<{ slot: number; taken: boolean }>(takeLeaseSql, [
      attempt.key,
      attempt.holder,
      attempt.leaseMs,
      attempt.limit,
      attempt.claimMs,
    ]);
    return rows;
  }

  async releaseLease(lease: { key: string; slot: number; holder: string; claimMs: number }): Promise<void> {
    await this.pool.query(releaseLeaseSql, [lease.key, lease.slot, lease.holder, lease.claimMs]);
  }

  async renewLeases(holders: readonly string[], leaseMs: number): Promise<void> {
    await this.pool.query(renewLeasesSql, [holders, leaseMs]);
  }
}
