// `mirror status`: per account and stream, state, records, last fresh, lag and last error, freshness
// against the target (staleness p50/p95/max per resource), and when incremental passes list streams next and why.
import { pollingOverview, streamStatuses, summarise, type StreamStatus } from '../../mirror/ops/status.ts';
import { accountsOverview } from '../../mirror/ops/metrics-overview.ts';
import { freshnessOverview } from '../../mirror/streams/freshness.ts';
import { freshnessSettings } from '../polling-settings.ts';
import { age, cliServices, clip, exitCode, resolveAccount, table, type Command } from './shared.ts';

export const statusCommand: Command = {
  summary: 'Per account and stream: state, records, last fresh, lag, last error, next due and why',
  usage: 'mirror status [--account <id>] [--streams] [--failed] [--json]',
  help:
    'By default one line per account and resource (its streams summed up; lag = the stalest stream), then when incremental passes ' +
    'list its streams next: the streams by reason (e.g. "unchanged 3 polls: every 2 h", "webhook-covered: full pass only") and the next few due. ' +
    '--streams shows every stream (account, resource, scope, next due and why); --failed only the failed and stalled ones. --json prints everything, ' +
    'streams included. Exits 1 when a stream failed or stalled.',
  options: { account: { type: 'string' }, streams: { type: 'boolean' }, failed: { type: 'boolean' }, json: { type: 'boolean' } },
  async run(v) {
    const services = await cliServices();
    try {
      const accountId = typeof v.account === 'string' ? await resolveAccount(services, v.account) : undefined;
      const overview = await loadOverview(services, accountId);
      // A stalled stream (its checkpoint does not move) needs the operator as a failed one does.
      const needsAttention = (s: StreamStatus) => s.state === 'failed' || s.state === 'stalled';
      const statuses = v.failed ? overview.all.filter(needsAttention) : overview.all;
      const anyFailed = overview.all.some(needsAttention);
      if (v.json) {
        console.log(JSON.stringify(asJson(overview, statuses), null, 2));
        return anyFailed ? exitCode.failed : exitCode.ok;
      }
      if (overview.accounts.length === 0) {
        console.log('No linked account yet. Link one with `npx mirror link --reference-id <your user id>`.');
        return;
      }
      const due = dueText(Date.now());
      const show = { streams: v.streams === true, failed: v.failed === true };
      if (overview.accounts.length > manyAccounts && !show.streams && !show.failed) printMany(overview);
      else for (const a of overview.accounts) printAccount(a, overview, statuses, due, show);
      if (anyFailed)
        console.log(
          `\nSome streams failed or stalled (a stalled one is tried again after its backoff): \`npx mirror status --failed\` shows them; \`npx mirror resync --account <id> --resource <name>\` runs them again.`,
        );
      return anyFailed ? exitCode.failed : exitCode.ok;
    } finally {
      await services.close();
    }
  },
};

type Services = Awaited<ReturnType<typeof cliServices>>;
type Overview = Awaited<ReturnType<typeof loadOverview>>;
type Account = Overview['accounts'][number];
type Due = (iso: string | null) => string;

/** Everything the screen shows, read at once. */
async function loadOverview(services: Services, accountId: string | undefined) {
  const [accounts, all, polling, freshness] = await Promise.all([
    accountsOverview(services.pool, { accountId }),
    streamStatuses(services.pool, { accountId }),
    pollingOverview(services.pool, { ...(accountId ? { accountId } : {}), next: 5 }),
    freshnessOverview(services.pool, freshnessSettings(services.config), accountId ? { accountId } : {}),
  ]);
  return { accounts, all, polling, freshness };
}

/** When a stream is due, as a reader wants it: "next pass" once the time has come. */
function dueText(now: number): Due {
  return (iso) => (iso === null ? '-' : Date.parse(iso) <= now ? 'next pass' : `in ${age((Date.parse(iso) - now) / 1000)}`);
}

function asJson({ accounts, polling, freshness }: Overview, statuses: StreamStatus[]) {
  const byAccount = (id: string) => statuses.filter((s) => s.accountId === id);
  return {
    generatedAt: new Date().toISOString(),
    accounts: accounts.map((a) => ({
      ...a,
      resources: summarise(byAccount(a.id)).map(withLag(byAccount(a.id))),
      polling: polling.groups.filter((g) => g.accountId === a.id),
      freshness: {
        target: freshness.accounts.find((f) => f.accountId === a.id) ?? null,
        resources: freshness.resources.filter((r) => r.accountId === a.id),
      },
      streams: byAccount(a.id),
    })),
  };
}

/** Past this many accounts, the screen shows one line per account (their detail: `--account <id>`). */
const manyAccounts = 20;

