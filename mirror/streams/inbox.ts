// The inbox of upstream webhook events: stored once (deduplicated by content), applied in batches
// by the account's change workflow, each marked with its outcome.
import { createHash } from 'node:crypto';
import type { Pool } from '../db/pool.ts';

interface InboundEvent {
  accountId: string;
  registrationId: string | null;
  event: string;
  type: string;
  target: string;
  projectId: string | null;
  body: unknown;
}

/** Identity of a delivery: the same event delivered twice has the same key. */
function dedupeKey(body: unknown): string {
  return createHash('sha256').update(stableJson(body)).digest('hex');
}

function stableJson(v: unknown): string {
  if (Array.isArray(v)) return `[${v.map(stableJson).join(',')}]`;
  if (v && typeof v === 'object') {
    return `{${Object.keys(v)
      .sort()
      .map((k) => `${JSON.stringify(k)}:${stableJson((v as Record<string, unknown>)[k])}`)
      .join(',')}}`;
  }
  return JSON.stringify(v) ?? 'null';
}

/** Stores an event unless the same one is already there. Returns whether it was new. */
export async function storeEvent(pool: Pool, e: InboundEvent): Promise<boolean> {
  const res = await pool.query(
    `INSERT INTO inbox_events (account_id, registration_id, dedupe_key, event, type, target, project_id, body)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8) ON CONFLICT (account_id, dedupe_key) DO NOTHING`,
    [e.accountId, e.registrationId, dedupeKey(e.body), e.event, e.type, e.target, e.projectId, JSON.stringify(e.body)],
  );
  return res.rowCount === 1;
}

export interface PendingEvent {
  id: number;
  event: string;
  type: string;
  target: string;
  projectId: string | null;
}

export async function pendingEvents(pool: Pool, accountId: string, limit: number): Promise<PendingEvent[]> {
  const { rows } = await pool.query<{ id: number; event: string; type: string; target: string; project_id: string | null }>(
    `SELECT id, event, type, target, project_id FROM inbox_events WHERE account_id = $1 AND applied_at IS NULL ORDER BY id LIMIT $2`,
    [accountId, limit],
  );
  return rows.map((r) => ({ id: r.id, event: r.event, type: r.type, target: r.target, projectId: r.project_id }));
}

export async function markApplied(pool: Pool, ids: readonly number[], outcome: string): Promise<void> {
  if (ids.length === 0) return;
  await pool.query(`UPDATE inbox_events SET applied_at = now(), outcome = $2 WHERE id = ANY($1::bigint[]) AND applied_at IS NULL`, [ids, outcome]);
}
