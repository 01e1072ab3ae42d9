// The mirror's own change feed: records in order of (mirrored_at, scope, id). Outbound webhooks and
// the read API's changes endpoint follow it with a cursor. Rows younger than a short settle window
// are held back, so a page transaction that commits late cannot slip behind a cursor.
// A cursor's time is a JavaScript Date, to the millisecond, while Postgres keeps microseconds: the feed
// is ordered and compared on the millisecond (date_trunc), or the last row delivered would stay after
// its own cursor and be delivered again on every poll (3 updates were 492 deliveries in 20 s).
import type { Pool } from '../db/pool.ts';

const settleMs = 2000;

export interface ChangeCursor {
  at: Date;
  key: string;
}

interface Change {
  resource: string;
  scope: string;
  id: string;
  sourceId: string | null;
  event: 'CREATE' | 'UPDATE' | 'DELETE';
  data: Record<string, unknown>;
  mirroredAt: Date;
  cursor: ChangeCursor;
}

export async function changesSince(
  pool: Pool,
  q: { accountId: string; resource: string; scopePrefix?: string; after: ChangeCursor; limit: number },
): Promise<Change[]> {
  const { rows } = await pool.query<{
    resource: string;
    scope: string;
    id: string;
    source_id: string | null;
    data: Record<string, unknown>;
    mirrored_at: Date;
    first_seen_at: Date;
    deleted_at: Date | null;
    k: string;
  }>(
    `SELECT resource, scope, id, source_id, data, mirrored_at, first_seen_at, deleted_at, scope || '/' || id AS k
       FROM records
      WHERE account_id = $1 AND resource = $2
        AND ($3::text IS NULL OR scope = $3 OR scope LIKE $3 || '/%')
        AND mirrored_at >= $4::timestamptz
        AND (date_trunc('milliseconds', mirrored_at), scope || '/' || id) > ($4::timestamptz, $5::text)
        AND mirrored_at < now() - make_interval(secs => $7)
      ORDER BY date_trunc('milliseconds', mirrored_at), scope || '/' || id
      LIMIT $6`,
    [q.accountId, q.resource, q.scopePrefix ?? null, q.after.at, q.after.key, q.limit, settleMs / 1000],
  );
  return rows.map((r) => ({
    resource: r.resource,
    scope: r.scope,
    id: r.id,
    sourceId: r.source_id,
    event: r.deleted_at ? 'DELETE' : r.first_seen_at.getTime() === r.mirrored_at.getTime() ? 'CREATE' : 'UPDATE',
    data: r.data,
    mirroredAt: r.mirrored_at,
    cursor: { at: r.mirrored_at, key: r.k },
  }));
}

/** A stream's completed pass, as the SYNCED event tells it. */
interface SyncedPass {
  runId: number;
  scope: string;
  mode: string;
  pages: number;
  added: number;
  updated: number;
  unchanged: number;
  deleted: number;
  finishedAt: Date;
  cursor: ChangeCursor;
}

/**
 * Passes of an account's resource that committed every page, in order of (finished_at, run id),
 * after a cursor; held back for the same settle window as changes.
 */
export async function syncedSince(
  pool: Pool,
  q: { accountId: string; resource: string; scopePrefix?: string; after: ChangeCursor; limit: number },
): Promise<SyncedPass[]> {
  const { rows } = await pool.query<{
    id: number;
    scope: string;
    mode: string;
    pages: number;
    inserted: number;
    updated: number;
    unchanged: number;
    deleted: number;
    finished_at: Date;
    k: string;
  }>(
    `SELECT r.id, s.scope, r.mode, r.pages, r.inserted, r.updated, r.unchanged, r.deleted, r.finished_at, lpad(r.id::text, 20, '0') AS k
       FROM sync_runs r JOIN streams s ON s.id = r.stream_id
      WHERE s.account_id = $1 AND s.resource = $2 AND r.status = 'succeeded'
        AND ($3::text IS NULL OR s.scope = $3 OR s.scope LIKE $3 || '/%')
        AND r.finished_at >= $4::timestamptz
        AND (date_trunc('milliseconds', r.finished_at), lpad(r.id::text, 20, '0')) > ($4::timestamptz, $5::text)
        AND r.finished_at < now() - make_interval(secs => $7)
      ORDER BY date_trunc('milliseconds', r.finished_at), r.id
      LIMIT $6`,
    [q.accountId, q.resource, q.scopePrefix ?? null, q.after.at, q.after.key, q.limit, settleMs / 1000],
  );
  return rows.map((r) => ({
    runId: r.id,
    scope: r.scope,
    mode: r.mode,
    pages: r.pages,
    added: r.inserted,
    updated: r.updated,
    unchanged: r.unchanged,
    deleted: r.deleted,
    finishedAt: r.finished_at,
    cursor: { at: r.finished_at, key: r.k },
  }));
}
