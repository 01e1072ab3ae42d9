// Stalled passes, in the stream's row: attempts in a row that left its checkpoint where it was (at
// which generation and page, since when, why), the stall once there were too many of them or they
// went on too long, the stall's backoff, and the account's events about it (`stream.stalled` when it
// stalls, `stream.recovered` when its checkpoint moves again).
import { inTransaction, type Pool, type PoolClient } from '../db/pool.ts';
import type { StreamKey } from './streams.ts';

/** When a stream whose checkpoint does not move is `stalled`, and how a stalled stream backs off. */
export interface StallPolicy {
  /** Attempts in a row at one checkpoint after which the stream is stalled (MIRROR_STALL_ATTEMPTS). */
  attempts: number;
  /** Time at one checkpoint after which the next attempt that does not move it stalls it, whatever the count (MIRROR_STALL_AFTER). */
  afterMs: number;
  /** Wait before a stalled stream is tried again (MIRROR_STALL_BACKOFF); each try that does not move it doubles it... */
  backoffMs: number;
  /** ... up to this (MIRROR_STALL_BACKOFF_MAX). */
  backoffMaxMs: number;
}

export const defaultStallPolicy: Readonly<StallPolicy> = { attempts: 3, afterMs: 15 * 60_000, backoffMs: 5 * 60_000, backoffMaxMs: 6 * 3_600_000 };

/** The events a stream's stall makes (delivered to the application's account subscriptions). */
const stallEvents = { stalled: 'stream.stalled', recovered: 'stream.recovered' } as const;

interface StallState {
  /** The stream is stalled: not tried again before `retryAt`. */
  stalled: boolean;
  /** Attempts in a row that left the checkpoint where it was. */
  attempts: number;
  retryAt: Date | null;
  reason: string | null;
}

/** The stall state of a stream (undefined before its first pass). */
export async function stallState(pool: Pool, key: StreamKey): Promise<StallState | undefined> {
  const { rows } = await pool.query<{ state: string; stall_attempts: number; stalls: number; stall_retry_at: Date | null; stall_reason: string | null }>(
    `SELECT state, stall_attempts, stalls, stall_retry_at, stall_reason FROM streams WHERE account_id = $1 AND resource = $2 AND scope = $3`,
    [key.accountId, key.resource, key.scope],
  );
  const r = rows[0];
  if (!r) return undefined;
  return { stalled: r.state === 'stalled' && r.stalls > 0, attempts: r.stall_attempts, retryAt: r.stall_retry_at, reason: r.stall_reason };
}

interface NoProgressVerdict {
  /** The stream is stalled now (just stalled, or stalled again after a try). */
  stalled: boolean;
  /** Attempts in a row at this checkpoint, this one included. */
  attempts: number;
  /** The checkpoint page the attempts are stuck at. */
  page: number;
  reason: string;
  retryAt: Date | null;
}

interface StallRow {
  id: number;
  generation: number;
  state: string;
  page: number | null;
  stall_attempts: number;
  stall_generation: number | null;
  stall_page: number | null;
  stall_since: Date | null;
  stalls: number;
  now: Date;
}

/**
 * Records an attempt that ended without moving the stream's checkpoint. The stream is stalled when it
 * was stalled at this checkpoint already (a try after the backoff: the backoff doubles), or when the
 * attempts at this checkpoint reach the policy's count or its time. A checkpoint that moved since the
 * last such attempt starts the count over (and ends a stall: `stream.recovered`). `describe` words
 * the reason from the attempts so far and the page.
 */
