// What an operator reads: accounts, streams in progress, a pass's totals, rate budgets, recent errors,
// the webhook inbox and outbound deliveries. Read-only queries behind the status page, the CLI and
// /metrics; every one is bounded so the page stays fast on a large mirror.
import { resourceForWebhookType } from '../../lib/resources.ts';
import type { Pool } from '../db/pool.ts';

const iso = (d: Date | null | undefined): string | null => (d ? d.toISOString() : null);
const ageSeconds = (d: Date | null | undefined, now: number): number | null => (d ? Math.max(0, Math.round((now - d.getTime()) / 1000)) : null);

export interface AccountOverview {
  id: string;
  referenceId: string;
  sourceSystem: string;
  sourceSystemName: string;
  /** `linked`, `idle` (linked, unused for MIRROR_IDLE_AFTER: polled less often), `credentials_refused` or `unlinked`. */
  status: string;
  /** Why the account is not linked (the upstream's words for a refusal), when it is not. */
  statusReason: string | null;
  createdAt: string;
  /** When it was last read or written through the API, and since when it is idle. */
  lastUsedAt: string | null;
  idleSince: string | null;
  streams: number;
  states: Record<string, number>;
  liveRecords: number;
  /** The stalest synced stream's last fresh time, and how long ago that was. */
  oldestFreshAt: string | null;
  lagSeconds: number | null;
  lastError: string | null;
  inboxPending: number;
  webhookRegistrations: number;
}

export async function accountsOverview(pool: Pool, filter: { accountId?: string } = {}): Promise<AccountOverview[]> {
  const accountId = filter.accountId ?? null;
  const [accounts, streams, records, inbox, hooks] = await Promise.all([
    pool.query<{
      id: string;
      reference_id: string;
      source_system: string;
      source_system_name: string;
      status: string;
      status_reason: string | null;
      created_at: Date;
      last_used_at: Date | null;
      idle_since: Date | null;
    }>(
      `SELECT id, reference_id, source_system, source_system_name, status, status_reason, created_at, last_used_at, idle_since FROM linked_accounts
        WHERE ($1::uuid IS NULL OR id = $1) ORDER BY created_at, id`,
      [accountId],
    ),
    pool.query<{ account_id: string; state: string; n: number; oldest: Date | null; last_error: string | null }>(
      `SELECT account_id, state, count(*)::int AS n, min(last_fresh_at) AS oldest,
              (array_agg(last_error ORDER BY updated_at DESC) FILTER (WHERE last_error IS NOT NULL))[1] AS last_error
         FROM streams WHERE ($1::uuid IS NULL OR account_id = $1) GROUP BY account_id, state`,
      [accountId],
    ),
    pool.query<{ account_id: string; n: number }>(
      `SELECT account_id, count(*)::int AS n FROM records WHERE deleted_at IS NULL AND ($1::uuid IS NULL OR account_id = $1) GROUP BY account_id`,
      [accountId],
    ),
    pool.query<{ account_id: string; n: number }>(
      `SELECT account_id, count(*)::int AS n FROM inbox_events WHERE applied_at IS NULL AND ($1::uuid IS NULL OR account_id = $1) GROUP BY account_id`,
      [accountId],
    ),
    pool.query<{ account_id: string; n: number }>(
      `SELECT account_id, count(*)::int AS n FROM webhook_registrations WHERE ($1::uuid IS NULL OR account_id = $1) GROUP BY account_id`,
      [accountId],
    ),
  ]);
  const now = Date.now();
  const count = (rows: { account_id: string; n: number }[]) => new Map(rows.map((r) => [r.account_id, r.n]));
  const recordsBy = count(records.rows);
  const inboxBy = count(inbox.rows);
  const hooksBy = count(hooks.rows);
  const overview = accounts.rows.map((a) => {
    const mine = streams.rows.filter((s) => s.account_id === a.id);
    const states: Record<string, number> = {};
    let oldest: Date | null = null;
    for (const s of mine) {
      states[s.state] = s.n;
      if (s.oldest && (!oldest || s.oldest < oldest)) oldest = s.oldest;
    }
    const failed = mine.find((s) => (s.state === 'failed' || s.state === 'stalled') && s.last_error) ?? mine.find((s) => s.last_error);
    return {
      id: a.id,
      referenceId: a.reference_id,
      sourceSystem: a.source_system,
      sourceSystemName: a.source_system_name,
      status: a.status === 'linked' && a.idle_since ? 'idle' : a.status,
      statusReason:
        a.status === 'linked'
          ? a.idle_since
            ? `unused since ${a.last_used_at?.toISOString() ?? a.created_at.toISOString()}: polled less often until its next read or write`
            : null
          : a.status_reason,
      createdAt: a.created_at.toISOString(),
      lastUsedAt: iso(a.last_used_at),
      idleSince: iso(a.idle_since),
      streams: mine.reduce((n, s) => n + s.n, 0),
      states,
      liveRecords: recordsBy.get(a.id) ?? 0,
      oldestFreshAt: iso(oldest),
      lagSeconds: ageSeconds(oldest, now),
      lastError: failed?.last_error ?? null,
      inboxPending: inboxBy.get(a.id) ?? 0,
      webhookRegistrations: hooksBy.get(a.id) ?? 0,
    };
  });
  // What needs the operator comes first: refused credentials, then failed or stalled streams (most
  // first), then the rest; idle accounts after them, unlinked ones last. Within each, in the order they
  // were linked (a stable sort).
  return overview.sort((x, y) => attentionRank(x) - attentionRank(y) || troubled(y) - troubled(x));
}

