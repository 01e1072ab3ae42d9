// `npm run demo`: the whole product on one machine. Starts the Temporal dev server with its UI
// (unless one answers at TEMPORAL_ADDRESS), the sandbox upstream, a worker and the API; links demo
// accounts on several source systems; runs a full sync with visible progress; then prints how to
// use the mirror. `--once` prints one JSON summary line and exits.
import { Client, Connection } from '@temporalio/client';
import { linkWithPublicToken } from '../api/link-service.ts';
import { SyncControl, type AccountSyncSummary } from '../api/sync-control.ts';
import { createLinkToken } from '../connectors/operations.ts';
import { knownProfile } from '../connectors/source-systems/index.ts';
import { incrementalMinutes, type Config } from '../lib/config.ts';
import { createLogger } from '../lib/logger.ts';
import { startSandbox } from '../sandbox/server.ts';
import { startApi } from './api-server.ts';
import { createServices, type Services } from './services.ts';
import { projectRoot, setup } from './setup-steps.ts';
import { portOpen, splitAddress, startDevServer, type DevServer } from './temporal-cli.ts';
import { freePort } from './test-runner.ts';
import { untilSignal } from './signals.ts';
import { startWorker, workerPoolSize } from './temporal-worker.ts';

export const demoSourceSystems = ['buildpro', 'sqlerp', 'crmcloud', 'fieldops'] as const;

/**
 * Per linked account: how many resources its source system serves (the mirror's profile of it),
 * how many the pass mirrored records of, and which it mirrored none of (the demo mirrors
 * records of every resource it links).
 */
export function coverageOf(sourceSystem: string, byResource: Readonly<Record<string, number>>): { served: number; mirrored: number; missing: string[] } {
  const served = Object.keys(knownProfile(sourceSystem)?.resources ?? {});
  const missing = served.filter((r) => (byResource[r] ?? 0) === 0);
  return { served: served.length, mirrored: served.length - missing.length, missing };
}

/**
 * Links the demo account of one source system on the sandbox (idempotent: the same reference id
 * keeps its account): a Link token, the sandbox's public token for the system, the exchange.
 */
export async function linkDemoAccount(
  services: Pick<Services, 'upstream' | 'accounts'>,
  sandbox: { url: string; clientId: string; clientSecret: string },
  system: string,
): Promise<{ accountId: string; sourceSystem: string; accountToken: string }> {
  const linkToken = await createLinkToken(services.upstream, `demo-${system}`);
  const res = await fetch(`${sandbox.url}/_admin/link/public-token`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'api-version': '2021-11-21', 'client-id': sandbox.clientId, 'client-secret': sandbox.clientSecret },
    body: JSON.stringify({ link_token: linkToken, source_system: system }),
  });
  if (!res.ok) throw new Error(`The sandbox refused to mint a public token for ${system}: ${res.status}`);
  const { public_token } = (await res.json()) as { public_token: string };
  const { account, linked } = await linkWithPublicToken({ upstream: services.upstream, accounts: services.accounts }, public_token);
  return { accountId: account.id, sourceSystem: system, accountToken: linked.account_token };
}

