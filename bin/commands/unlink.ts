// `mirror unlink`: an account stops syncing (its schedules and running passes go) and its link sessions
// end; data stays unless --purge.
import { accountSyncWorkflowId, changesWorkflowId } from '../../lib/workflow-ids.ts';
import { purgeAccountRecords } from '../../mirror/db/database.ts';
import { cliConfig, cliServices, connectTemporal, required, resolveAccount, type Command } from './shared.ts';

export const unlinkCommand: Command = {
  summary: 'Unlink an account: its schedules, running passes and link sessions end; mirrored data is kept unless --purge',
  usage: 'mirror unlink --account <id> [--purge]',
  help: "Deletes the account's Temporal schedules (full and incremental), cancels its running pass and change workflow, and marks it unlinked, ending its link sessions in the same transaction: the read API no longer accepts its token or its sessions. --purge also deletes its mirrored records.",
  options: { account: { type: 'string' }, purge: { type: 'boolean' } },
  async run(v) {
    const accountRef = required(v, 'account', 'see `npx mirror accounts`');
    const config = cliConfig();
    const services = await cliServices(config);
    try {
      const accountId = await resolveAccount(services, accountRef);
      const temporal = await connectTemporal(config);
      try {
        await temporal.sync.deleteSchedules(accountId);
        for (const id of [accountSyncWorkflowId(accountId), changesWorkflowId(accountId)]) {
          await temporal.sync.client.workflow
            .getHandle(id)
            .cancel()
            .catch(() => undefined);
        }
      } finally {
        await temporal.close();
      }
      const { sessionsEnded } = await services.accounts.unlink(accountId);
      let purged = 0;
      if (v.purge) purged = await purgeAccountRecords(services.pool, accountId);
      console.log(
        `Unlinked ${accountId}: schedules deleted, passes cancelled, ${sessionsEnded} link sessions ended${v.purge ? `, ${purged} mirrored records removed` : '; its mirrored data is kept (--purge removes it)'}.`,
      );
    } finally {
      await services.close();
    }
  },
};
