// Retention: what the mirror removes, and only that. An unlinked account's mirrored data goes after
// MIRROR_RETENTION_AFTER_UNLINK; the account's row (its status, when it was unlinked and purged), its
// events and its subscriptions stay, so the application still learns what happened. Every statement
// names the account it purges: no other account's row is ever touched. History that grows with time
// (tombstones, finished passes, applied webhook events, access logs) goes after its own retention,
// in short batches, never before the subscriptions that follow it have passed it.
import { resourceForWebhookType } from '../../lib/resources.ts';
import { accountEventType } from '../control/account-events.ts';
import type { Pool } from '../db/pool.ts';

/** The account's tables a purge empties, children first (streams' runs and pages go with their streams). */
const accountTables = [
  'records',
  'record_position_chunks',
  'record_position_sets',
  'stream_pages',
  'sync_runs',
  'streams',
  'inbox_events',
  'webhook_registrations',
  'storage_accesses',
  'async_requests',
  'link_sessions',
  'account_tokens',
] as const;

export type PurgeCounts = Partial<Record<(typeof accountTables)[number], number>>;

/**
 * Deletes an unlinked account's mirrored data in one transaction and notes when; does nothing (null)
 * when the account is not unlinked any more (linked again meanwhile) or was purged already.
 */
export async function purgeUnlinkedAccount(pool: Pool, accountId: string): Promise<PurgeCounts | null> {
  const client = await pool.connect();
  try {
    await client.query('BEGIN');
    const { rows } = await client.query<{ id: string }>(
      `SELECT id FROM linked_accounts WHERE id = $1 AND status = 'unlinked' AND purged_at IS NULL FOR UPDATE`,
      [accountId],
    );
    if (rows.length === 0) {
      await client.query('ROLLBACK');
      return null;
    }
    const counts: PurgeCounts = {};
    for (const table of accountTables) {
      const sql =
        table === 'stream_pages' || table === 'sync_runs'
          ? `DELETE FROM ${table} WHERE stream_id IN (SELECT id FROM streams WHERE account_id = $1)`
          : `DELETE FROM ${table} WHERE account_id = $1`;
      const n = (await client.query(sql, [accountId])).rowCount ?? 0;
      if (n > 0) counts[table] = n;
    }
    await client.query(`UPDATE linked_accounts SET purged_at = now() WHERE id = $1`, [accountId]);
    await client.query('COMMIT');
    return counts;
  } catch (error) {
    await client.query('ROLLBACK').catch(() => undefined);
    throw error;
  } finally {
    client.release();
  }
}

/** How long each kind of history is kept (MIRROR_TOMBSTONE_RETENTION, MIRROR_RUN_RETENTION, MIRROR_LOG_RETENTION, MIRROR_RETENTION_AFTER_UNLINK). */
export interface RetentionPolicy {
  tombstonesMs: number;
  runsMs: number;
  logsMs: number;
  afterUnlinkMs: number;
}

/** The retention settings, as configured. */
export function retentionPolicy(config: {
  MIRROR_TOMBSTONE_RETENTION: number;
  MIRROR_RUN_RETENTION: number;
  MIRROR_LOG_RETENTION: number;
  MIRROR_RETENTION_AFTER_UNLINK: number;
}): RetentionPolicy {
  return {
    tombstonesMs: config.MIRROR_TOMBSTONE_RETENTION,
    runsMs: config.MIRROR_RUN_RETENTION,
    logsMs: config.MIRROR_LOG_RETENTION,
    afterUnlinkMs: config.MIRROR_RETENTION_AFTER_UNLINK,
  };
}

/** What a purge removed, or (a dry run) would remove: rows per kind, and the unlinked accounts purged. */
export interface ExpiredCounts {
  tombstones: number;
  syncRuns: number;
  inboxEvents: number;
  storageAccesses: number;
  asyncRequests: number;
  unlinkedAccounts: string[];
}

/** Rows one delete statement removes at most: a big purge is many short transactions, never one long lock. */
const defaultBatch = 5000;

/**
 * Removes history past its retention, in batches: tombstones of deleted records, finished passes,
 * applied webhook events, the storage access log, expired async requests, and the mirrored data of
 * accounts unlinked longer than MIRROR_RETENTION_AFTER_UNLINK whose purge has not run. What a
 * subscription has not yet delivered stays whatever its age: a tombstone at or after the cursor of a
 * subscription to its resource's changes, a pass at or after a `SYNCED` subscription's cursor. Live
 * records, running passes, each stream's latest pass and pending events are never touched.
 * `dryRun` counts what would go and removes nothing.
 */
