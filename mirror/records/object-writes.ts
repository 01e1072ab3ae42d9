// Objects written outside any pass: a webhook's object, the answer to a write through the mirror, the
// fresh storage URLs of a record read again.
import type { Pool } from '../db/pool.ts';
import type { StreamKey } from '../streams/streams.ts';
import { volatileFields, writePage, type WriteCounts } from './page-write.ts';

/**
 * Writes objects the upstream just returned outside any pass (a webhook's object, the answer to a
 * write): an existing record keeps its place in the upstream order, a new one goes after every
 * known one, as the upstream appends it.
 */
export async function applyObjects(pool: Pool, key: StreamKey, items: readonly Record<string, unknown>[]): Promise<WriteCounts> {
  if (items.length === 0) return { inserted: 0, updated: 0, unchanged: 0 };
  return writePage(pool, { key, pass: { streamId: 0, generation: 0 }, records: { items }, ordinalBase: await appendedOrdinal(pool, key), keepOrdinal: true });
}

/**
 * The place after every known record of a list, where a record the upstream just added goes until
 * a full pass reads the whole list again. For a list across projects (scope `project=*`), after
 * every record of each of its projects.
 */
export async function appendedOrdinal(pool: Pool, key: StreamKey): Promise<number> {
  const across = key.scope.includes('*');
  const { rows } = await pool.query<{ n: number | null }>(
    `SELECT max(ordinal) + 1 AS n FROM records WHERE account_id = $1 AND resource = $2 AND ${across ? 'scope LIKE $3' : 'scope = $3'}`,
    [key.accountId, key.resource, across ? key.scope.replaceAll('%', '\\%').replaceAll('_', '\\_').replace('*', '%') : key.scope],
  );
  return rows[0]?.n ?? 0;
}

/**
 * Keeps fresh storage URLs a record was read again for. URL fields are not content (they are left
 * out of the hash), so this is no change: `mirrored_at` and the changes feed stay as they are.
 */
export async function refreshUrlFields(pool: Pool, key: StreamKey, id: string, object: Record<string, unknown>): Promise<void> {
  const urls = Object.fromEntries(
    volatileFields(key.resource)
      .filter((f) => typeof object[f] === 'string')
      .map((f) => [f, object[f]]),
  );
  if (Object.keys(urls).length === 0) return;
  await pool.query(`UPDATE records SET data = data || $5::jsonb WHERE account_id = $1 AND resource = $2 AND scope = $3 AND id = $4`, [
    key.accountId,
    key.resource,
    key.scope,
    id,
    JSON.stringify(urls),
  ]);
}
