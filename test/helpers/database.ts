// A fresh, migrated database per test file, dropped afterwards: tests stay parallel-safe.
import { randomBytes, randomUUID } from 'node:crypto';
import { dropDatabase, ensureDatabase, withDatabase } from '../../mirror/db/database.ts';
import { createDatabaseFrom, migrate } from '../../mirror/db/migrate.ts';
import type { Pool } from '../../mirror/db/pool.ts';

export const testServerUrl = process.env.TEST_DATABASE_URL ?? 'postgresql://postgres@127.0.0.1:5432/postgres';

export interface TestDatabase {
  url: string;
  drop(): Promise<void>;
}

export async function createTestDatabase(prefix = 'mirror_test', options: { migrate?: boolean } = {}): Promise<TestDatabase> {
  const name = `${prefix}_${process.pid}_${randomBytes(4).toString('hex')}`;
  const url = withDatabase(testServerUrl, name);
  // Under `npm test` a migrated database is a copy of the run's migrated template (bin/test-runner.ts).
  const template = process.env.TEST_TEMPLATE_DATABASE;
  if (options.migrate !== false && template) {
    await createDatabaseFrom(url, template);
  } else {
    await ensureDatabase(url);
    if (options.migrate !== false) await migrate(url);
  }
  return { url, drop: () => dropDatabase(url) };
}

/** A linked FieldOps account row with no token (store tests that need only its id); returns the id. */
export async function insertBareAccount(pool: Pool): Promise<string> {
  const accountId = randomUUID();
  await pool.query(
    `INSERT INTO linked_accounts (id, reference_id, source_system, source_system_name, token_ciphertext, token_hash, updated_at)
     VALUES ($1, 'ref', 'fieldops', 'FieldOps', '\\x00', $2, now())`,
    [accountId, randomBytes(32).toString('hex')],
  );
  return accountId;
}
