// Per account and stream: state, records, freshness, lag, last error, and when an incremental pass
// next lists it and why (adaptive polling, mirror/streams/polling.ts), read from Postgres.
import type { Pool } from '../db/pool.ts';

export interface StreamStatus {
  accountId: string;
  sourceSystem: string;
  resource: string;
  scope: string;
  state: string;
  pages: number;
  records: number;
  liveRecords: number;
  lastFreshAt: string | null;
  lagSeconds: number | null;
  lastError: string | null;
  /** When an incremental pass next lists the stream (null: every pass, or with its parent), and why. */
  nextDueAt: string | null;
  dueReason: string | null;
}

export async function streamStatuses(pool: Pool, filter: { accountId?: string } = {}): Promise<StreamStatus[]> {
  const { rows } = await pool.query<{
    account_id: string;
    source_system: string;
    resource: string;
    scope: string;
    state: string;
    pages: number;
    records: number;
    live: number;
    last_fresh_at: Date | null;
    last_error: string | null;
    next_due_at: Date | null;
    due_reason: string | null;
  }>(
    `SELECT s.account_id, a.source_system, s.resource, s.scope, s.state, s.pages, s.records, s.last_fresh_at, s.last_error, s.next_due_at, s.due_reason,
            (SELECT count(*)::int FROM records r WHERE r.account_id = s.account_id AND r.resource = s.resource AND r.scope = s.scope AND r.deleted_at IS NULL) AS live
       FROM streams s JOIN linked_accounts a ON a.id = s.account_id
      WHERE ($1::uuid IS NULL OR s.account_id = $1)
      ORDER BY a.created_at, s.resource, s.scope`,
    [filter.accountId ?? null],
  );
  const now = Date.now();
  return rows.map((r) => ({
    accountId: r.account_id,
    sourceSystem: r.source_system,
    resource: r.resource,
    scope: r.scope,
    state: r.state,
    pages: r.pages,
    records: r.records,
    liveRecords: r.live,
    lastFreshAt: r.last_fresh_at?.toISOString() ?? null,
    lagSeconds: r.last_fresh_at ? Math.round((now - r.last_fresh_at.getTime()) / 1000) : null,
    lastError: r.last_error,
    nextDueAt: r.next_due_at?.toISOString() ?? null,
    dueReason: r.due_reason,
  }));
}

/** Streams whose polling nothing has recorded yet (no pass completed since adaptive polling came). */
const unrecordedReason = 'no poll recorded yet: every pass';

export interface PollingGroup {
  accountId: string;
  reason: string;
  streams: number;
  /** The group's earliest next due time. */
  nextDueAt: string | null;
}

export interface DueStream {
  accountId: string;
  resource: string;
  scope: string;
  nextDueAt: string;
  reason: string | null;
}

/**
 * When streams are listed next, in a shape that stays small with thousands of streams: per account,
 * the streams by reason (each group's count and earliest due time), and the next `next` streams due.
 */
export async function pollingOverview(pool: Pool, filter: { accountId?: string; next?: number } = {}): Promise<{ groups: PollingGroup[]; next: DueStream[] }> {
  const [groups, next] = await Promise.all([
    pool.query<{ account_id: string; reason: string; streams: number; next_due_at: Date | null }>(
      `SELECT account_id, coalesce(due_reason, $2) AS reason, count(*)::int AS streams, min(next_due_at) AS next_due_at
         FROM streams WHERE ($1::uuid IS NULL OR account_id = $1)
        GROUP BY 1, 2 ORDER BY 1, min(next_due_at) NULLS LAST, 2`,
      [filter.accountId ?? null, unrecordedReason],
    ),
    pool.query<{ account_id: string; resource: string; scope: string; next_due_at: Date; due_reason: string | null }>(
      `SELECT account_id, resource, scope, next_due_at, due_reason FROM streams
        WHERE ($1::uuid IS NULL OR account_id = $1) AND next_due_at IS NOT NULL
        ORDER BY next_due_at, resource, scope LIMIT $2`,
      [filter.accountId ?? null, filter.next ?? 5],
    ),
  ]);
  return {
    groups: groups.rows.map((g) => ({ accountId: g.account_id, reason: g.reason, streams: g.streams, nextDueAt: g.next_due_at?.toISOString() ?? null })),
    next: next.rows.map((n) => ({
      accountId: n.account_id,
      resource: n.resource,
      scope: n.scope,
      nextDueAt: n.next_due_at.toISOString(),
      reason: n.due_reason,
    })),
  };
}

interface ResourceSummary {
  accountId: string;
  sourceSystem: string;
  resource: string;
  streams: number;
  states: Record<string, number>;
  liveRecords: number;
  oldestFreshAt: string | null;
  lastError: string | null;
}

/** One line per account and resource: the shape an operator reads first. */
export function summarise(statuses: readonly StreamStatus[]): ResourceSummary[] {
  const byKey = new Map<string, ResourceSummary>();
  for (const s of statuses) {
    const key = `${s.accountId}/${s.resource}`;
    let sum = byKey.get(key);
    if (!sum) {
      sum = {
        accountId: s.accountId,
        sourceSystem: s.sourceSystem,
        resource: s.resource,
        streams: 0,
        states: {},
        liveRecords: 0,
        oldestFreshAt: null,
        lastError: null,
      };
      byKey.set(key, sum);
    }
    sum.streams++;
    sum.states[s.state] = (sum.states[s.state] ?? 0) + 1;
    sum.liveRecords += s.liveRecords;
    if (s.lastFreshAt && (!sum.oldestFreshAt || s.lastFreshAt < sum.oldestFreshAt)) sum.oldestFreshAt = s.lastFreshAt;
    if (s.lastError) sum.lastError = s.lastError;
  }
  return [...byKey.values()];
}
