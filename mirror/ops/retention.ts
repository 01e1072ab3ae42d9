// Retention: what the mirror removes, and only that. An unlinked account's mirrored data goes after
// MIRROR_RETENTION_AFTER_UNLINK; the account's row (its status, when it was unlinked and purged), its
// events and its subscriptions stay, so the application still learns what happened. Every statement
// names the account it purges: no other account's row is ever touched. History that grows with time
// (tombstones, finished passes, applied webhook events, access logs) goes after its own retention,
// in short batches, never before the subscriptions that follow it have passed it.
import { resourceForWebhookType } from '../../lib/resources.ts';
import { accountEventType } from '../control/account-events.ts';
import { inTransaction, type Pool, type PoolClient } from '../db/pool.ts';

/**
 * The account's tables a purge empties, in order: its streams first (with their pages and runs), so
 * that an account linked again while its purge runs starts every stream over with a full pass (which
 * finds what the purge left, and what it removed); then the caches of its lists' order, its records,
 * and the rest.
 */
const accountTables = [
  'stream_pages',
  'sync_runs',
  'streams',
  'record_position_chunks',
  'record_position_sets',
  'records',
  'inbox_events',
  'webhook_registrations',
  'storage_accesses',
  'async_requests',
  'link_sessions',
  'account_tokens',
] as const;

type AccountTable = (typeof accountTables)[number];

/** Rows one delete statement removes at most: a big purge is many short transactions, never one long lock. */
const defaultBatch = 5000;

export type PurgeCounts = Partial<Record<AccountTable, number>>;

/**
 * Deletes an unlinked account's mirrored data, `batch` rows a transaction (as every purge here: a big
 * account is many short transactions, never one long lock or one huge WAL burst), and notes when it
 * is done. Each batch first checks, under a share lock of the account's row, that the account is still
 * unlinked and not purged: linking it again waits for the batch under way, and stops the purge there.
 * Returns null when the account is not unlinked (linked again, before or during the purge) or was
 * purged already. A purge that stopped (a crash) is finished by the next.
 */
export async function purgeUnlinkedAccount(pool: Pool, accountId: string, options: { batch?: number } = {}): Promise<PurgeCounts | null> {
  const batch = options.batch ?? defaultBatch;
  const counts: PurgeCounts = {};
  for (const table of accountTables) {
    const deleteBatch = table === 'records' ? recordsBatch(accountId, batch) : tableBatch(table, accountId, batch);
    for (;;) {
      const done = await whileUnlinked(pool, accountId, deleteBatch);
      if (done === null) return null;
      if (done.deleted > 0) counts[table] = (counts[table] ?? 0) + done.deleted;
      if (!done.more) break;
    }
  }
  const { rowCount } = await pool.query(`UPDATE linked_accounts SET purged_at = now() WHERE id = $1 AND status = 'unlinked' AND purged_at IS NULL`, [
    accountId,
  ]);
  return rowCount === 1 ? counts : null;
}

/** One batch: the rows it deleted, and whether there may be more (it found a full batch to delete). */
type BatchDelete = (client: PoolClient) => Promise<{ deleted: number; more: boolean }>;

/** Runs one batch in a transaction that holds the account unlinked (null, and nothing done, when it is not). */
async function whileUnlinked(pool: Pool, accountId: string, deleteBatch: BatchDelete): Promise<{ deleted: number; more: boolean } | null> {
  return inTransaction(pool, async (client) => {
    const { rows } = await client.query(`SELECT 1 FROM linked_accounts WHERE id = $1 AND status = 'unlinked' AND purged_at IS NULL FOR SHARE`, [accountId]);
    return rows.length === 0 ? null : deleteBatch(client);
  });
}

/**
 * A batch of the account's records, in key order from where the last batch ended (the primary key
 * leads with account_id): no batch walks again over the rows the ones before it deleted.
 */
function recordsBatch(accountId: string, batch: number): BatchDelete {
  let after: [string, string, string] | undefined;
  return async (client) => {
    const { rows } = await client.query<{ found: number; deleted: number; resource: string; scope: string; id: string }>(
      `WITH doomed AS MATERIALIZED (
         SELECT resource, scope, id FROM records
          WHERE account_id = $1 ${after ? 'AND (resource, scope, id) > ($3, $4, $5)' : ''}
          ORDER BY resource, scope, id LIMIT $2),
       gone AS (
         DELETE FROM records r USING doomed d
          WHERE r.account_id = $1 AND r.resource = d.resource AND r.scope = d.scope AND r.id = d.id
         RETURNING 1)
       SELECT (SELECT count(*)::int FROM doomed) AS found, (SELECT count(*)::int FROM gone) AS deleted, l.resource, l.scope, l.id
         FROM (SELECT resource, scope, id FROM doomed ORDER BY resource DESC, scope DESC, id DESC LIMIT 1) l`,
      [accountId, batch, ...(after ?? [])],
    );
    const r = rows[0];
    if (!r) return { deleted: 0, more: false };
    after = [r.resource, r.scope, r.id];
    return { deleted: r.deleted, more: r.found === batch };
  };
}

/** A batch of one of the account's other tables (a stream's pages and runs: through its streams). */
function tableBatch(table: Exclude<AccountTable, 'records'>, accountId: string, batch: number): BatchDelete {
  const where = table === 'stream_pages' || table === 'sync_runs' ? 'stream_id IN (SELECT id FROM streams WHERE account_id = $1)' : 'account_id = $1';
  return async (client) => {
    const deleted = (await client.query(`DELETE FROM ${table} WHERE ctid = ANY(ARRAY(SELECT ctid FROM ${table} WHERE ${where} LIMIT $2))`, [accountId, batch]))
      .rowCount;
    return { deleted: deleted ?? 0, more: deleted === batch };
  };
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

/**
 * The tombstones one batch of their purge takes: an account's and resource's records deleted before $5,
 * mirrored from $3 to before $4, the first $6 of them by mirrored_at. They are read from the index of
 * tombstones only (records_tombstones_idx, partial: `deleted_at IS NOT NULL`), never walking past the
 * live records an index of every record would hold between them.
 */
export const tombstonesBatch = `SELECT account_id, resource, scope, id, mirrored_at FROM records
  WHERE account_id = $1 AND resource = $2 AND mirrored_at >= $3 AND mirrored_at < $4 AND deleted_at IS NOT NULL AND deleted_at < $5
  ORDER BY mirrored_at LIMIT $6`;

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
        `WITH doomed AS (${tombstonesBatch}),
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
  for (const r of rows) if ((await purgeUnlinkedAccount(pool, r.id, { batch: run.batch })) !== null) purged.push(r.id);
  return purged;
}
