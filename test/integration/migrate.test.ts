// The migration runner records `_prisma_migrations` exactly as Prisma's `migrate deploy` does.
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { cpSync, mkdtempSync, readFileSync, writeFileSync, mkdirSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import pg from 'pg';
import { defaultMigrationsDir, migrate, readMigrations } from '../../mirror/db/migrate.ts';
import { createTestDatabase, type TestDatabase } from '../helpers/database.ts';

describe('migrate', () => {
  let db: TestDatabase;
  before(async () => {
    db = await createTestDatabase('mirror_migrate', { migrate: false });
  });
  after(async () => {
    await db?.drop();
  });

  async function rows() {
    const c = new pg.Client({ connectionString: db.url });
    await c.connect();
    try {
      return (await c.query('SELECT * FROM _prisma_migrations ORDER BY migration_name')).rows as Record<string, unknown>[];
    } finally {
      await c.end();
    }
  }

  it('applies every migration once, in name order, with Prisma checksums', async () => {
    const files = await readMigrations();
    const first = await migrate(db.url);
    assert.deepEqual(
      first.applied,
      files.map((f) => f.name),
    );
    const recorded = await rows();
    assert.equal(recorded.length, files.length);
    for (const [i, r] of recorded.entries()) {
      const file = files[i]!;
      assert.equal(r.migration_name, file.name);
      assert.equal(
        r.checksum,
        createHash('sha256')
          .update(readFileSync(join(defaultMigrationsDir, file.name, 'migration.sql')))
          .digest('hex'),
      );
      assert.match(String(r.id), /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
      assert.ok(r.finished_at instanceof Date);
      assert.equal(r.rolled_back_at, null);
      assert.equal(r.applied_steps_count, 1);
      assert.equal(r.logs, null);
    }
    const again = await migrate(db.url);
    assert.deepEqual(again.applied, []);
    assert.equal((await rows()).length, files.length);
  });

  it('refuses a migration that changed after it was applied', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'migrations-'));
    cpSync(defaultMigrationsDir, dir, { recursive: true });
    const first = (await readMigrations(dir))[0]!;
    writeFileSync(join(dir, first.name, 'migration.sql'), `${first.sql}\n-- edited\n`);
    await assert.rejects(migrate(db.url, { dir }), /changed after it was applied/);
  });

  it('records a failed migration with its error and stops there until it is resolved', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'migrations-'));
    cpSync(defaultMigrationsDir, dir, { recursive: true });
    mkdirSync(join(dir, '99999999999999_broken'));
    writeFileSync(join(dir, '99999999999999_broken', 'migration.sql'), 'CREATE TABLE broken (x int);\nSELECT no_such_function();\n');
    await assert.rejects(migrate(db.url, { dir }), /99999999999999_broken failed/);
    const broken = (await rows()).find((r) => r.migration_name === '99999999999999_broken')!;
    assert.equal(broken.finished_at, null);
    assert.match(String(broken.logs), /no_such_function/);
    await assert.rejects(migrate(db.url, { dir }), /failed earlier and was not rolled back/);
    const c = new pg.Client({ connectionString: db.url });
    await c.connect();
    const table = await c.query<{ t: string | null }>(`SELECT to_regclass('broken') AS t`);
    await c.end();
    assert.equal(table.rows[0]!.t, null, 'nothing half-written: the failed migration rolled back');
  });
});
