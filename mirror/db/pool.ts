// The pg pool of the mirror's hot paths (bulk writes and reads). One per process.
import pg from 'pg';

// int8 columns (counts, ordinals, stream ids) as numbers: they stay far below 2^53 here.
pg.types.setTypeParser(pg.types.builtins.INT8, (v) => Number(v));

export type Pool = pg.Pool;
export type PoolClient = pg.PoolClient;

export function createPool(databaseUrl: string, options: { max?: number; application?: string; onError?: (error: Error) => void } = {}): pg.Pool {
  const pool = new pg.Pool({
    connectionString: databaseUrl,
    max: options.max ?? 10,
    application_name: options.application ?? 'mirror',
    idleTimeoutMillis: 30_000,
  });
  // An idle client whose connection dies (Postgres restarted, a backend terminated) is dropped by the
  // pool, which then emits 'error'; unhandled, that would take the whole process down. The next
  // query opens a new connection, and a query in flight fails on its own and is retried.
  pool.on('error', options.onError ?? (() => undefined));
  return pool;
}

/**
 * Checks a client out for `fn`, with an error listener for its lifetime (a connection lost while
 * checked out emits 'error' on the client, not only a failed query), and hands a broken client back
 * as broken so the pool destroys it instead of reusing it.
 */
async function withClient<T>(pool: pg.Pool, fn: (client: pg.PoolClient) => Promise<T>): Promise<T> {
  const client = await pool.connect();
  let lost: Error | undefined;
  const onError = (error: Error) => {
    lost = error;
  };
  client.on('error', onError);
  let failure: Error | undefined;
  try {
    return await fn(client);
  } catch (error) {
    failure = error instanceof Error ? error : new Error(String(error));
    throw error;
  } finally {
    client.off('error', onError);
    client.release(lost ?? (failure && isConnectionError(failure) ? failure : undefined));
  }
}

/** What `fn` of {@link inTransaction} may do with its transaction besides running statements on the client. */
export interface Transaction {
  /**
   * Ends the transaction with `statements` (literal SQL, no parameters) and COMMIT, in one round
   * trip. If one of them fails, COMMIT is not run and the transaction rolls back.
   */
  commitWith(statements: string): Promise<void>;
}

export interface TransactionOptions {
  /** Statements run with BEGIN, in its round trip (literal SQL, e.g. `SET LOCAL ...`). */
  setup?: string;
}

/**
 * Runs `fn` in one transaction; rolls back on any error so nothing half-written remains. `fn` may
 * end it itself (`commitWith`), which saves the round trip of a separate COMMIT.
 */
export async function inTransaction<T>(
  pool: pg.Pool,
  fn: (client: pg.PoolClient, tx: Transaction) => Promise<T>,
  options: TransactionOptions = {},
): Promise<T> {
  return withClient(pool, async (client) => {
    await client.query(options.setup ? `BEGIN; ${options.setup}` : 'BEGIN');
    let committed = false;
    const tx: Transaction = {
      commitWith: async (statements) => {
        // Several statements in one query: the simple protocol, which stops at the first that fails.
        await client.query(`${statements}; COMMIT`);
        committed = true;
      },
    };
    try {
      const result = await fn(client, tx);
      if (!committed) await client.query('COMMIT');
      return result;
    } catch (error) {
      if (!committed) await client.query('ROLLBACK').catch(() => undefined);
      throw error;
    }
  });
}

/** A failure of the connection itself (not of a statement): the client must not be reused. */
export function isConnectionError(error: Error): boolean {
  const code = (error as { code?: unknown }).code;
  if (typeof code === 'string' && /^(08|57P0)/.test(code)) return true; // connection exception, admin shutdown
  return /Connection terminated|ECONNRESET|ECONNREFUSED|EPIPE|not queryable|Client has encountered a connection error/i.test(error.message);
}