const troubled = (a: Pick<AccountOverview, 'states'>): number => (a.states.failed ?? 0) + (a.states.stalled ?? 0);

function attentionRank(a: Pick<AccountOverview, 'status' | 'states'>): number {
  if (a.status === 'credentials_refused') return 0;
  if (a.status === 'unlinked') return 4;
  if (troubled(a) > 0) return 1;
  return a.status === 'idle' ? 3 : 2;
}

export interface StreamProgressRow {
  accountId: string;
  resource: string;
  scope: string;
  state: string;
  mode: string | null;
  pages: number;
  /** Records written by the current (or last) pass so far. */
  records: number;
  /** What the previous complete pass of this stream saw: a guess at this pass's total. */
  expected: number | null;
  passStartedAt: string | null;
  lastError: string | null;
}

/**
 * Streams whose pass started at or after `since` (a sync the caller started), or, without `since`,
 * the streams syncing now. Oldest first; at most `limit`.
 */
export async function streamProgress(pool: Pool, q: { accountId?: string; since?: Date; limit?: number }): Promise<StreamProgressRow[]> {
  const { rows } = await pool.query<{
    account_id: string;
    resource: string;
    scope: string;
    state: string;
    mode: string | null;
    pages: number;
    records: number;
    expected: number | null;
    pass_started_at: Date | null;
    last_error: string | null;
  }>(
    `SELECT s.account_id, s.resource, s.scope, s.state, s.mode, s.pages, s.records, s.pass_started_at, s.last_error,
            (SELECT r.inserted + r.updated + r.unchanged FROM sync_runs r
              WHERE r.stream_id = s.id AND r.status = 'succeeded' AND r.generation < s.generation
              ORDER BY r.generation DESC LIMIT 1) AS expected
       FROM streams s
      WHERE ($1::uuid IS NULL OR s.account_id = $1)
        AND (CASE WHEN $2::timestamptz IS NULL THEN s.state = 'syncing' ELSE s.pass_started_at >= $2 END)
      ORDER BY s.pass_started_at, s.resource, s.scope
      LIMIT $3`,
    [q.accountId ?? null, q.since ?? null, q.limit ?? 200],
  );
  return rows.map((r) => ({
    accountId: r.account_id,
    resource: r.resource,
    scope: r.scope,
    state: r.state,
    mode: r.mode,
    pages: r.pages,
    records: r.records,
    expected: r.expected,
    passStartedAt: iso(r.pass_started_at),
    lastError: r.last_error,
  }));
}

export interface PassTotals {
  resource: string;
  streams: number;
  running: number;
  failed: number;
  pages: number;
  records: number;
  inserted: number;
  updated: number;
  unchanged: number;
  deleted: number;
  seconds: number;
}

