// Dense positions per stream (any page as fast as the first). A stream's live record ids in
// the upstream's order (ordinal, then id) are kept in record_position_chunks, `positionChunk` to a row,
// so a list page at any offset is a slice of one or two rows and its records by primary key, instead of
// an OFFSET that reads and sorts every key before it (976 ms cold, ~200 ms warm at offset 150k of 200k).
//
// When positions may be used: record_position_sets holds per stream a `version` that every write of the
// stream's records bumps in its own transaction ({@link invalidatePositions}), and the `valid_version`
// the positions were computed at ({@link computePositions}, when a pass finishes). A reader uses them only
// where the two are equal in its own snapshot (mirror/reads/records-read.ts), else the OFFSET query: a page is
// never wrong for want of positions, only slower.
//
// Why the bump is an upsert of the set row, not a conditional update: a writer whose statement snapshot
// predates a concurrent computation's commit would not see the row (or its new valid_version) and skip
// it, leaving positions marked valid that miss its records. An upsert, like any UPDATE, waits for the
// row lock and then applies to the newest committed version, so a write either committed before the
// computation took the row lock (and the computation's later snapshot sees it) or bumps after it.
//
// A list across projects (`Project-Id: *`) has positions of its own, under the scope `project=*`: every
// project's live records in the order the upstream listed them across projects (the ordinals its last
// full pass wrote, then scope and id), each named `<scope>|<id>` (ids repeat across projects). Every
// write to a project's records bumps them too, so they are valid only while every record holds the
// place that pass gave it: the one proof the mirror has of the upstream's order across projects.
import { allProjectsScope } from '../../lib/resources.ts';
import type { PoolClient } from '../db/pool.ts';

/**
 * Positions per chunk row: a page of up to 100 is a slice of one or two rows, each ~4.5 kB of ids and
 * ordinals stored inline (500 ids to a row were ~20 kB out of line: a random page read ~40 kB of TOAST).
 * A set computed with another size (`chunk_size`) is not read, and is computed again.
 */
export const positionChunk = 100;

/** A stream's position set: account, resource, scope. */
export interface PositionKey {
  accountId: string;
  resource: string;
  scope: string;
}

/**
 * Marks the positions of these streams (resource and scope pairs of one account) out of date: call in
 * the transaction that changed their records, after its writes of records and before it updates a
 * streams row (one lock order for every writer and for finishPass: records, position sets, streams;
 * else an event that touched its stream's row and a pass finishing the stream deadlock). The set rows'
 * locks are held to the commit: pass pages take them after the page before committed, so two pages of
 * a pass never wait on each other through them.
 */
export async function invalidatePositions(
  client: Pick<PoolClient, 'query'>,
  accountId: string,
  streams: readonly { resource: string; scope: string }[],
): Promise<void> {
  if (streams.length === 0) return;
  // A project's records are also in the list across projects of their resource.
  const across = streams.filter((s) => isProjectScope(s.scope)).map((s) => ({ resource: s.resource, scope: allProjectsScope }));
  // One order for every writer, so two that bump the same rows never deadlock.
  const sorted = [...new Map([...streams, ...across].map((s) => [`${s.resource}\u0000${s.scope}`, s])).entries()]
    .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
    .map(([, s]) => s);
  await client.query(
    `INSERT INTO record_position_sets AS s (account_id, resource, scope)
     SELECT $1, t.resource, t.scope FROM unnest($2::text[], $3::text[]) WITH ORDINALITY AS t(resource, scope, n) ORDER BY t.n
     ON CONFLICT (account_id, resource, scope) DO UPDATE SET version = s.version + 1`,
    [accountId, sorted.map((s) => s.resource), sorted.map((s) => s.scope)],
  );
}

/** One project's own scope (`project=<id>`): not the list across projects, nor a child's scope. */
function isProjectScope(scope: string): boolean {
  return scope.startsWith('project=') && scope !== allProjectsScope && !scope.includes('/');
}

/**
 * The live records a set's positions name, with each one's position: one scope's in its order, or, for
 * the list across projects, every project's (ordinal, then scope and id), named `<scope>|<id>`.
 */
function liveSql(scope: string): string {
  return scope === allProjectsScope
    ? `SELECT scope || '|' || id AS id, ordinal, (row_number() OVER (ORDER BY ordinal, scope, id) - 1)::int AS pos
         FROM records WHERE account_id = $1 AND resource = $2 AND scope LIKE 'project=%' AND strpos(scope, '/') = 0 AND scope <> $3
          AND deleted_at IS NULL`
    : `SELECT id, ordinal, (row_number() OVER (ORDER BY ordinal, id) - 1)::int AS pos
         FROM records WHERE account_id = $1 AND resource = $2 AND scope = $3 AND deleted_at IS NULL`;
}

/**
 * Brings a stream's positions up to date with its records, in the caller's transaction (the one that
 * completes a pass, after its deletes): nothing when they are valid already. First the set row is
 * locked (bumped), so every writer either committed before (and this statement's snapshot, taken after,
 * sees its records) or bumps after this transaction commits. Only chunks whose ids changed are written.
 * Returns the live records counted, or null when the positions were valid already.
 */
export async function computePositions(client: Pick<PoolClient, 'query'>, key: PositionKey): Promise<number | null> {
  const params = [key.accountId, key.resource, key.scope];
  const { rows: locked } = await client.query(
    `INSERT INTO record_position_sets AS s (account_id, resource, scope) VALUES ($1, $2, $3)
     ON CONFLICT (account_id, resource, scope) DO UPDATE SET version = s.version + 1
      WHERE s.valid_version IS DISTINCT FROM s.version OR s.chunk_size IS DISTINCT FROM ${positionChunk}
     RETURNING 1`,
    params,
  );
  // No row returned: the set was valid (ON CONFLICT locked it all the same, and nothing changed it).
  if (locked.length === 0) return null;
  // Both sorts (the order, then the chunks) in memory: with the default 4 MB each spilled ~10 MB to
  // disk at 200k records (1.27 s of which ~0.45 s the spills, on a loaded machine). Until the commit.
  await client.query(`SET LOCAL work_mem = '64MB'`);
  const { rows } = await client.query<{ live: number }>(
    `WITH live AS MATERIALIZED (${liveSql(key.scope)}
     ), chunks AS MATERIALIZED (
       SELECT pos / ${positionChunk} AS chunk, array_agg(id ORDER BY pos) AS ids, array_agg(ordinal ORDER BY pos) AS ordinals FROM live GROUP BY 1
     ), written AS (  -- (data-modifying CTEs run to completion whether read or not)
       INSERT INTO record_position_chunks AS c (account_id, resource, scope, chunk, ids, ordinals)
       SELECT $1, $2, $3, chunk, ids, ordinals FROM chunks
       ON CONFLICT (account_id, resource, scope, chunk) DO UPDATE SET ids = EXCLUDED.ids, ordinals = EXCLUDED.ordinals
        WHERE c.ids IS DISTINCT FROM EXCLUDED.ids OR c.ordinals IS DISTINCT FROM EXCLUDED.ordinals
       RETURNING 1
     ), dropped AS (
       DELETE FROM record_position_chunks WHERE account_id = $1 AND resource = $2 AND scope = $3 AND chunk >= (SELECT count(*) FROM chunks)
       RETURNING 1
     )
     UPDATE record_position_sets
        SET valid_version = version, live = (SELECT count(*) FROM live), computed_at = now(), chunk_size = ${positionChunk}
      WHERE account_id = $1 AND resource = $2 AND scope = $3
     RETURNING live`,
    params,
  );
  return rows[0]!.live;
}
