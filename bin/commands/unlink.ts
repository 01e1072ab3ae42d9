// `mirror unlink`: an account stops syncing (its schedules and running passes go), its link sessions
// end, an `account.unlinked` event tells the application, and its data is purged after the retention
// (MIRROR_RETENTION_AFTER_UNLINK) or at once with --purge.
import { purgeUnlinkedAccount } from '../../mirror/ops/retention.ts';
import { cliConfig, cliServices, connectTemporal, required, resolveAccount, type Command } from './shared.ts';

export const unlinkCommand: Command = {
  summary: 'Unlink an account: its schedules, running passes and link sessions end; its data is purged after MIRROR_RETENTION_AFTER_UNLINK (--purge: now)',
  usage: 'mirror unlink --account <id> [--purge]',
  help: "Marks the account unlinked (an account.unlinked event goes to its subscriptions) and ends its link sessions in the same transaction: the read API no longer accepts its tokens or its sessions. Deletes the account's Temporal schedules, cancels its running pass, change workflow and probe, and starts the purge of its mirrored data after MIRROR_RETENTION_AFTER_UNLINK. --purge purges it now.",
  options: { account: { type: 'string' }, purge: { type: 'boolean' } },
  async run(v) {
    const accountRef = required(v, 'account', 'see `npx mirror accounts`');
    const config = cliConfig();
    const services = await cliServices(config);
    try {
      const accountId = await resolveAccount(services, accountRef);
      const { sessionsEnded } = await services.accounts.unlink(accountId);
      const temporal = await connectTemporal(config);
      try {
        await temporal.sync.unlinked(accountId);
      } finally {
        await temporal.close();
      }
      const purged = v.purge ? await purgeUnlinkedAccount(services.pool, accountId) : null;
      const rows = purged ? Object.values(purged).reduce((n, c) => n + c, 0) : 0;
      console.log(
        `Unlinked ${accountId}: schedules deleted, passes cancelled, ${sessionsEnded} link sessions ended; ${
          v.purge ? `${rows} rows of its mirrored data removed` : `its mirrored data is purged after MIRROR_RETENTION_AFTER_UNLINK (--purge removes it now)`
        }.`,
      );
    } finally {
      await services.close();
    }
  },
};