export async function noteNoProgress(
  pool: Pool,
  key: StreamKey,
  o: { policy: StallPolicy; describe: (attempts: number, page: number) => string },
): Promise<NoProgressVerdict> {
  return inTransaction(pool, async (client) => {
    const { rows } = await client.query<StallRow>(
      `SELECT id, generation, state, (checkpoint->>'page')::int AS page, stall_attempts, stall_generation, stall_page, stall_since, stalls, now() AS now
         FROM streams WHERE account_id = $1 AND resource = $2 AND scope = $3 FOR UPDATE`,
      [key.accountId, key.resource, key.scope],
    );
    const r = rows[0];
    const page = r?.page ?? 1;
    if (!r) return { stalled: false, attempts: 1, page, reason: o.describe(1, page), retryAt: null };
    const same = r.stall_attempts > 0 && r.stall_generation === r.generation && r.stall_page === page;
    if (!same && r.stalls > 0) await addEvent(client, key, stallEvents.recovered, `the checkpoint moved (page ${page} now); was: stalled`);
    const attempts = same ? r.stall_attempts + 1 : 1;
    const since = same && r.stall_since ? r.stall_since : r.now;
    const wasStalled = same && r.stalls > 0 && r.state === 'stalled';
    const stalled = wasStalled || attempts >= o.policy.attempts || r.now.getTime() - since.getTime() >= o.policy.afterMs;
    const reason = o.describe(attempts, page);
    if (!stalled) {
      await client.query(
        `UPDATE streams SET stall_attempts = $2, stall_generation = $3, stall_page = $4, stall_since = $5, stall_reason = $6, stalls = 0, stall_retry_at = NULL,
                state = CASE WHEN state = 'stalled' THEN 'syncing' ELSE state END, last_error = $6, updated_at = now()
          WHERE id = $1`,
        [r.id, attempts, r.generation, page, since, reason],
      );
      return { stalled, attempts, page, reason, retryAt: null };
    }
    const stalls = wasStalled ? r.stalls + 1 : 1;
    const retryAt = new Date(r.now.getTime() + Math.min(o.policy.backoffMaxMs, o.policy.backoffMs * 2 ** (stalls - 1)));
    await client.query(
      `UPDATE streams SET stall_attempts = $2, stall_generation = $3, stall_page = $4, stall_since = $5, stall_reason = $6, stalls = $7, stall_retry_at = $8,
              state = 'stalled', last_error = $9, updated_at = now()
        WHERE id = $1`,
      [r.id, attempts, r.generation, page, since, reason, stalls, retryAt, `stalled: ${reason}; tried again after ${retryAt.toISOString()}`],
    );
    if (!wasStalled) await addEvent(client, key, stallEvents.stalled, reason);
    return { stalled, attempts, page, reason, retryAt };
  });
}

/**
 * After an attempt that succeeded: if the stream's checkpoint moved since its last attempt that did
 * not move it (or its pass is done), the count starts over, and a stalled stream is stalled no more
 * (`stream.recovered`). Returns whether it was stalled.
 */
export async function clearStall(pool: Pool, key: StreamKey): Promise<boolean> {
  return inTransaction(pool, async (client) => {
    const { rows } = await client.query<{ stalls: number; page: number | null }>(
      `WITH old AS (
         SELECT id, stalls FROM streams WHERE account_id = $1 AND resource = $2 AND scope = $3 AND (stall_attempts > 0 OR stalls > 0) FOR UPDATE
       )
       UPDATE streams s SET stall_attempts = 0, stall_generation = NULL, stall_page = NULL, stall_since = NULL, stall_reason = NULL, stalls = 0,
              stall_retry_at = NULL, state = CASE WHEN s.state = 'stalled' THEN 'syncing' ELSE s.state END,
              last_error = CASE WHEN s.state = 'stalled' OR s.last_error = s.stall_reason THEN NULL ELSE s.last_error END, updated_at = now()
         FROM old
        WHERE s.id = old.id
          AND (s.generation IS DISTINCT FROM s.stall_generation OR (s.checkpoint->>'page')::int IS DISTINCT FROM s.stall_page
               OR coalesce((s.checkpoint->>'done')::boolean, false))
       RETURNING old.stalls, (s.checkpoint->>'page')::int AS page`,
      [key.accountId, key.resource, key.scope],
    );
    const r = rows[0];
    if (!r || r.stalls === 0) return false;
    await addEvent(client, key, stallEvents.recovered, `the checkpoint moved (page ${r.page ?? '?'} now); was: stalled`);
    return true;
  });
}

async function addEvent(client: Pick<PoolClient, 'query'>, key: StreamKey, event: string, reason: string): Promise<void> {
  await client.query(`INSERT INTO account_events (account_id, event, reason, resource, scope) VALUES ($1, $2, $3, $4, $5)`, [
    key.accountId,
    event,
    `${key.resource}${key.scope ? ` (${key.scope})` : ''}: ${reason}`,
    key.resource,
    key.scope,
  ]);
}

/**
 * Ends the backoff of an account's stalled streams (of one resource and scope, when named): the next
 * pass tries them at once. For a pass an operator starts, e.g. once the upstream is fixed. Returns how many.
 */
export async function retryStalledNow(pool: Pool, q: { accountId: string; resource?: string | undefined; scope?: string | undefined }): Promise<number> {
  const { rowCount } = await pool.query(
    `UPDATE streams SET stall_retry_at = now(), updated_at = now()
      WHERE account_id = $1 AND state = 'stalled' AND ($2::text IS NULL OR resource = $2) AND ($3::text IS NULL OR scope = $3 OR scope LIKE $3 || '/%')`,
    [q.accountId, q.resource ?? null, q.scope ?? null],
  );
  return rowCount ?? 0;
}
