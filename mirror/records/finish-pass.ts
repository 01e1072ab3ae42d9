// The end of a pass: a full pass marks what it did not see as deleted, the stream's positions are
// computed, and the pass is recorded as done; after a full pass of the projects, the records of
// projects it no longer found are retired.
import { allProjectsScope } from '../../lib/resources.ts';
import { inTransaction, type Pool, type PoolClient } from '../db/pool.ts';
import { FirstLoadStatistics } from '../streams/first-load-statistics.ts';
import { computePositions, invalidatePositions } from '../reads/record-positions.ts';
import { recordScopeSql, StalePassError, type Checkpoint, type StreamKey } from '../streams/streams.ts';
import { observeChangesSql } from '../streams/freshness.ts';

/**
 * Completes a pass. A full pass marks every live record it did not see as deleted: safe only here,
 * after every page of the pass was committed. Returns how many were marked. `statistics`: the
 * process's first statistics of partitions (else the partition is asked about afresh).
 */
export async function finishPass(
  pool: Pool,
  key: StreamKey,
  pass: { streamId: number; generation: number },
  checkpoint: Checkpoint,
  statistics: FirstLoadStatistics = new FirstLoadStatistics(pool),
): Promise<number> {
  const deleted = await finishPassInTransaction(pool, key, pass, checkpoint);
  // The partition's first statistics, if it has none yet (first-load-statistics.ts): not waited for,
  // the pass is done. Only a pass that inserted records can be a first load (a pass of an empty or
  // unchanged list asks nothing).
  if (checkpoint.counts.inserted > 0) void statistics.analyze(key.accountId, key.resource);
  return deleted;
}

function finishPassInTransaction(pool: Pool, key: StreamKey, pass: PassRef, checkpoint: Checkpoint): Promise<number> {
  return inTransaction(pool, async (client) => {
    const deleted = checkpoint.mode === 'full' && !checkpoint.startedEmpty ? await markUnseenDeleted(client, key, pass) : 0;
    await positionsAfterPass(client, key, pass.streamId, checkpoint.mode);
    if (checkpoint.mode === 'full') {
      // This pass's pages are the next pass's reference; older passes' are not needed any more.
      await client.query('DELETE FROM stream_pages WHERE stream_id = $1 AND generation < $2', [pass.streamId, pass.generation]);
    }
    await recordPassDone(client, key, pass, checkpoint, deleted);
    return deleted;
  });
}

type PassRef = { streamId: number; generation: number };

/**
 * A full pass's end: every live record of the stream it did not see is marked deleted, and the
 * positions of the scopes it marked records of are out of date. Returns how many were marked.
 */
async function markUnseenDeleted(client: PoolClient, key: StreamKey, pass: PassRef): Promise<number> {
  // A hash anti-join, whatever the statistics say: right after a first load (before autovacuum
  // has analyzed either table) the planner takes both sides for tiny and picks a nested loop
  // that is quadratic in the stream's size (minutes at 50k records).
  await client.query('SET LOCAL enable_nestloop = off');
  // Records written since the pass began (by events) are the upstream's too, seen or not.
  // A list across projects saw its records by project and id (`crossProjectKey`).
  const seenKey = key.scope === allProjectsScope ? `r.scope || '|' || r.id` : 'r.id';
  const res = await client.query<{ scope: string; n: number }>(
    `WITH seen AS MATERIALIZED (
       SELECT DISTINCT unnest(ids) AS id FROM stream_pages WHERE stream_id = $4 AND generation = $5
     ), marked AS (
     UPDATE records r SET deleted_at = now(), mirrored_at = now()
      WHERE r.account_id = $1 AND r.resource = $2 AND ${recordScopeSql(key.scope, 'r.scope', '$3')} AND r.deleted_at IS NULL
        AND r.mirrored_at < (SELECT pass_started_at FROM streams WHERE id = $4)
        AND NOT EXISTS (SELECT 1 FROM seen s WHERE s.id = ${seenKey})
     RETURNING r.scope
     )
     SELECT scope, count(*)::int AS n FROM marked GROUP BY scope`,
    [key.accountId, key.resource, key.scope, pass.streamId, pass.generation],
  );
  // The scopes it marked records of have positions no more (this stream's own are computed after).
  await invalidatePositions(
    client,
    key.accountId,
    res.rows.map((r) => ({ resource: key.resource, scope: r.scope })),
  );
  return res.rows.reduce((sum, r) => sum + r.n, 0);
}

/**
 * The stream's dense positions, for pages at any offset (record-positions.ts): computed at the pass's
 * end, where its records are as complete as a pass leaves them, before the stream's row is locked (by
 * recordPassDone) so the computation (~1 s at 200k records on a loaded machine) does not hold it. A list
 * across projects' own projects' positions are computed by their own passes. Its positions across
 * projects (the upstream's order of `Project-Id: *` reads) only after a full pass that no write outside it
 * overlapped: a record an event inserted meanwhile has a place in that order the mirror does not know.
 */
async function positionsAfterPass(client: PoolClient, key: StreamKey, streamId: number, mode: Checkpoint['mode']): Promise<void> {
  if (key.scope !== allProjectsScope) await computePositions(client, key);
  else if (mode === 'full' && (await untouchedSincePassBegan(client, key, streamId))) await computePositions(client, key);
}

