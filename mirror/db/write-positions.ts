// The primary's WAL position after an account's last write through the mirror, kept in a small table
// on the primary so every API process sees it (read replicas with read-your-writes, read-router.ts).
// A position is a byte count from WAL position 0/0: a bigint compares the way pg_lsn does.
import type pg from 'pg';
import type { Pool } from './pool.ts';

/**
 * How long an API process uses its snapshot of the accounts' positions (read-router.ts): a position is
 * seen by every read that arrives this long after it was recorded, or later.
 */
export const positionsSnapshotMs = 50;

/** A query on one server only (a standby's own figures must never be answered by another server). */
export type ServerQuery = <R extends pg.QueryResultRow>(text: string) => Promise<pg.QueryResult<R>>;

/**
 * Records that `accountId` wrote: after the write committed, the primary's current WAL position (at or
 * past the write's commit record) becomes the account's position, unless a later one is there already.
 * Returns the account's position.
 */
export async function recordWritePosition(pool: Pool, accountId: string): Promise<number> {
  const { rows } = await pool.query<{ lsn: number }>(
    `INSERT INTO account_write_positions AS p (account_id, lsn, updated_at)
     VALUES ($1, (pg_current_wal_lsn() - '0/0'::pg_lsn)::bigint, now())
     ON CONFLICT (account_id) DO UPDATE SET lsn = greatest(p.lsn, EXCLUDED.lsn), updated_at = now()
     RETURNING lsn`,
    [accountId],
  );
  return rows[0]!.lsn;
}

/** Accounts whose position is past `floor` (what every replica had replayed when last measured), with it. */
export async function positionsAbove(pool: Pool, floor: number): Promise<Map<string, number>> {
  const { rows } = await pool.query<{ account_id: string; lsn: number }>('SELECT account_id, lsn FROM account_write_positions WHERE lsn > $1', [floor]);
  return new Map(rows.map((r) => [r.account_id, r.lsn]));
}

/** The primary's current WAL position. */
export async function primaryPosition(pool: Pool): Promise<number> {
  const { rows } = await pool.query<{ lsn: number }>(`SELECT (pg_current_wal_lsn() - '0/0'::pg_lsn)::bigint AS lsn`);
  return rows[0]!.lsn;
}

interface ReplayState {
  /** What the standby has replayed (0 when it is not a standby, or has replayed nothing). */
  replayed: number;
  /** Milliseconds since the primary committed the last transaction the standby replayed (null: none yet). */
  sinceLastCommitMs: number | null;
  standby: boolean;
}

/** Where a standby's replay stands. */
export async function replayState(query: ServerQuery): Promise<ReplayState> {
  const { rows } = await query<{ replayed: number | null; since: number | null; standby: boolean }>(
    `SELECT (pg_last_wal_replay_lsn() - '0/0'::pg_lsn)::bigint AS replayed,
            (extract(epoch FROM clock_timestamp() - pg_last_xact_replay_timestamp()) * 1000)::float8 AS since,
            pg_is_in_recovery() AS standby`,
  );
  const r = rows[0]!;
  return { replayed: r.replayed ?? 0, sinceLastCommitMs: r.since, standby: r.standby };
}

/** What a standby has replayed (a cheap poll while a read waits for it). */
export async function replayedPosition(query: ServerQuery): Promise<number> {
  const { rows } = await query<{ replayed: number | null }>(`SELECT (pg_last_wal_replay_lsn() - '0/0'::pg_lsn)::bigint AS replayed`);
  return rows[0]!.replayed ?? 0;
}
