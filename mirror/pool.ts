// The pg pool of the mirror's hot paths (bulk writes and reads). One per process.
import pg from 'pg';

// int8 columns (counts, ordinals, stream ids) as numbers: they stay far below 2^53 here.
pg.types.setTypeParser(pg.types.builtins.INT8, (v) => Number(v));

export type Pool = pg.Pool;
export type PoolClient = pg.PoolClient;

export function createPool(databaseUrl: string, options: { max?: number; application?: string } = {}): pg.Pool {
  return new pg.Pool({
    connectionString: databaseUrl,
    max: options.max ?? 10,
    application_name: options.application ?? 'mirror',
    idleTimeoutMillis: 30_000,
  });
}

/** Runs `fn` in one transaction; rolls back on any error so nothing half-written remains. */
export async function inTransaction<T>(pool: pg.Pool, fn: (client: pg.PoolClient) => Promise<T>): Promise<T> {
  const client = await pool.connect();
  try {
    await client.query('BEGIN');
    const result = await fn(client);
    await client.query('COMMIT');
    return result;
  } catch (error) {
    await client.query('ROLLBACK').catch(() => undefined);
    throw error;
  } finally {
    client.release();
  }
}