/** The stream synced with its pass's counts (or StalePassError where another pass took it over), and its run succeeded. */
async function recordPassDone(client: PoolClient, key: StreamKey, pass: PassRef, checkpoint: Checkpoint, deleted: number): Promise<void> {
  const c = checkpoint.counts;
  const done: Checkpoint = { ...checkpoint, done: true, counts: { ...c, deleted } };
  // An incremental pass's changes and the time since the pass before go into the list's change
  // history (the freshness scheduler learns its rate from them: mirror/streams/freshness-plan.ts); a
  // full pass (a first load, a resync) says nothing of how often the list changes.
  const { rowCount } = await client.query(
    `UPDATE streams SET state = 'synced', checkpoint = $3, last_fresh_at = now(), last_pass_started_at = pass_started_at,
            last_error = NULL, updated_at = now(), ${observeChangesSql('$5', '$6')}
      WHERE id = $1 AND generation = $2 AND checkpoint->>'passKey' = $4`,
    [pass.streamId, pass.generation, JSON.stringify(done), checkpoint.passKey, checkpoint.mode === 'incremental', c.inserted + c.updated + deleted],
  );
  if (rowCount !== 1) throw StalePassError.of(pass.streamId);
  if (key.scope === allProjectsScope) await coverProjects(client, key, pass.streamId);
  await client.query(
    `UPDATE sync_runs SET status = 'succeeded', finished_at = now(), pages = (SELECT pages FROM streams WHERE id = $1),
            inserted = $3, updated = $4, unchanged = $5, deleted = $6
      WHERE stream_id = $1 AND generation = $2`,
    [pass.streamId, pass.generation, c.inserted, c.updated, c.unchanged, deleted],
  );
}

/**
 * Whether no project's records of the resource were written outside a pass since the pass across
 * projects `streamId` began (writes outside a pass note their project's stream as touched).
 */
async function untouchedSincePassBegan(client: Pick<PoolClient, 'query'>, key: StreamKey, streamId: number): Promise<boolean> {
  const { rows } = await client.query(
    `SELECT 1 FROM streams p, streams s
      WHERE s.id = $3 AND p.account_id = $1 AND p.resource = $2 AND p.scope LIKE 'project=%' AND p.id <> s.id
        AND p.touched_at >= s.pass_started_at
      LIMIT 1`,
    [key.accountId, key.resource, streamId],
  );
  return rows.length === 0;
}

/**
 * A pass across projects is each live project's pass too: their streams (per project, as reads and
 * the status page know them) are as fresh as it, and as far along for their next incremental pass.
 * Their stored pages are marked touched, so a later per-project pass checks them record by record
 * (this pass rewrote their records without them).
 */
async function coverProjects(client: Pick<PoolClient, 'query'>, key: StreamKey, streamId: number): Promise<void> {
  await client.query(
    `INSERT INTO streams (account_id, resource, scope, state, last_fresh_at, last_pass_started_at, touched_at, updated_at)
     SELECT $1, $2, 'project=' || p.id, 'synced', now(), s.pass_started_at, now(), now()
       FROM records p, streams s
      WHERE p.account_id = $1 AND p.resource = 'projects' AND p.scope = '' AND p.deleted_at IS NULL AND s.id = $3
     ON CONFLICT (account_id, resource, scope) DO UPDATE
        SET state = 'synced', last_fresh_at = now(), last_pass_started_at = EXCLUDED.last_pass_started_at, last_error = NULL,
            touched_at = now(), updated_at = now()
      WHERE streams.state <> 'syncing'`,
    [key.accountId, key.resource, streamId],
  );
}

/**
 * After a complete full pass of an account's projects (the one of pass `passKey`): every record in the
 * scope of a project that pass did not find (`project=<id>`, and its children's `project=<id>/...`)
 * is marked deleted, as a full pass marks its own absentees. Nothing when that pass did not complete.
 * Returns how many were marked.
 */
export async function retireRemovedProjects(pool: Pool, accountId: string, passKey: string): Promise<number> {
  return inTransaction(pool, async (client) => {
    const { rows } = await client.query<{ started: Date }>(
      `SELECT pass_started_at AS started FROM streams
        WHERE account_id = $1 AND resource = 'projects' AND scope = '' AND mode = 'full' AND state = 'synced'
          AND checkpoint->>'passKey' = $2 AND (checkpoint->>'done')::boolean AND pass_started_at IS NOT NULL`,
      [accountId, passKey],
    );
    if (!rows[0]) return 0;
    // Records written since the projects' pass began (an event of a project created meanwhile) stay.
    const res = await client.query<{ resource: string; scope: string; n: number }>(
      `WITH marked AS (
         UPDATE records r SET deleted_at = now(), mirrored_at = now()
          WHERE r.account_id = $1 AND r.resource <> 'projects' AND r.scope LIKE 'project=%' AND r.deleted_at IS NULL
            AND r.mirrored_at < $2
            AND NOT EXISTS (SELECT 1 FROM records p WHERE p.account_id = $1 AND p.resource = 'projects' AND p.scope = ''
                               AND p.deleted_at IS NULL AND p.id = split_part(substr(r.scope, 9), '/', 1))
         RETURNING r.resource, r.scope
       )
       SELECT resource, scope, count(*)::int AS n FROM marked GROUP BY resource, scope`,
      [accountId, rows[0].started],
    );
    await invalidatePositions(client, accountId, res.rows);
    return res.rows.reduce((sum, r) => sum + r.n, 0);
  });
}