export async function runDemo(options: { once: boolean; size?: number }): Promise<number> {
  const started = Date.now();
  const say = (line: string) => console.error(line);
  const { config } = await setup({ log: say });
  const stack = await startStack(config, options, say);
  try {
    const upstream = { url: stack.sandbox.url, clientId: config.UPSTREAM_CLIENT_ID, clientSecret: config.UPSTREAM_CLIENT_SECRET };
    // Link one demo account per source system (idempotent: the same reference id keeps its account).
    const linked: LinkedDemoAccount[] = [];
    for (const system of demoSourceSystems) linked.push(await linkDemoAccount(stack.services, upstream, system));
    // Periodic passes as Temporal Schedules (visible, and triggerable, in the Temporal UI).
    if (!options.once)
      for (const a of linked)
        await stack.sync.ensureSchedules(a.accountId, { incrementalMinutes: incrementalMinutes(config), fullHours: config.SYNC_FULL_HOURS });
    // A demo that keeps running registers each account's upstream webhooks after its pass (as linking
    // does), and checks those of an earlier run: the sandbox is new at every run and holds none of them.
    const pass = { concurrency: config.SYNC_STREAM_CONCURRENCY, ...(options.once ? {} : { registerWebhooks: true }) };
    const results = await syncWithProgress(stack.sync, linked, pass, options.once ? 2000 : 1000, say);
    const outcome = outcomeOf(linked, results, Date.now() - started);
    if (options.once) {
      console.log(JSON.stringify(outcome.summary));
      await stack.shutdown();
      return outcome.failed === 0 && outcome.summary.records > 0 && outcome.uncovered === 0 ? 0 : 1;
    }
    printWelcome(config, stack, linked[0]!, outcome, say);
    await untilSignal();
    await stack.shutdown();
    return 0;
  } catch (error) {
    await stack.shutdown().catch(() => undefined);
    throw error;
  }
}

type LinkedDemoAccount = Awaited<ReturnType<typeof linkDemoAccount>>;
type Stack = Awaited<ReturnType<typeof startStack>>;
type Outcome = ReturnType<typeof outcomeOf>;

/** Temporal (a server that answers, else the dev server with its UI), the sandbox, a worker and the API; and how to stop them. */
async function startStack(config: Config, options: { once: boolean; size?: number }, say: (line: string) => void) {
  const logger = createLogger({ level: options.once ? 'warn' : config.LOG_LEVEL === 'info' ? 'warn' : config.LOG_LEVEL, name: 'demo' });
  const temporal = await temporalServer(config, options.once, say);
  const sandbox = await startSandbox({
    port: options.once ? 0 : config.SANDBOX_PORT,
    seed: 1,
    clientId: config.UPSTREAM_CLIENT_ID,
    clientSecret: config.UPSTREAM_CLIENT_SECRET,
    ...(options.size ? { size: options.size } : {}),
    rateLimits: false,
    logger: false,
  });
  say(`Sandbox upstream: ${sandbox.url}`);
  const services = createServices(
    {
      ...config,
      TEMPORAL_ADDRESS: temporal.address,
      UPSTREAM_BASE_URL: sandbox.url,
      UPSTREAM_ASSUME_LIMITS: false,
      LOG_LEVEL: config.LOG_LEVEL === 'info' ? 'warn' : config.LOG_LEVEL,
    },
    { logger, poolSize: workerPoolSize(config) },
  );
  const worker = await startWorker(services, { maintenanceSchedule: true });
  const api = await startApi(services, { temporalAddress: temporal.address, ...(options.once ? { port: 0 } : {}) });
  const connection = await Connection.connect({ address: temporal.address });
  const sync = new SyncControl(new Client({ connection, namespace: config.TEMPORAL_NAMESPACE }), config.TEMPORAL_TASK_QUEUE);
  return {
    sandbox,
    services,
    api,
    sync,
    uiUrl: temporal.uiUrl,
    async shutdown() {
      await api.close();
      await worker.shutdown();
      await connection.close();
      await services.close();
      await sandbox.close();
      await temporal.devServer?.stop();
    },
  };
}

/** Temporal: reuse a server that answers, else start the dev server with its UI. */
async function temporalServer(
  config: Config,
  once: boolean,
  say: (line: string) => void,
): Promise<{ address: string; uiUrl: string | undefined; devServer?: DevServer }> {
  const { host, port } = splitAddress(config.TEMPORAL_ADDRESS);
  if (await portOpen(host, port)) {
    say(`Temporal: using the server at ${config.TEMPORAL_ADDRESS}`);
    return { address: config.TEMPORAL_ADDRESS, uiUrl: config.TEMPORAL_UI_URL };
  }
  const p = once ? await freePort() : port;
  const devServer = await startDevServer({ port: p, uiPort: once ? await freePort() : p + 1000, dbFile: `${projectRoot}.data/temporal.db` });
  say(`Temporal: started the dev server at ${devServer.address} (UI ${devServer.uiUrl})`);
  return { address: devServer.address, uiUrl: devServer.uiUrl, devServer };
}