export async function purgeExpired(
  pool: Pool,
  policy: RetentionPolicy,
  options: { dryRun?: boolean; batch?: number; now?: Date } = {},
): Promise<ExpiredCounts> {
  const now = options.now ?? new Date();
  const before = (ms: number) => new Date(now.getTime() - ms);
  const run = { dryRun: options.dryRun ?? false, batch: options.batch ?? defaultBatch };
  const cursors = await subscriptionCursors(pool);
  return {
    tombstones: await purgeTombstones(pool, before(policy.tombstonesMs), cursors.changes, run),
    syncRuns: await purgeRuns(pool, before(policy.runsMs), cursors.synced, run),
    inboxEvents: await purgeById(pool, 'inbox_events', 'applied_at IS NOT NULL AND applied_at < $1', before(policy.logsMs), run),
    storageAccesses: await purgeById(pool, 'storage_accesses', 'at < $1', before(policy.logsMs), run),
    asyncRequests: await purgeAsyncRequests(pool, before(policy.logsMs), run),
    unlinkedAccounts: await purgeUnlinkedPastRetention(pool, before(policy.afterUnlinkMs), run),
  };
}

interface PurgeRun {
  dryRun: boolean;
  batch: number;
}

/** Per account and resource, the oldest cursor of its subscriptions: to record changes, and to completed passes (`SYNCED`). */
async function subscriptionCursors(pool: Pool): Promise<{ changes: Map<string, Date>; synced: Map<string, Date> }> {
  const { rows } = await pool.query<{ account_id: string; type: string; event: string; cursor_at: Date }>(
    `SELECT account_id, type, event, cursor_at FROM subscriptions WHERE type <> $1`,
    [accountEventType],
  );
  const changes = new Map<string, Date>();
  const synced = new Map<string, Date>();
  for (const s of rows) {
    const resource = resourceForWebhookType(s.type)?.name;
    if (!resource) continue;
    const into = s.event === 'SYNCED' ? synced : changes;
    const key = `${s.account_id}/${resource}`;
    const held = into.get(key);
    if (!held || s.cursor_at < held) into.set(key, s.cursor_at);
  }
  return { changes, synced };
}

async function purgeTombstones(pool: Pool, cutoff: Date, cursors: Map<string, Date>, run: PurgeRun): Promise<number> {
  // Every account and resource that may hold records: those of its streams.
  const { rows: pairs } = await pool.query<{ account_id: string; resource: string }>(`SELECT DISTINCT account_id, resource FROM streams ORDER BY 1, 2`);
  let total = 0;
  for (const p of pairs) {
    const held = cursors.get(`${p.account_id}/${p.resource}`);
    // A tombstone at or after a subscriber's cursor is still to be delivered (the feed compares on the millisecond).
    const upTo = held && held < cutoff ? new Date(held.getTime()) : cutoff;
    if (run.dryRun) {
      const { rows } = await pool.query<{ n: number }>(
        `SELECT count(*)::int AS n FROM records WHERE account_id = $1 AND resource = $2 AND mirrored_at < $3 AND deleted_at IS NOT NULL AND deleted_at < $4`,
        [p.account_id, p.resource, upTo, cutoff],
      );
      total += rows[0]!.n;
      continue;
    }
    // In order of mirrored_at (an index of records), each batch starting where the last ended, so no batch scans again what the one before it read.
    let from = new Date(0);
    for (;;) {
      const { rows } = await pool.query<{ n: number; last: Date | null }>(
        `WITH doomed AS (
           SELECT account_id, resource, scope, id, mirrored_at FROM records
            WHERE account_id = $1 AND resource = $2 AND mirrored_at >= $3 AND mirrored_at < $4 AND deleted_at IS NOT NULL AND deleted_at < $5
            ORDER BY mirrored_at LIMIT $6),
         gone AS (
           DELETE FROM records r USING doomed d
            WHERE r.account_id = d.account_id AND r.resource = d.resource AND r.scope = d.scope AND r.id = d.id AND r.deleted_at IS NOT NULL
           RETURNING d.mirrored_at)
         SELECT count(*)::int AS n, max(mirrored_at) AS last FROM gone`,
        [p.account_id, p.resource, from, upTo, cutoff, run.batch],
      );
      const { n, last } = rows[0]!;
      total += n;
      if (n < run.batch || !last) break;
      from = last;
    }
  }
  return total;
}

