// `mirror accounts`: the linked accounts, with their streams, records and freshness.
import { accountsOverview } from '../../mirror/ops/metrics-overview.ts';
import { age, cliServices, table, type Command } from './shared.ts';

export const accountsCommand: Command = {
  summary: 'List linked accounts',
  usage: 'mirror accounts [--json]',
  help: 'One line per account, those needing attention first (credentials refused, failed streams; idle, then unlinked last): id, source system, status (linked, idle: unused for MIRROR_IDLE_AFTER and polled less often, credentials_refused, unlinked), reference id, streams synced/total, live records, and how long ago its stalest stream was fresh. Commands take an account by its id or a unique prefix of it.',
  options: { json: { type: 'boolean' } },
  async run(v) {
    const services = await cliServices();
    try {
      const accounts = await accountsOverview(services.pool);
      if (v.json) {
        console.log(JSON.stringify(accounts, null, 2));
        return;
      }
      if (accounts.length === 0) {
        console.log('No linked account yet. Link one with `npx mirror link --reference-id <your user id>`.');
        return;
      }
      console.log(
        table(
          ['account', 'source', 'status', 'reference', '>streams', '>records', '>lag', 'last error'],
          accounts.map((a) => [
            a.id,
            a.sourceSystem,
            a.status,
            a.referenceId,
            `${a.states.synced ?? 0}/${a.streams}`,
            a.liveRecords,
            age(a.lagSeconds),
            (a.statusReason ?? a.lastError ?? '').replace(/\s+/g, ' ').slice(0, 60),
          ]),
        ),
      );
    } finally {
      await services.close();
    }
  },
};