/** A full pass of every account, its progress said every `everyMs`. */
async function syncWithProgress(
  sync: SyncControl,
  linked: readonly LinkedDemoAccount[],
  pass: { concurrency: number; registerWebhooks?: boolean },
  everyMs: number,
  say: (line: string) => void,
): Promise<AccountSyncSummary[]> {
  const handles = await Promise.all(linked.map((a) => sync.start({ accountId: a.accountId, mode: 'full', ...pass })));
  const ticker = setInterval(() => {
    void Promise.all(handles.map((h) => sync.progress(h))).then((ps) => {
      const parts = ps.map(
        (p, i) => `${linked[i]!.sourceSystem}: ${p ? `${p.phase} ${p.streamsDone}/${p.streamsTotal} streams, ${p.records} records` : 'starting'}`,
      );
      say(`  sync  ${parts.join(' | ')}`);
    });
  }, everyMs);
  try {
    return await Promise.all(handles.map((h) => h.result()));
  } finally {
    clearInterval(ticker);
  }
}

/** What the passes mirrored: the summary line of `--once`, failed streams and resources with no record. */
function outcomeOf(linked: readonly LinkedDemoAccount[], results: readonly AccountSyncSummary[], elapsedMs: number) {
  const records: Record<string, number> = {};
  for (const r of results) for (const [k, n] of Object.entries(r.byResource)) records[k] = (records[k] ?? 0) + n;
  const failed = results.flatMap((r) => r.failed).length;
  const coverage = Object.fromEntries(results.map((r, i) => [linked[i]!.sourceSystem, coverageOf(linked[i]!.sourceSystem, r.byResource)]));
  return {
    summary: {
      accounts: linked.length,
      streams: results.reduce((a, r) => a + r.streams, 0),
      failedStreams: failed,
      records: Object.values(records).reduce((a, b) => a + b, 0),
      recordsByResource: records,
      resourcesByAccount: coverage,
      seconds: Math.round(elapsedMs / 100) / 10,
    },
    failed,
    uncovered: Object.values(coverage).reduce((n, c) => n + c.missing.length, 0),
  };
}

/** What was mirrored, where everything runs, and a first request to try. */
function printWelcome(config: Config, stack: Stack, first: LinkedDemoAccount, outcome: Outcome, say: (line: string) => void): void {
  const { summary, failed } = outcome;
  say('');
  say(
    `Mirrored ${summary.records} records from ${summary.accounts} accounts in ${summary.seconds} s${failed ? ` (${failed} streams failed: see the Temporal UI)` : ''}.`,
  );
  for (const [system, c] of Object.entries(summary.resourcesByAccount))
    say(`  ${system.padEnd(10)} ${c.mirrored}/${c.served} resources mirrored${c.missing.length ? ` (none yet: ${c.missing.join(', ')})` : ''}`);
  say('');
  say(`  Read API:     ${stack.api.url}`);
  say(`  Client-Id:    ${config.MIRROR_CLIENT_ID}`);
  say(`  Client-Secret and account tokens: in .env.local and below (local demo credentials)`);
  say(`  Temporal UI:  ${stack.uiUrl ?? '(your Temporal server)'}`);
  say('');
  say('Try:');
  say(
    `  curl -s ${stack.api.url}/projects -H 'API-Version: 2021-11-21' -H 'Client-Id: ${config.MIRROR_CLIENT_ID}' -H "Client-Secret: $(grep ^MIRROR_CLIENT_SECRET= .env.local | cut -d= -f2)" -H 'Account-Token: ${first.accountToken}'`,
  );
  say('');
  say('Press Ctrl-C to stop.');
}
