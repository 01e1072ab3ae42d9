// The migration runner's two options for online migrations (mirror/db/migrate.ts): stopping before a given
// migration (a database as the release before it left it), and a migration marked to run outside a
// transaction block, which is what `CREATE INDEX CONCURRENTLY` needs.
import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import pg from 'pg';
import { migrate, noTransactionMarker, readMigrations } from '../../mirror/db/migrate.ts';
import { createTestDatabase, type TestDatabase } from '../helpers/database.ts';

async function query<T extends pg.QueryResultRow>(url: string, sql: string): Promise<T[]> {
  const c = new pg.Client({ connectionString: url });
  await c.connect();
  try {
    return (await c.query<T>(sql)).rows;
  } finally {
    await c.end();
  }
}

describe('migrate: before, and migrations outside a transaction', () => {
  let db: TestDatabase;
  before(async () => {
    db = await createTestDatabase('mirror_migrate_online', { migrate: false });
  });
  after(async () => {
    await db?.drop();
  });

  it('stops before the named migration, and applies the rest on the next run', async () => {
    const names = (await readMigrations()).map((m) => m.name);
    const stop = names[3]!;
    const first = await migrate(db.url, { before: stop });
    assert.deepEqual(first.applied, names.slice(0, 3));
    const recorded = await query<{ migration_name: string }>(db.url, 'SELECT migration_name FROM _prisma_migrations ORDER BY migration_name');
    assert.deepEqual(
      recorded.map((r) => r.migration_name),
      names.slice(0, 3),
    );
    const one = await migrate(db.url, { before: names[4]! });
    assert.deepEqual(one.applied, [stop]);
    const rest = await migrate(db.url, { before: names[6]! });
    assert.deepEqual(rest.applied, names.slice(4, 6));
    assert.deepEqual(rest.alreadyApplied, names.slice(0, 4));
  });

  it('runs a marked migration statement by statement, so CREATE INDEX CONCURRENTLY works', async () => {
    // A folder of its own: only the probes (the ones applied above are not asked for again).
    const dir = mkdtempSync(join(tmpdir(), 'migrations-'));
    const name = '99999999999990_concurrent_index';
    mkdirSync(join(dir, name));
    writeFileSync(
      join(dir, name, 'migration.sql'),
      `${noTransactionMarker}
-- An index built without blocking writers; a statement holding a semicolon in a string and a dollar quote.
CREATE TABLE IF NOT EXISTS "online_probe" ("id" INT PRIMARY KEY, "note" TEXT);
CREATE INDEX CONCURRENTLY IF NOT EXISTS "online_probe_note_idx" ON "online_probe" ("note");
INSERT INTO "online_probe" VALUES (1, 'a;b'), (2, $$c;'d'$$) ON CONFLICT DO NOTHING;
`,
    );
    const result = await migrate(db.url, { dir });
    assert.deepEqual(result.applied, [name]);
    const index = await query<{ valid: boolean }>(db.url, `SELECT indisvalid AS valid FROM pg_index WHERE indexrelid = 'online_probe_note_idx'::regclass`);
    assert.deepEqual(index, [{ valid: true }]);
    const rows = await query<{ note: string }>(db.url, 'SELECT note FROM online_probe ORDER BY id');
    assert.deepEqual(
      rows.map((r) => r.note),
      ['a;b', "c;'d'"],
    );
  });

  it('refuses CREATE INDEX CONCURRENTLY in an unmarked migration (it runs in a transaction), and records the failure', async () => {
    // A folder of its own: only the probes (the ones applied above are not asked for again).
    const dir = mkdtempSync(join(tmpdir(), 'migrations-'));
    const marked = '99999999999990_concurrent_index';
    mkdirSync(join(dir, marked));
    // The same file as the test above applied (same checksum): already applied, skipped.
    writeFileSync(
      join(dir, marked, 'migration.sql'),
      `${noTransactionMarker}
-- An index built without blocking writers; a statement holding a semicolon in a string and a dollar quote.
CREATE TABLE IF NOT EXISTS "online_probe" ("id" INT PRIMARY KEY, "note" TEXT);
CREATE INDEX CONCURRENTLY IF NOT EXISTS "online_probe_note_idx" ON "online_probe" ("note");
INSERT INTO "online_probe" VALUES (1, 'a;b'), (2, $$c;'d'$$) ON CONFLICT DO NOTHING;
`,
    );
    const name = '99999999999991_unmarked';
    mkdirSync(join(dir, name));
    writeFileSync(join(dir, name, 'migration.sql'), 'CREATE INDEX CONCURRENTLY "online_probe_id_note_idx" ON "online_probe" ("id", "note");\n');
    await assert.rejects(migrate(db.url, { dir }), /99999999999991_unmarked failed: CREATE INDEX CONCURRENTLY cannot run inside a transaction block/);
  });
});
