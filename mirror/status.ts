// Per account and stream: state, records, freshness, lag and last error, read from Postgres.
import type { Pool } from './pool.ts';

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
  }>(
    `SELECT s.account_id, a.source_system, s.resource, s.scope, s.state, s.pages, s.records, s.last_fresh_at, s.last_error,
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
  }));
}

export interface ResourceSummary {
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
      sum = { accountId: s.accountId, sourceSystem: s.sourceSystem, resource: s.resource, streams: 0, states: {}, liveRecords: 0, oldestFreshAt: null, lastError: null };
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
