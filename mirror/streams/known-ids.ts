// Whether an id a caller names (a project in `Project-Id`, a parent in a path) is one the mirror holds
// for the account, and whether the list it would be in has been synced: a read that names an id the
// mirror knows to be absent is refused before anything is forwarded or started for it.
import type { Pool } from '../db/pool.ts';

interface IdLookup {
  accountId: string;
  /** The list the id belongs to: `projects` in scope '', `ap-invoices` in a project's scope, ... */
  resource: string;
  scope: string;
  /** A service id, or `source_id:<x>`. */
  ref: string;
}

interface IdStanding {
  /** The record's service id, when the mirror holds it (a service id: deleted or not; a source id: live). */
  id: string | undefined;
  /** Whether a pass over the list has completed: then an id absent from it is absent upstream too. */
  listSynced: boolean;
}

export async function idStanding(pool: Pool, q: IdLookup): Promise<IdStanding> {
  const bySourceId = q.ref.startsWith('source_id:');
  const { rows } = await pool.query<{ id: string | null; synced: boolean }>(
    `SELECT (SELECT id FROM records
              WHERE account_id = $1 AND resource = $2 AND scope = $3
                AND ${bySourceId ? 'source_id = $4 AND deleted_at IS NULL' : 'id = $4'}
              LIMIT 1) AS id,
            EXISTS (SELECT 1 FROM streams
                     WHERE account_id = $1 AND resource = $2 AND scope = $3 AND last_fresh_at IS NOT NULL) AS synced`,
    [q.accountId, q.resource, q.scope, bySourceId ? q.ref.slice('source_id:'.length) : q.ref],
  );
  return { id: rows[0]?.id ?? undefined, listSynced: rows[0]?.synced ?? false };
}

interface StreamRef {
  accountId: string;
  resource: string;
  scope: string;
}

/** Ids of a stream's live records, in list order: the scopes of its children (projects, invoices, ...). */
export async function liveRecordIds(pool: Pool, stream: StreamRef): Promise<string[]> {
  const { rows } = await pool.query<{ id: string }>(
    `SELECT id FROM records WHERE account_id = $1 AND resource = $2 AND scope = $3 AND deleted_at IS NULL ORDER BY ordinal, id`,
    [stream.accountId, stream.resource, stream.scope],
  );
  return rows.map((r) => r.id);
}