/** Per resource, what the runs an account started at or after `since` did (the final table of a sync). */
export async function passTotals(pool: Pool, accountId: string, since: Date): Promise<PassTotals[]> {
  const { rows } = await pool.query<PassTotals>(
    `SELECT s.resource,
            count(*)::int AS streams,
            count(*) FILTER (WHERE r.status = 'running')::int AS running,
            count(*) FILTER (WHERE r.status = 'failed')::int AS failed,
            sum(CASE WHEN r.status = 'succeeded' THEN r.pages ELSE s.pages END)::int AS pages,
            sum(CASE WHEN r.status = 'succeeded' THEN r.inserted + r.updated + r.unchanged ELSE s.records END)::int AS records,
            sum(r.inserted)::int AS inserted, sum(r.updated)::int AS updated, sum(r.unchanged)::int AS unchanged, sum(r.deleted)::int AS deleted,
            coalesce(extract(epoch FROM max(coalesce(r.finished_at, now())) - min(r.started_at)), 0)::float8 AS seconds
       FROM sync_runs r JOIN streams s ON s.id = r.stream_id
      WHERE s.account_id = $1 AND r.started_at >= $2
      GROUP BY s.resource ORDER BY min(r.started_at), s.resource`,
    [accountId, since],
  );
  return rows;
}

export interface BudgetRow {
  key: string;
  kind: 'service' | 'source-system';
  /**
   * `all`: the budget every request spends; `sync`: its background lane, the schedule that
   * keeps background work to MIRROR_SYNC_BUDGET_SHARE of each window (its counts are the budget's).
   */
  lane: 'all' | 'sync';
  accountId: string | null;
  sourceSystem: string | null;
  total: number | null;
  remaining: number | null;
  windowMs: number;
  /** Share of the window's budget spent, as last reported (null while unknown). */
  usedRatio: number | null;
  resetsInSeconds: number | null;
  blockedForSeconds: number | null;
  updatedAt: string;
}

/** The governor's budgets (rate_budgets), most recently used first. */
export async function rateBudgets(pool: Pool, limit = 100): Promise<BudgetRow[]> {
  const { rows } = await pool.query<{
    key: string;
    total: number | null;
    remaining: number | null;
    window_ms: number;
    resets_in: number | null;
    blocked_for: number | null;
    updated_at: Date;
  }>(
    `SELECT key, total, remaining, window_ms,
            extract(epoch FROM resets_at - clock_timestamp())::float8 AS resets_in,
            CASE WHEN blocked_until > clock_timestamp() THEN extract(epoch FROM blocked_until - clock_timestamp())::float8 END AS blocked_for,
            updated_at
       FROM rate_budgets ORDER BY updated_at DESC LIMIT $1`,
    [limit],
  );
  return rows.map((r) => {
    // Keys: `source:<account>:<slug>` for a source system's window, `<prefix>:<client>:<account>` for the service's;
    // `|background` after either names its sync lane.
    const lane = r.key.endsWith('|background') ? 'sync' : 'all';
    const parts = r.key.replace(/\|background$/, '').split(':');
    const source = parts[0] === 'source';
    const resetsIn = r.resets_in === null ? null : Math.max(0, Math.round(r.resets_in * 10) / 10);
    return {
      key: r.key,
      kind: source ? 'source-system' : 'service',
      lane,
      accountId: (source ? parts[1] : parts[2]) || null,
      sourceSystem: source ? (parts[2] ?? null) : null,
      total: r.total,
      remaining: r.remaining,
      windowMs: r.window_ms,
      // A window that already reset has its whole budget again.
      usedRatio:
        r.total && r.remaining !== null && (resetsIn === null || resetsIn > 0)
          ? Math.min(1, Math.max(0, (r.total - r.remaining) / r.total))
          : r.total
            ? 0
            : null,
      resetsInSeconds: resetsIn,
      blockedForSeconds: r.blocked_for === null ? null : Math.round(r.blocked_for * 10) / 10,
      updatedAt: r.updated_at.toISOString(),
    };
  });
}