/** Many accounts: how many are in each state, then one line each, those needing attention first. */
function printMany({ accounts }: Overview): void {
  const troubled = (a: Account) => (a.states.failed ?? 0) + (a.states.stalled ?? 0);
  const count = (p: (a: Account) => boolean) => accounts.filter(p).length;
  const refused = count((a) => a.status === 'credentials_refused');
  const failing = count((a) => a.status !== 'credentials_refused' && troubled(a) > 0);
  const failedStreams = accounts.reduce((n, a) => n + troubled(a), 0);
  console.log(
    `${accounts.length} accounts: ${refused + failing} need attention (${refused} credentials refused, ${failing} with failed or stalled streams), ` +
      `${count((a) => a.status === 'linked' && troubled(a) === 0)} linked, ${count((a) => a.status === 'idle' && troubled(a) === 0)} idle, ` +
      `${count((a) => a.status === 'unlinked')} unlinked; ${failedStreams} streams failed or stalled.\n`,
  );
  console.log(
    table(
      ['account', 'source', 'status', 'reference', '>streams', '>failed', '>records', '>lag', 'last error'],
      accounts.map((a) => [
        a.id.slice(0, 8),
        a.sourceSystem,
        a.status,
        clip(a.referenceId, 24),
        `${a.states.synced ?? 0}/${a.streams}`,
        troubled(a) || '',
        a.liveRecords,
        age(a.lagSeconds),
        clip(a.statusReason ?? a.lastError, 70),
      ]),
    ),
  );
  console.log("\nOne account's resources, freshness and polling: `npx mirror status --account <id>`; every failed stream: `--failed`.");
}

function printAccount(a: Account, overview: Overview, statuses: StreamStatus[], due: Due, show: { streams: boolean; failed: boolean }): void {
  const mine = statuses.filter((s) => s.accountId === a.id);
  console.log(`\n${a.id}  ${a.sourceSystemName} (${a.sourceSystem})  ${a.status}  ref ${a.referenceId}  ${a.liveRecords} records  lag ${age(a.lagSeconds)}`);
  if (mine.length === 0) {
    console.log(show.failed ? '  no failed stream' : '  no stream yet: its first pass has not started (is a worker running?)');
    return;
  }
  if (show.streams || show.failed) {
    printStreams(mine, due);
    return;
  }
  printResources(mine);
  printFreshness(a.id, overview.freshness);
  printPolling(a.id, overview.polling, due);
}

function printStreams(mine: StreamStatus[], due: Due): void {
  console.log(
    indent(
      table(
        ['resource', 'scope', 'state', '>records', 'last fresh', '>lag', 'next due', 'why', 'last error'],
        mine.map((s) => [
          s.resource,
          clip(s.scope || '-', 48),
          s.state,
          s.liveRecords,
          s.lastFreshAt ?? 'never',
          age(s.lagSeconds),
          due(s.nextDueAt),
          clip(s.dueReason, 60),
          clip(s.lastError, 70),
        ]),
      ),
    ),
  );
}

function printResources(mine: StreamStatus[]): void {
  console.log(
    indent(
      table(
        ['resource', '>streams', 'states', '>records', 'oldest fresh', '>lag', 'last error'],
        summarise(mine)
          .map(withLag(mine))
          .map((r) => [
            r.resource,
            r.streams,
            Object.entries(r.states)
              .map(([k, n]) => `${k}:${n}`)
              .join(' '),
            r.liveRecords,
            r.oldestFreshAt ?? 'never',
            age(r.lagSeconds),
            clip(r.lastError, 70),
          ]),
      ),
    ),
  );
}

/** Freshness: per resource, how long ago its lists were verified; whether the plan meets the target. */
function printFreshness(accountId: string, freshness: Overview['freshness']): void {
  const target = freshness.accounts.find((f) => f.accountId === accountId);
  const fresh = freshness.resources.filter((r) => r.accountId === accountId);
  if (target) {
    console.log(
      `\n  Freshness (target ${age(target.targetSeconds)}): ${
        target.met
          ? 'met'
          : `missed by ${target.missingCount} of ${target.polledLists} polled lists (${target.missing.slice(0, 3).join(', ')}${target.missingCount > 3 ? ', ...' : ''}); ` +
            `would meet it: ${target.visitsPerMinuteNeeded.toFixed(1)} visits a minute` +
            (target.pollingShareNeeded !== null ? ` (SYNC_POLLING_SHARE=${target.pollingShareNeeded.toFixed(2)})` : " (more than the sync's budget)")
      }; cycle ${age(target.cycleSeconds)}, longest wait ${age(target.floorSeconds)}`,
    );
  }
  if (fresh.length > 0) {
    console.log(
      indent(
        table(
          ['resource', '>lists', '>p50', '>p95', '>max', 'within target'],
          fresh.map((r) => [r.resource, r.lists, age(r.p50), age(r.p95), age(r.max), r.met ? 'yes' : 'no']),
        ),
      ),
    );
  }
}

/** Incremental passes' polling: a few lines whatever the number of streams. */
function printPolling(accountId: string, polling: Overview['polling'], due: Due): void {
  const groups = polling.groups.filter((g) => g.accountId === accountId);
  const next = polling.next.filter((n) => n.accountId === accountId);
  console.log(`\n  Polling (when incremental passes list streams next):`);
  console.log(
    indent(
      table(
        ['>streams', 'why', 'first due'],
        groups.map((g) => [g.streams, clip(g.reason, 70), due(g.nextDueAt)]),
      ),
    ),
  );
  if (next.length > 0) {
    console.log(
      indent(
        table(
          ['next due', 'resource', 'scope', 'why'],
          next.map((n) => [due(n.nextDueAt), n.resource, clip(n.scope || '-', 48), clip(n.reason, 60)]),
        ),
      ),
    );
  }
}

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
