// `mirror purge`: removes now what the retention settings let go (the maintenance schedule does the
// same every hour), or with --dry-run prints what would go and removes nothing.
import { purgeExpired, retentionPolicy, type ExpiredCounts } from '../../mirror/ops/retention.ts';
import { cliConfig, cliServices, table, type Command } from './shared.ts';

export const purgeCommand: Command = {
  summary: 'Purge now what is past its retention (--dry-run: print what would go)',
  usage: 'mirror purge [--dry-run] [--json]',
  help: "Removes, in short batches: tombstones of deleted records older than MIRROR_TOMBSTONE_RETENTION that every subscription to their resource has passed; finished passes older than MIRROR_RUN_RETENTION (each stream's latest stays, and those a SYNCED subscription has not passed); applied webhook events, storage access logs and expired async requests older than MIRROR_LOG_RETENTION; and the mirrored data of accounts unlinked longer than MIRROR_RETENTION_AFTER_UNLINK. Live records, pending events, accounts, events and subscriptions are never touched. --dry-run counts what would go and removes nothing.",
  options: { 'dry-run': { type: 'boolean' }, json: { type: 'boolean' } },
  async run(v) {
    const config = cliConfig();
    const services = await cliServices(config);
    try {
      const dryRun = v['dry-run'] === true;
      const counts = await purgeExpired(services.pool, retentionPolicy(config), { dryRun });
      if (v.json) {
        console.log(JSON.stringify({ dryRun, ...counts }, null, 2));
        return;
      }
      console.log(purgeReport(counts, config, dryRun));
    } finally {
      await services.close();
    }
  },
};

function purgeReport(counts: ExpiredCounts, config: ReturnType<typeof cliConfig>, dryRun: boolean): string {
  const days = (ms: number) => (ms % 86_400_000 === 0 ? `${ms / 86_400_000} d` : `${Math.round(ms / 60_000)} min`);
  const rows: (string | number)[][] = [
    ['tombstones of deleted records', counts.tombstones, `MIRROR_TOMBSTONE_RETENTION ${days(config.MIRROR_TOMBSTONE_RETENTION)}`],
    ['finished passes (sync_runs)', counts.syncRuns, `MIRROR_RUN_RETENTION ${days(config.MIRROR_RUN_RETENTION)}`],
    ['applied webhook events (inbox)', counts.inboxEvents, `MIRROR_LOG_RETENTION ${days(config.MIRROR_LOG_RETENTION)}`],
    ['storage access log', counts.storageAccesses, `MIRROR_LOG_RETENTION ${days(config.MIRROR_LOG_RETENTION)}`],
    ['expired async requests', counts.asyncRequests, `MIRROR_LOG_RETENTION ${days(config.MIRROR_LOG_RETENTION)}`],
    ['unlinked accounts (all their data)', counts.unlinkedAccounts.length, `MIRROR_RETENTION_AFTER_UNLINK ${days(config.MIRROR_RETENTION_AFTER_UNLINK)}`],
  ];
  const lines = [table(['what', dryRun ? '>would go' : '>removed', 'kept for'], rows)];
  for (const id of counts.unlinkedAccounts) lines.push(`  ${dryRun ? 'would purge' : 'purged'} unlinked account ${id}`);
  lines.push(dryRun ? 'Dry run: nothing was removed. Run `npx mirror purge` to remove it.' : 'Done.');
  return lines.join('\n');
}
