// An account's events in order (account_events): its credentials refused, linked again, unlinked, a
// stream's pass stalled or moving again (mirror/streams/stalls.ts). The application's account subscriptions follow them with a cursor, as change
// subscriptions follow records; the status page and /metrics count them.
import type { ChangeCursor } from '../reads/changes.ts';
import type { Pool } from '../db/pool.ts';

/** The subscription type that takes an account's events. */
export const accountEventType = 'account';

export const accountEvents = ['account.credentials_refused', 'account.relinked', 'account.unlinked', 'stream.stalled', 'stream.recovered'] as const;

interface AccountEvent {
  id: number;
  event: string;
  reason: string | null;
  at: Date;
  cursor: ChangeCursor;
  /** The stream an event is about (`stream.*`). */
  stream?: { resource: string; scope: string };
}

/** An account's events of one name after a cursor, oldest first. */
export async function accountEventsSince(pool: Pool, q: { accountId: string; event: string; after: ChangeCursor; limit: number }): Promise<AccountEvent[]> {
  const { rows } = await pool.query<{ id: string; event: string; reason: string | null; at: Date; k: string; resource: string | null; scope: string | null }>(
    `SELECT id::text, event, reason, at, lpad(id::text, 20, '0') AS k, resource, scope FROM account_events
      WHERE account_id = $1 AND event = $2 AND at >= $3::timestamptz
        AND (date_trunc('milliseconds', at), lpad(id::text, 20, '0')) > ($3::timestamptz, $4::text)
      ORDER BY id LIMIT $5`,
    [q.accountId, q.event, q.after.at, q.after.key, q.limit],
  );
  return rows.map((r) => ({
    id: Number(r.id),
    event: r.event,
    reason: r.reason,
    at: r.at,
    cursor: { at: r.at, key: r.k },
    ...(r.resource !== null ? { stream: { resource: r.resource, scope: r.scope ?? '' } } : {}),
  }));
}
