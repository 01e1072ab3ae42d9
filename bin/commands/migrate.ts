// `mirror migrate`: applies pending migrations; needs only DATABASE_URL.
import { parseConfig } from '../../lib/config.ts';
import type { Command } from './shared.ts';

export const migrateCommand: Command = {
  summary: 'Apply pending migrations (recorded in _prisma_migrations as Prisma does)',
  usage: 'mirror migrate',
  help: 'Creates the database if missing, then applies prisma/migrations in order, then makes the expression indexes of MIRROR_INDEXED_FIELDS exactly those listed (CREATE INDEX CONCURRENTLY: writes go on). Safe to run from several processes at once (advisory locks serialise them).',
  async run() {
    const { loadEnvFile } = await import('../../lib/config.ts');
    const { ensureDatabase } = await import('../../mirror/db/database.ts');
    const { migrate } = await import('../../mirror/db/migrate.ts');
    loadEnvFile();
    const config = parseConfig({ ...process.env, ...placeholderSecrets(process.env) });
    await ensureDatabase(config.DATABASE_URL);
    const r = await migrate(config.DATABASE_URL);
    console.log(r.applied.length ? `Applied: ${r.applied.join(', ')}` : `Up to date (${r.alreadyApplied.length} migrations).`);
    // The operator's field indexes (MIRROR_INDEXED_FIELDS), after the migrations that made the partitions.
    const { applyFieldIndexes } = await import('../../mirror/control/field-indexes.ts');
    const ix = await applyFieldIndexes(config.DATABASE_URL, config.MIRROR_INDEXED_FIELDS, (line) => console.log(line));
    if (ix.created.length + ix.kept.length + ix.dropped.length > 0)
      console.log(`Field indexes: ${ix.created.length} created, ${ix.kept.length} kept, ${ix.dropped.length} dropped.`);
  },
};

/** `migrate` and `doctor` need only some settings; fill the required secrets so they can run alone. */
export function placeholderSecrets(env: NodeJS.ProcessEnv): Record<string, string> {
  const key = Buffer.alloc(32).toString('base64');
  return {
    UPSTREAM_CLIENT_ID: env.UPSTREAM_CLIENT_ID ?? '0'.repeat(36),
    UPSTREAM_CLIENT_SECRET: env.UPSTREAM_CLIENT_SECRET ?? '0'.repeat(40),
    MIRROR_CLIENT_ID: env.MIRROR_CLIENT_ID ?? '0'.repeat(36),
    MIRROR_CLIENT_SECRET: env.MIRROR_CLIENT_SECRET ?? '0'.repeat(40),
    MIRROR_ENCRYPTION_KEY: env.MIRROR_ENCRYPTION_KEY ?? key,
    MIRROR_SIGNING_KEY: env.MIRROR_SIGNING_KEY ?? key,
  };
}
