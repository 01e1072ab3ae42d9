// A fresh, migrated database per test file, dropped afterwards: tests stay parallel-safe.
import { randomBytes } from 'node:crypto';
import { dropDatabase, ensureDatabase, withDatabase } from '../../mirror/database.ts';
import { migrate } from '../../mirror/migrate.ts';

export const testServerUrl = process.env.TEST_DATABASE_URL ?? 'postgresql://postgres@127.0.0.1:5432/postgres';

export interface TestDatabase {
  url: string;
  drop(): Promise<void>;
}

export async function createTestDatabase(prefix = 'mirror_test', options: { migrate?: boolean } = {}): Promise<TestDatabase> {
  const name = `${prefix}_${process.pid}_${randomBytes(4).toString('hex')}`;
  const url = withDatabase(testServerUrl, name);
  await ensureDatabase(url);
  if (options.migrate !== false) await migrate(url);
  return { url, drop: () => dropDatabase(url) };
}
