// `mirror sync` and `mirror resync`: run a pass now for one account (or one resource or scope of it),
// follow it with a bar per stream, and end with a table of what it wrote.
import { resources, resourceDef } from '../../lib/resources.ts';
import type { AccountSyncSummary } from '../../api/sync-control.ts';
import { databaseNow } from '../../mirror/db/database.ts';
import { retryStalledNow } from '../../mirror/streams/stalls.ts';
import { finalTotals, followPass, totalsTable } from './sync-progress.ts';
import { cliConfig, cliServices, connectTemporal, exitCode, required, resolveAccount, UsageError, type Command, type Values } from './shared.ts';

const options = {
  account: { type: 'string' },
  resource: { type: 'string' },
  scope: { type: 'string' },
  'no-wait': { type: 'boolean' },
  json: { type: 'boolean' },
} as const;

export const syncCommand: Command = {
  summary: 'Run a pass now (full or incremental) for one account, resource or scope, with progress',
  usage: 'mirror sync --account <id> [--mode full|incremental] [--resource <name>] [--scope <scope>] [--no-wait] [--json]',
  help:
    'Starts the pass as a Temporal workflow (or joins the one already running for the same target), shows a live bar per stream, ' +
    'and ends with records, pages, inserts, updates and deletes per resource, then the streams that failed or stalled. Exits 1 if a stream failed or stalled. Stalled streams it covers are tried at once, not after their backoff.\n' +
    'A full pass reads everything and marks what the upstream no longer has as deleted; an incremental pass asks only for what changed where the source system can filter.\n' +
    'Example: mirror sync --account 3f2a --resource cost-codes --scope project=1234',
  options: { ...options, mode: { type: 'string' } },
  async run(v) {
    if (v.mode !== undefined && v.mode !== 'full' && v.mode !== 'incremental') throw new UsageError('--mode is full or incremental.');
    return runPass(v, v.mode ?? 'full');
  },
};

export const resyncCommand: Command = {
  summary: 'Full pass again for one account, resource or scope (also finds deletions)',
  usage: 'mirror resync --account <id> [--resource <name>] [--scope <scope>] [--no-wait] [--json]',
  help:
    'The same as `mirror sync --mode full`: every page is read again, unchanged records are skipped by hash, and records the upstream no longer serves are marked deleted once the pass completed. ' +
    "The Temporal UI can do the same: trigger the account's `account-full:<id>` schedule.",
  options,
  async run(v) {
    return runPass(v, 'full');
  },
};

async function runPass(v: Values, mode: 'full' | 'incremental'): Promise<number> {
  const resource = typeof v.resource === 'string' ? v.resource : undefined;
  const scope = typeof v.scope === 'string' ? v.scope : undefined;
  if (resource && !resourceDef(resource)) throw new UsageError(`unknown resource "${resource}"; resources: ${resources.map((r) => r.name).join(', ')}.`);
  if (scope && !resource) throw new UsageError('--scope needs --resource.');
  const accountRef = required(v, 'account', 'see `npx mirror accounts`');
  const config = cliConfig();
  const services = await cliServices(config);
  try {
    const accountId = await resolveAccount(services, accountRef);
    const account = await services.accounts.get(accountId);
    if (account.status !== 'linked') throw new UsageError(`account ${accountId} is ${account.status}; link it again before syncing.`);
    // A pass the operator asks for tries stalled streams now, not after their backoff.
    const stalled = await retryStalledNow(services.pool, { accountId, resource, scope });
    if (stalled > 0) console.error(`${stalled} stalled stream${stalled === 1 ? '' : 's'} tried again now (not after the backoff).`);
    const temporal = await connectTemporal(config);
    try {
      const dbNow = await databaseNow(services.pool);
      const handle = await temporal.sync.start({ accountId, mode, resource, scope, concurrency: config.SYNC_STREAM_CONCURRENCY });
      const description = await handle.describe();
      const joined = description.startTime.getTime() < dbNow.getTime() - 1000;
      const since = new Date(Math.min(dbNow.getTime(), description.startTime.getTime()));
      const what = `${mode} pass of ${account.sourceSystemName} account ${accountId}${resource ? ` (${resource}${scope ? ` ${scope}` : ''})` : ''}`;
      console.error(
        `${joined ? 'Joined the running' : mode === 'incremental' ? 'Started an' : 'Started a'} ${what}: workflow ${handle.workflowId}${v['no-wait'] ? '' : ' (Ctrl-C stops watching, not the pass)'}.`,
      );
      if (v['no-wait']) {
        if (v.json) console.log(JSON.stringify({ workflowId: handle.workflowId, runId: description.runId, joined }));
        return exitCode.ok;
      }
      let result: AccountSyncSummary;
      try {
        result = await followPass({ pool: services.pool, sync: temporal.sync, handle, accountId, since, live: v.json ? false : undefined });
      } catch (error) {
        throw new Error(
          `The pass ended without a result (${error instanceof Error ? error.message : String(error)}); see workflow ${handle.workflowId} in the Temporal UI`,
          { cause: error },
        );
      }
      const totals = await finalTotals(services.pool, accountId, since);
      const stalled = result.stalled ?? [];
      if (v.json) {
        console.log(JSON.stringify({ workflowId: handle.workflowId, joined, result, totals }, null, 2));
      } else {
        console.log(totalsTable(totals));
        for (const f of result.failed) console.log(`FAILED ${f.resource}${f.scope ? ` ${f.scope}` : ''}: ${(f.error ?? '').replace(/\s+/g, ' ')}`);
        for (const s of stalled) console.log(`STALLED ${s.resource}${s.scope ? ` ${s.scope}` : ''}: ${s.reason.replace(/\s+/g, ' ')}`);
        if (result.failed.length)
          console.error(
            `${result.failed.length} streams failed: \`npx mirror status --account ${accountId} --failed\`, then \`npx mirror resync --account ${accountId} --resource <name>\`.`,
          );
        if (stalled.length)
          console.error(
            `${stalled.length} stream${stalled.length === 1 ? '' : 's'} stalled (tried again after the backoff, or at once by the next \`npx mirror sync\`): \`npx mirror status --account ${accountId} --failed\`.`,
          );
      }
      // A stalled stream needs the operator as a failed one does (as `mirror status` says).
      return result.failed.length > 0 || stalled.length > 0 ? exitCode.failed : exitCode.ok;
    } finally {
      await temporal.close();
    }
  } finally {
    await services.close();
  }
}
