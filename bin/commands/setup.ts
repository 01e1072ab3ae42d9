// `mirror setup`: secrets, database, migrations, Temporal CLI (see bin/setup-steps.ts).
import type { Command } from './shared.ts';

export const setupCommand: Command = {
  summary: 'Install what a fresh clone needs: secrets, database, migrations, Temporal CLI',
  usage: 'mirror setup',
  help: 'Idempotent. Generates missing secrets into .env.local (git-ignored), creates the database at DATABASE_URL and applies migrations, registers MIRROR_CLIENT_ID, and finds or builds the Temporal CLI.',
  async run() {
    const { setup } = await import('../setup-steps.ts');
    const r = await setup();
    console.log(`Ready. Database ${new URL(r.config.DATABASE_URL).pathname.slice(1)} migrated; Temporal CLI: ${r.temporalCli}`);
  },
};
