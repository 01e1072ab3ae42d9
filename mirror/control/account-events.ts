// An account's events in order (account_events): its credentials refused, linked again, unlinked, a
// pass stalled. The application's account subscriptions follow them with a cursor, as change
// subscriptions follow records; the status page and /metrics count them.
import type { ChangeCursor } from '../reads/changes.ts';
import type { Pool } from '../db/pool.ts';

/** The subscription type that takes an account's events. */
export const accountEventType = 'account';

export const accountEvents = ['account.credentials_refused', 'account.relinked', 'account.unlinked', 'account.stalled'] as const;

interface AccountEvent {
  id: number;
  event: string;
  reason: string | null;
  at: Date;
  cursor: ChangeCursor;
}

/** An account's events of one name after a cursor, oldest first. */
export async function accountEventsSince(pool: Pool, q: { accountId: string; event: string; after: ChangeCursor; limit: number }): Promise<AccountEvent[]> {
  const { rows } = await pool.query<{ id: string; event: string; reason: string | null; at: Date; k: string }>(
    `SELECT id::text, event, reason, at, lpad(id::text, 20, '0') AS k FROM account_events
      WHERE account_id = $1 AND event = $2 AND at >= $3::timestamptz
        AND (date_trunc('milliseconds', at), lpad(id::text, 20, '0')) > ($3::timestamptz, $4::text)
      ORDER BY id LIMIT $5`,
    [q.accountId, q.event, q.after.at, q.after.key, q.limit],
  );
  return rows.map((r) => ({ id: Number(r.id), event: r.event, reason: r.reason, at: r.at, cursor: { at: r.at, key: r.k } }));
}
