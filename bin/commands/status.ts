// `mirror status`: per account and stream, state, records, last fresh, lag and last error.
import { streamStatuses, summarise, type StreamStatus } from '../../mirror/status.ts';
import { accountsOverview } from '../../mirror/metrics-overview.ts';
import { age, cliServices, clip, exitCode, resolveAccount, table, type Command } from './shared.ts';

export const statusCommand: Command = {
  summary: 'Per account and stream: state, records, last fresh, lag, last error',
  usage: 'mirror status [--account <id>] [--streams] [--failed] [--json]',
  help:
    'By default one line per account and resource (its streams summed up; lag = the stalest stream). --streams shows every stream ' +
    '(account, resource, scope); --failed only the failed ones. --json prints everything, streams included. Exits 1 when a stream failed.',
  options: { account: { type: 'string' }, streams: { type: 'boolean' }, failed: { type: 'boolean' }, json: { type: 'boolean' } },
  async run(v) {
    const services = await cliServices();
    try {
      const accountId = typeof v.account === 'string' ? await resolveAccount(services, v.account) : undefined;
      const [accounts, all] = await Promise.all([accountsOverview(services.pool, { accountId }), streamStatuses(services.pool, { accountId })]);
      const statuses = v.failed ? all.filter((s) => s.state === 'failed') : all;
      const anyFailed = all.some((s) => s.state === 'failed');
      if (v.json) {
        const byAccount = (id: string) => statuses.filter((s) => s.accountId === id);
        console.log(
          JSON.stringify(
            {
              generatedAt: new Date().toISOString(),
              accounts: accounts.map((a) => ({ ...a, resources: summarise(byAccount(a.id)).map(withLag(byAccount(a.id))), streams: byAccount(a.id) })),
            },
            null,
            2,
          ),
        );
        return anyFailed ? exitCode.failed : exitCode.ok;
      }
      if (accounts.length === 0) {
        console.log('No linked account yet. Link one with `npx mirror link --reference-id <your user id>`.');
        return;
      }
      for (const a of accounts) {
        const mine = statuses.filter((s) => s.accountId === a.id);
        console.log(`\n${a.id}  ${a.sourceSystemName} (${a.sourceSystem})  ${a.status}  ref ${a.referenceId}  ${a.liveRecords} records  lag ${age(a.lagSeconds)}`);
        if (mine.length === 0) {
          console.log(v.failed ? '  no failed stream' : '  no stream yet: its first pass has not started (is a worker running?)');
          continue;
        }
        if (v.streams || v.failed) {
          console.log(
            indent(
              table(
                ['resource', 'scope', 'state', '>records', 'last fresh', '>lag', 'last error'],
                mine.map((s) => [s.resource, clip(s.scope || '-', 48), s.state, s.liveRecords, s.lastFreshAt ?? 'never', age(s.lagSeconds), clip(s.lastError, 70)]),
              ),
            ),
          );
        } else {
          console.log(
            indent(
              table(
                ['resource', '>streams', 'states', '>records', 'oldest fresh', '>lag', 'last error'],
                summarise(mine)
                  .map(withLag(mine))
                  .map((r) => [r.resource, r.streams, Object.entries(r.states).map(([k, n]) => `${k}:${n}`).join(' '), r.liveRecords, r.oldestFreshAt ?? 'never', age(r.lagSeconds), clip(r.lastError, 70)]),
              ),
            ),
          );
        }
      }
      if (anyFailed) console.log(`\nSome streams failed: \`npx mirror status --failed\` shows them; \`npx mirror resync --account <id> --resource <name>\` runs them again.`);
      return anyFailed ? exitCode.failed : exitCode.ok;
    } finally {
      await services.close();
    }
  },
};

function indent(text: string): string {
  return text
    .split('\n')
    .map((l) => `  ${l}`)
    .join('\n');
}

/** Lag of a resource: its stalest stream's. */
function withLag(streams: StreamStatus[]) {
  return <T extends { accountId: string; resource: string }>(r: T): T & { lagSeconds: number | null } => {
    const lags = streams.filter((s) => s.accountId === r.accountId && s.resource === r.resource && s.lagSeconds !== null).map((s) => s.lagSeconds!);
    return { ...r, lagSeconds: lags.length ? Math.max(...lags) : null };
  };
}