export interface RecentError {
  at: string;
  kind: 'stream' | 'run' | 'delivery';
  accountId: string;
  what: string;
  message: string;
}

/** Stream failures, failed runs and failing outbound deliveries, newest first. */
export async function recentErrors(pool: Pool, limit = 20): Promise<RecentError[]> {
  const [streams, runs, subs] = await Promise.all([
    pool.query<{ account_id: string; resource: string; scope: string; last_error: string; updated_at: Date }>(
      `SELECT account_id, resource, scope, last_error, updated_at FROM streams WHERE last_error IS NOT NULL ORDER BY updated_at DESC LIMIT $1`,
      [limit],
    ),
    pool.query<{ account_id: string; resource: string; scope: string; error: string | null; finished_at: Date | null; started_at: Date }>(
      `SELECT s.account_id, s.resource, s.scope, r.error, r.finished_at, r.started_at FROM sync_runs r JOIN streams s ON s.id = r.stream_id
        WHERE r.status = 'failed' ORDER BY r.id DESC LIMIT $1`,
      [limit],
    ),
    pool.query<{ account_id: string; id: string; type: string; event: string; last_error: string; created_at: Date }>(
      `SELECT account_id, id, type, event, last_error, created_at FROM subscriptions WHERE last_error IS NOT NULL ORDER BY created_at DESC LIMIT $1`,
      [limit],
    ),
  ]);
  const what = (resource: string, scope: string) => `${resource}${scope ? ` ${scope}` : ''}`;
  const errors: RecentError[] = [
    ...streams.rows.map((r) => ({
      at: r.updated_at.toISOString(),
      kind: 'stream' as const,
      accountId: r.account_id,
      what: what(r.resource, r.scope),
      message: r.last_error,
    })),
    ...runs.rows.map((r) => ({
      at: (r.finished_at ?? r.started_at).toISOString(),
      kind: 'run' as const,
      accountId: r.account_id,
      what: what(r.resource, r.scope),
      message: r.error ?? 'failed',
    })),
    ...subs.rows.map((r) => {
      // Delivery errors are stored as "<ISO time> <message>".
      const m = /^(\d{4}-\d\d-\d\dT[\d:.]+Z) (.*)$/s.exec(r.last_error);
      return {
        at: m ? m[1]! : r.created_at.toISOString(),
        kind: 'delivery' as const,
        accountId: r.account_id,
        what: `webhook ${r.event} ${r.type} (${r.id.slice(0, 8)})`,
        message: m ? m[2]! : r.last_error,
      };
    }),
  ];
  // A stream's failure shows once, even when its failed run says the same.
  const seen = new Set<string>();
  return errors
    .sort((a, b) => b.at.localeCompare(a.at))
    .filter((e) => {
      const k = `${e.accountId}|${e.what}|${e.message}`;
      if (seen.has(k)) return false;
      seen.add(k);
      return true;
    })
    .slice(0, limit);
}

export interface InboxOverview {
  accountId: string;
  pending: number;
  oldestPendingSeconds: number | null;
  appliedLastHour: number;
  /** Receipt to application, over the last hour. */
  latencyP50Seconds: number | null;
  latencyP95Seconds: number | null;
}

export async function inboxOverview(pool: Pool): Promise<InboxOverview[]> {
  const { rows } = await pool.query<{ account_id: string; pending: number; oldest: Date | null; applied: number; p50: number | null; p95: number | null }>(
    `SELECT account_id,
            count(*) FILTER (WHERE applied_at IS NULL)::int AS pending,
            min(received_at) FILTER (WHERE applied_at IS NULL) AS oldest,
            count(*) FILTER (WHERE applied_at > now() - interval '1 hour')::int AS applied,
            percentile_cont(0.5) WITHIN GROUP (ORDER BY extract(epoch FROM applied_at - received_at)) FILTER (WHERE applied_at > now() - interval '1 hour') AS p50,
            percentile_cont(0.95) WITHIN GROUP (ORDER BY extract(epoch FROM applied_at - received_at)) FILTER (WHERE applied_at > now() - interval '1 hour') AS p95
       FROM inbox_events WHERE applied_at IS NULL OR applied_at > now() - interval '1 hour'
      GROUP BY account_id ORDER BY account_id`,
  );
  const now = Date.now();
  return rows.map((r) => ({
    accountId: r.account_id,
    pending: r.pending,
    oldestPendingSeconds: ageSeconds(r.oldest, now),
    appliedLastHour: r.applied,
    latencyP50Seconds: r.p50 === null ? null : Math.round(r.p50 * 1000) / 1000,
    latencyP95Seconds: r.p95 === null ? null : Math.round(r.p95 * 1000) / 1000,
  }));
}