async function purgeRuns(pool: Pool, cutoff: Date, cursors: Map<string, Date>, run: PurgeRun): Promise<number> {
  // A finished pass older than the cutoff, not its stream's latest, and passed by every `SYNCED` subscription to its resource.
  const keys = [...cursors.keys()];
  const params = [cutoff, keys.map((k) => k.split('/')[0]!), keys.map((k) => k.slice(k.indexOf('/') + 1)), [...cursors.values()]];
  const doomed = `SELECT r.id FROM sync_runs r JOIN streams s ON s.id = r.stream_id
     WHERE r.finished_at < $1 AND r.status <> 'running' AND r.generation < s.generation
       AND NOT EXISTS (SELECT 1 FROM unnest($2::uuid[], $3::text[], $4::timestamptz[]) AS c(account_id, resource, at)
                        WHERE c.account_id = s.account_id AND c.resource = s.resource AND date_trunc('milliseconds', r.finished_at) >= c.at)`;
  if (run.dryRun) return (await pool.query<{ n: number }>(`SELECT count(*)::int AS n FROM (${doomed}) d`, params)).rows[0]!.n;
  let total = 0;
  let after = 0n;
  for (;;) {
    const { rows } = await pool.query<{ n: number; last: string | null }>(
      `WITH gone AS (DELETE FROM sync_runs WHERE id IN (${doomed} AND r.id > $5 ORDER BY r.id LIMIT $6) RETURNING id)
       SELECT count(*)::int AS n, max(id)::text AS last FROM gone`,
      [...params, after.toString(), run.batch],
    );
    const { n, last } = rows[0]!;
    total += n;
    if (n < run.batch || last === null) break;
    after = BigInt(last);
  }
  return total;
}

/** Deletes a log table's rows matching `where` ($1: the cutoff) in batches of ids. */
async function purgeById(pool: Pool, table: 'inbox_events' | 'storage_accesses', where: string, cutoff: Date, run: PurgeRun): Promise<number> {
  if (run.dryRun) return (await pool.query<{ n: number }>(`SELECT count(*)::int AS n FROM ${table} WHERE ${where}`, [cutoff])).rows[0]!.n;
  let total = 0;
  let after = 0n;
  for (;;) {
    const { rows } = await pool.query<{ n: number; last: string | null }>(
      `WITH gone AS (DELETE FROM ${table} WHERE id IN (SELECT id FROM ${table} WHERE ${where} AND id > $2 ORDER BY id LIMIT $3) RETURNING id)
       SELECT count(*)::int AS n, max(id)::text AS last FROM gone`,
      [cutoff, after.toString(), run.batch],
    );
    const { n, last } = rows[0]!;
    total += n;
    if (n < run.batch || last === null) break;
    after = BigInt(last);
  }
  return total;
}

/** Async requests that expired before the cutoff (an expired one is answered 404, saying when it expired, until then). */
async function purgeAsyncRequests(pool: Pool, cutoff: Date, run: PurgeRun): Promise<number> {
  if (run.dryRun) return (await pool.query<{ n: number }>(`SELECT count(*)::int AS n FROM async_requests WHERE expires_at < $1`, [cutoff])).rows[0]!.n;
  let total = 0;
  for (;;) {
    const n =
      (await pool.query(`DELETE FROM async_requests WHERE id IN (SELECT id FROM async_requests WHERE expires_at < $1 LIMIT $2)`, [cutoff, run.batch]))
        .rowCount ?? 0;
    total += n;
    if (n < run.batch) break;
  }
  return total;
}

/** Accounts unlinked before the cutoff and not purged yet (their purge workflow lost, or never started): purged now. */
async function purgeUnlinkedPastRetention(pool: Pool, cutoff: Date, run: PurgeRun): Promise<string[]> {
  const { rows } = await pool.query<{ id: string }>(
    `SELECT id FROM linked_accounts WHERE status = 'unlinked' AND purged_at IS NULL AND coalesce(unlinked_at, status_changed_at, updated_at) <= $1 ORDER BY id`,
    [cutoff],
  );
  if (run.dryRun) return rows.map((r) => r.id);
  const purged: string[] = [];
  for (const r of rows) if ((await purgeUnlinkedAccount(pool, r.id)) !== null) purged.push(r.id);
  return purged;
}
