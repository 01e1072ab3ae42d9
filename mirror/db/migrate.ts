// Applies prisma/migrations/*/migration.sql in name order and records each in `_prisma_migrations`
// exactly as Prisma's `migrate deploy` does, so Prisma's engine agrees with the table where it runs.
import { createHash, randomUUID } from 'node:crypto';
import { readdir, readFile } from 'node:fs/promises';
import { join } from 'node:path';
import pg from 'pg';
import { MirrorError } from '../../lib/errors.ts';
import { withDatabase } from './database.ts';

/** The advisory lock Prisma takes around a deploy. */
const PRISMA_MIGRATE_LOCK = 72707369;

export const defaultMigrationsDir = new URL('../../prisma/migrations/', import.meta.url).pathname;

interface MigrationFile {
  name: string;
  sql: string;
  checksum: string;
}

class MigrationError extends MirrorError {
  override readonly code = 'migration_failed';
}

export async function readMigrations(dir = defaultMigrationsDir): Promise<MigrationFile[]> {
  const entries = await readdir(dir, { withFileTypes: true });
  const names = entries
    .filter((e) => e.isDirectory())
    .map((e) => e.name)
    .sort();
  return Promise.all(
    names.map(async (name) => {
      const bytes = await readFile(join(dir, name, 'migration.sql'));
      return { name, sql: bytes.toString('utf8'), checksum: createHash('sha256').update(bytes).digest('hex') };
    }),
  );
}

const createTableSql = `CREATE TABLE IF NOT EXISTS "_prisma_migrations" (
    "id"                    VARCHAR(36) PRIMARY KEY NOT NULL,
    "checksum"              VARCHAR(64) NOT NULL,
    "finished_at"           TIMESTAMPTZ,
    "migration_name"        VARCHAR(255) NOT NULL,
    "logs"                  TEXT,
    "rolled_back_at"        TIMESTAMPTZ,
    "started_at"            TIMESTAMPTZ NOT NULL DEFAULT now(),
    "applied_steps_count"   INTEGER NOT NULL DEFAULT 0
)`;

interface AppliedRow {
  migration_name: string;
  checksum: string;
  finished_at: Date | null;
  rolled_back_at: Date | null;
}

interface MigrateResult {
  applied: string[];
  alreadyApplied: string[];
}

/**
 * The first line of a migration that must run outside a transaction block: `CREATE INDEX CONCURRENTLY`
 * (the only way to index a big table without blocking its writers) refuses to run inside one, and so does
 * a multi-statement query string, which Postgres runs as one implicit transaction. Such a migration's
 * statements run one at a time, each committed on its own: write each so that running it again after a
 * failure is harmless (`IF NOT EXISTS`, and drop an index a failed CONCURRENTLY build left INVALID).
 */
export const noTransactionMarker = '-- migrate: no-transaction';

export function runsOutsideTransaction(sql: string): boolean {
  return (
    sql
      .replace(/^\uFEFF/, '')
      .split('\n', 1)[0]!
      .trim() === noTransactionMarker
  );
}

/**
 * The statements of a migration, split at the semicolons that end them: not inside quotes ('...',
 * "..."), dollar quotes ($$...$$, $tag$...$tag$) or comments (-- and nested /* *\/). Statements holding
 * only comments are dropped.
 */