export interface DeliveryOverview {
  id: string;
  accountId: string;
  event: string;
  type: string;
  /** Scheme, host and port of the callback only: its path may carry a secret. */
  callbackOrigin: string;
  delivered: number;
  failures: number;
  lastError: string | null;
  lastDeliveredAt: string | null;
  /** Changes mirrored after the subscription's cursor, counted up to `backlogCap`. */
  backlog: number;
}

const backlogCap = 10_000;

export async function deliveriesOverview(pool: Pool, limit = 100): Promise<DeliveryOverview[]> {
  const { rows } = await pool.query<{
    id: string;
    account_id: string;
    event: string;
    type: string;
    callback_url: string;
    delivered: number;
    failures: number;
    last_error: string | null;
    last_delivered_at: Date | null;
    cursor_at: Date;
  }>(
    `SELECT id, account_id, event, type, callback_url, delivered, failures, last_error, last_delivered_at, cursor_at FROM subscriptions ORDER BY created_at LIMIT $1`,
    [limit],
  );
  return Promise.all(
    rows.map(async (r) => {
      const resource = resourceForWebhookType(r.type)?.name;
      let backlog = 0;
      if (resource) {
        const res = await pool.query<{ n: number }>(
          `SELECT count(*)::int AS n FROM (SELECT 1 FROM records WHERE account_id = $1 AND resource = $2 AND mirrored_at > $3 LIMIT ${backlogCap}) x`,
          [r.account_id, resource, r.cursor_at],
        );
        backlog = res.rows[0]?.n ?? 0;
      }
      let origin: string;
      try {
        origin = new URL(r.callback_url).origin;
      } catch {
        origin = '(invalid URL)';
      }
      return {
        id: r.id,
        accountId: r.account_id,
        event: r.event,
        type: r.type,
        callbackOrigin: origin,
        delivered: r.delivered,
        failures: r.failures,
        lastError: r.last_error,
        lastDeliveredAt: iso(r.last_delivered_at),
        backlog,
      };
    }),
  );
}

interface RegistrationOverview {
  id: string;
  accountId: string;
  upstreamId: string | null;
  event: string;
  type: string;
  projectId: string | null;
  createdAt: string;
  received: number;
  lastReceivedAt: string | null;
}

/** The webhooks the mirror registered upstream, with what each delivered into the inbox. */
export async function webhookRegistrations(pool: Pool, filter: { accountId?: string } = {}): Promise<RegistrationOverview[]> {
  const { rows } = await pool.query<{
    id: string;
    account_id: string;
    upstream_id: string | null;
    event: string;
    type: string;
    project_id: string | null;
    created_at: Date;
    received: number;
    last_received: Date | null;
  }>(
    `SELECT w.id, w.account_id, w.upstream_id, w.event, w.type, w.project_id, w.created_at,
            count(e.id)::int AS received, max(e.received_at) AS last_received
       FROM webhook_registrations w LEFT JOIN inbox_events e ON e.registration_id = w.id
      WHERE ($1::uuid IS NULL OR w.account_id = $1)
      GROUP BY w.id ORDER BY w.account_id, w.type, w.project_id NULLS FIRST, w.event`,
    [filter.accountId ?? null],
  );
  return rows.map((r) => ({
    id: r.id,
    accountId: r.account_id,
    upstreamId: r.upstream_id,
    event: r.event,
    type: r.type,
    projectId: r.project_id,
    createdAt: r.created_at.toISOString(),
    received: r.received,
    lastReceivedAt: iso(r.last_received),
  }));
}
