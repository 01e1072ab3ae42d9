// What the storage proxy reads and writes in the mirror: the record behind a signed file link, and
// the log of every download and preview it served.
import type { Pool } from '../db/pool.ts';
import type { PrismaClient } from '../db/prisma.ts';

/** A record's stored data (its file URL fields among it); undefined once it is gone or deleted. */
export async function storedRecordData(
  pool: Pool,
  key: { accountId: string; resource: string; scope: string; id: string },
): Promise<Record<string, unknown> | undefined> {
  const { rows } = await pool.query<{ data: Record<string, unknown> }>(
    `SELECT data FROM records WHERE account_id = $1 AND resource = $2 AND scope = $3 AND id = $4 AND deleted_at IS NULL`,
    [key.accountId, key.resource, key.scope, key.id],
  );
  return rows[0]?.data;
}

interface StorageAccessEntry {
  accountId: string;
  resource: string;
  scope: string;
  recordId: string;
  field: string;
  status: number;
  range: string | null;
  ip: string | null;
  userAgent: string | null;
}

/** Records one download or preview the proxy answered. */
export async function recordStorageAccess(prisma: PrismaClient, entry: StorageAccessEntry): Promise<void> {
  await prisma.storageAccess.create({ data: entry });
}
