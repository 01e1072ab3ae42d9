// When each account was last used through the mirror's API, and which accounts are idle: unused for
// MIRROR_IDLE_AFTER, their schedules slowed until their next use wakes them.
import type { Pool } from '../db/pool.ts';

/**
 * Notes that the account was used now; returns since when it was idle (null: it was not), so the
 * caller wakes it. Waking is done when `clearIdle` runs: until then the account stays idle, and the
 * next use tries again.
 */
export async function recordAccountUse(pool: Pool, accountId: string): Promise<{ idleSince: string | null }> {
  // As text: Postgres keeps microseconds, which a JavaScript Date would lose, and `clearIdle` compares it exactly.
  const { rows } = await pool.query<{ idle_since: string | null }>(`UPDATE linked_accounts SET last_used_at = now() WHERE id = $1 RETURNING idle_since::text`, [
    accountId,
  ]);
  return { idleSince: rows[0]?.idle_since ?? null };
}

/** The account is awake again (its schedules at the usual cadence): no longer idle, unless it went idle anew since `since`. */
export async function clearIdle(pool: Pool, accountId: string, since: string): Promise<void> {
  await pool.query(`UPDATE linked_accounts SET idle_since = NULL WHERE id = $1 AND idle_since = $2::timestamptz`, [accountId, since]);
}

/** Linked accounts not idle yet that nobody used for `afterMs` (never used: since they were linked). */
export async function idleCandidates(pool: Pool, afterMs: number): Promise<string[]> {
  const { rows } = await pool.query<{ id: string }>(
    `SELECT id FROM linked_accounts
      WHERE status = 'linked' AND idle_since IS NULL AND coalesce(last_used_at, created_at) < now() - make_interval(secs => $1)
      ORDER BY id`,
    [afterMs / 1000],
  );
  return rows.map((r) => r.id);
}

/** Marks the account idle if it still is unused for `afterMs` (its schedules were slowed); false when it was used meanwhile. */
export async function markIdle(pool: Pool, accountId: string, afterMs: number): Promise<boolean> {
  const { rowCount } = await pool.query(
    `UPDATE linked_accounts SET idle_since = now()
      WHERE id = $1 AND status = 'linked' AND idle_since IS NULL AND coalesce(last_used_at, created_at) < now() - make_interval(secs => $2)`,
    [accountId, afterMs / 1000],
  );
  return (rowCount ?? 0) > 0;
}