export function splitStatements(sql: string): string[] {
  const out: string[] = [];
  let start = 0;
  let i = 0;
  const n = sql.length;
  const push = (end: number) => {
    const text = sql.slice(start, end).trim();
    const code = text
      .replace(/--[^\n]*/g, '')
      .replace(/\/\*[\s\S]*?\*\//g, '')
      .trim();
    if (code !== '') out.push(text);
  };
  while (i < n) {
    const c = sql[i]!;
    if (c === '-' && sql[i + 1] === '-') {
      const nl = sql.indexOf('\n', i);
      i = nl < 0 ? n : nl + 1;
    } else if (c === '/' && sql[i + 1] === '*') {
      let depth = 1;
      i += 2;
      while (i < n && depth > 0) {
        if (sql[i] === '/' && sql[i + 1] === '*') {
          depth++;
          i += 2;
        } else if (sql[i] === '*' && sql[i + 1] === '/') {
          depth--;
          i += 2;
        } else i++;
      }
    } else if (c === "'" || c === '"') {
      i++;
      while (i < n) {
        if (sql[i] === c && sql[i + 1] === c) i += 2;
        else if (sql[i] === c) break;
        else i++;
      }
      i++;
    } else if (c === '$') {
      const tag = /^\$(?:[A-Za-z_][A-Za-z0-9_]*)?\$/.exec(sql.slice(i));
      if (tag) {
        const close = sql.indexOf(tag[0], i + tag[0].length);
        i = close < 0 ? n : close + tag[0].length;
      } else i++;
    } else if (c === ';') {
      push(i);
      start = ++i;
    } else i++;
  }
  push(n);
  return out;
}

/**
 * Applies pending migrations. Each runs in its own transaction (or statement by statement, see
 * noTransactionMarker); a failure is recorded and stops the run. `before`: apply only the migrations
 * whose names sort before it (a database as the release before that migration left it).
 */
export async function migrate(databaseUrl: string, options: { dir?: string; before?: string } = {}): Promise<MigrateResult> {
  const before = options.before;
  const migrations = (await readMigrations(options.dir)).filter((m) => before === undefined || m.name < before);
  const client = new pg.Client({ connectionString: databaseUrl });
  await client.connect();
  try {
    await client.query('SELECT pg_advisory_lock($1)', [PRISMA_MIGRATE_LOCK]);
    await client.query(createTableSql);
    const { rows } = await client.query<AppliedRow>(
      'SELECT migration_name, checksum, finished_at, rolled_back_at FROM "_prisma_migrations" ORDER BY started_at',
    );
    const failed = rows.find((r) => r.finished_at === null && r.rolled_back_at === null);
    if (failed) {
      throw new MigrationError(
        `Migration ${failed.migration_name} failed earlier and was not rolled back. Fix the database by hand, ` +
          `then mark it rolled back (UPDATE "_prisma_migrations" SET rolled_back_at = now() WHERE migration_name = '${failed.migration_name}') and run \`npx mirror migrate\` again.`,
      );
    }
    const done = new Map(rows.filter((r) => r.finished_at !== null).map((r) => [r.migration_name, r]));
    const result: MigrateResult = { applied: [], alreadyApplied: [] };
    for (const m of migrations) {
      const prior = done.get(m.name);
      if (prior) {
        if (prior.checksum !== m.checksum) {
          throw new MigrationError(
            `Migration ${m.name} was changed after it was applied (checksum differs). Restore the applied file and add a new migration instead.`,
          );
        }
        result.alreadyApplied.push(m.name);
        continue;
      }
      const id = randomUUID();
      await client.query('INSERT INTO "_prisma_migrations" (id, checksum, migration_name, started_at, applied_steps_count) VALUES ($1, $2, $3, now(), 0)', [
        id,
        m.checksum,
        m.name,
      ]);
      try {
        if (runsOutsideTransaction(m.sql)) {
          for (const statement of splitStatements(m.sql)) await client.query(statement);
        } else {
          await client.query('BEGIN');
          await client.query(m.sql);
          await client.query('COMMIT');
        }
      } catch (error) {
        await client.query('ROLLBACK').catch(() => undefined);
        const message = error instanceof Error ? error.message : String(error);
        await client.query('UPDATE "_prisma_migrations" SET logs = $2 WHERE id = $1', [id, message]);
        throw new MigrationError(`Migration ${m.name} failed: ${message}`, { cause: error });
      }
      await client.query('UPDATE "_prisma_migrations" SET finished_at = now(), applied_steps_count = 1 WHERE id = $1', [id]);
      result.applied.push(m.name);
    }
    return result;
  } finally {
    await client.query('SELECT pg_advisory_unlock($1)', [PRISMA_MIGRATE_LOCK]).catch(() => undefined);
    await client.end();
  }
}

/**
 * A migrated database to copy (`CREATE DATABASE ... TEMPLATE`), on the server of `serverUrl`: named
 * after the migrations it holds (`<prefix>_<hash of their checksums>`), made by whoever asks first
 * (an advisory lock keeps two from making it at once) and marked a template once migrated, so one
 * left half-made is made again. Returns its name. The test runner makes one per run: a test file's
 * database is then a copy, a fifth of a second, instead of every migration run again, seconds.
 */
export async function migratedTemplate(serverUrl: string, prefix: string): Promise<string> {
  const hash = createHash('sha256');
  for (const m of await readMigrations()) hash.update(m.name).update(m.checksum);
  const name = `${prefix}_${hash.digest('hex').slice(0, 16)}`;
  const admin = new pg.Client({ connectionString: withDatabase(serverUrl, 'postgres') });
  await admin.connect();
  try {
    await admin.query('SELECT pg_advisory_lock(hashtext($1))', [name]);
    const { rows } = await admin.query<{ datistemplate: boolean }>('SELECT datistemplate FROM pg_database WHERE datname = $1', [name]);
    if (rows[0]?.datistemplate) return name;
    if (rows[0]) await admin.query(`DROP DATABASE "${name}" WITH (FORCE)`);
    await admin.query(`CREATE DATABASE "${name}"`);
    await migrate(withDatabase(serverUrl, name));
    await admin.query(`ALTER DATABASE "${name}" IS_TEMPLATE true`);
    return name;
  } finally {
    await admin.query('SELECT pg_advisory_unlock(hashtext($1))', [name]).catch(() => undefined);
    await admin.end();
  }
}

/** Creates the database named in `url` as a copy of the database `template` on its server. */
export async function createDatabaseFrom(url: string, template: string): Promise<void> {
  const u = new URL(url);
  const name = decodeURIComponent(u.pathname.replace(/^\//, ''));
  const admin = new pg.Client({ connectionString: withDatabase(url, 'postgres') });
  await admin.connect();
  try {
    await admin.query(`CREATE DATABASE "${name.replace(/"/g, '""')}" TEMPLATE "${template.replace(/"/g, '""')}"`);
  } finally {
    await admin.end();
  }
}
