// Retention: what the mirror removes, and only that. An unlinked account's mirrored data goes after
// MIRROR_RETENTION_AFTER_UNLINK; the account's row (its status, when it was unlinked and purged), its
// events and its subscriptions stay, so the application still learns what happened. Every statement
// names the account it purges: no other account's row is ever touched.
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
