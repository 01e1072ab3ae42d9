// Creating the mirror's database where it is missing, with an error that says how to get a Postgres;
// and the few statements the operator's commands run on the database as a whole.
import pg from 'pg';
import { ConfigError } from '../../lib/errors.ts';

function withDatabase(url: string, database: string): string {
  const u = new URL(url);
  u.pathname = `/${database}`;
  return u.toString();
}

function databaseName(url: string): string {
  return decodeURIComponent(new URL(url).pathname.replace(/^\//, '')) || 'postgres';
}

/** Creates the database named in `url` if it does not exist. Returns true when it created it. */
export async function ensureDatabase(url: string): Promise<boolean> {
  const name = databaseName(url);
  const admin = new pg.Client({ connectionString: withDatabase(url, 'postgres'), connectionTimeoutMillis: 5000 });
  try {
    await admin.connect();
  } catch (error) {
    const u = new URL(url);
    throw new ConfigError(
      `No PostgreSQL answers at ${u.hostname}:${u.port || 5432} (${(error as Error).message}). ` +
        'Start one (e.g. `pg_ctlcluster 15 main start`, or `docker compose up -d postgres`) or set DATABASE_URL.',
      { cause: error },
    );
  }
  try {
    const { rowCount } = await admin.query('SELECT 1 FROM pg_database WHERE datname = $1', [name]);
    if (rowCount) return false;
    await admin.query(`CREATE DATABASE "${name.replace(/"/g, '""')}"`);
    return true;
  } catch (error) {
    // Two processes may race to create it.
    if ((error as { code?: string }).code === '42P04') return false;
    throw error;
  } finally {
    await admin.end();
  }
}

export async function dropDatabase(url: string): Promise<void> {
  const name = databaseName(url);
  const admin = new pg.Client({ connectionString: withDatabase(url, 'postgres') });
  await admin.connect();
  try {
    await admin.query(`DROP DATABASE IF EXISTS "${name.replace(/"/g, '""')}" WITH (FORCE)`);
  } finally {
    await admin.end();
  }
}

export { withDatabase };

/** Fails (with pg's error) unless the mirror's schema answers: a command checks this before it starts. */
export async function assertSchemaReachable(pool: pg.Pool): Promise<void> {
  await pool.query('SELECT 1 FROM linked_accounts LIMIT 0');
}

/** The database's clock: what `mirrored_at` and the change cursors are measured with. */
export async function databaseNow(pool: pg.Pool): Promise<Date> {
  const { rows } = await pool.query<{ now: Date }>('SELECT now() AS now');
  return rows[0]!.now;
}
