// Records marked deleted outside a pass: by id (a DELETE event), or a record with the records listed
// under it (a delete through the mirror). Soft deletes, as a pass's delete detection marks them.
import { inTransaction, type Pool } from '../db/pool.ts';
import { invalidatePositions } from '../reads/record-positions.ts';
import type { StreamKey } from '../streams/streams.ts';
import { touchStream } from './page-write.ts';

/** Marks records deleted by id (a DELETE event, or a parent that disappeared). */
export async function markDeleted(pool: Pool, key: StreamKey, ids: readonly string[]): Promise<number> {
  return inTransaction(pool, async (client) => {
    const res = await client.query(
      `UPDATE records SET deleted_at = now(), mirrored_at = now()
        WHERE account_id = $1 AND resource = $2 AND scope = $3 AND id = ANY($4::text[]) AND deleted_at IS NULL`,
      [key.accountId, key.resource, key.scope, ids],
    );
    if ((res.rowCount ?? 0) > 0) {
      await invalidatePositions(client, key.accountId, [key]);
      await touchStream(client, key);
    }
    return res.rowCount ?? 0;
  });
}

/**
 * A record the upstream just deleted at the mirror's request (the answer to a DELETE through it),
 * soft-deleted as a pass's delete detection would mark it, with the records listed under it
 * (`childScope`, of the `children` resources: an AP invoice's line items), which the upstream no
 * longer serves either. One transaction; the streams it changed are noted as touched. Returns how
 * many were marked.
 */
export async function markDeletedWithChildren(
  pool: Pool,
  key: StreamKey,
  id: string,
  children: { resources: readonly string[]; scope: string },
): Promise<number> {
  return inTransaction(pool, async (client) => {
    const res = await client.query<{ resource: string; scope: string; n: number }>(
      `WITH marked AS (
         UPDATE records SET deleted_at = now(), mirrored_at = now()
          WHERE account_id = $1 AND deleted_at IS NULL
            AND ((resource = $2 AND scope = $3 AND id = $4) OR (resource = ANY($5::text[]) AND scope = $6))
         RETURNING resource, scope
       )
       SELECT resource, scope, count(*)::int AS n FROM marked GROUP BY resource, scope`,
      [key.accountId, key.resource, key.scope, id, children.resources, children.scope],
    );
    const marked = res.rows.reduce((sum, r) => sum + r.n, 0);
    if (marked > 0) {
      await invalidatePositions(client, key.accountId, res.rows);
      await client.query(
        `UPDATE streams SET touched_at = now()
          WHERE account_id = $1 AND ((resource = $2 AND scope = $3) OR (resource = ANY($4::text[]) AND scope = $5))`,
        [key.accountId, key.resource, key.scope, children.resources, children.scope],
      );
    }
    return marked;
  });
}
