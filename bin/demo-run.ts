// `npm run demo`: the whole product on one machine. Starts the Temporal dev server with its UI
// (unless one answers at TEMPORAL_ADDRESS), the sandbox upstream, a worker and the API; links demo
// accounts on several source systems; runs a full sync with visible progress; then prints how to
// use the mirror. `--once` prints one JSON summary line and exits.
import { Client, Connection } from '@temporalio/client';
import { linkWithPublicToken } from '../api/link-service.ts';
import { SyncControl, type AccountSyncSummary } from '../api/sync-control.ts';
import { createLinkToken } from '../connectors/operations.ts';
import { knownProfile } from '../connectors/source-systems/index.ts';
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
  const logger = createLogger({ level: options.once ? 'warn' : config.LOG_LEVEL === 'info' ? 'warn' : config.LOG_LEVEL, name: 'demo' });

  // Temporal: reuse a server that answers, else start the dev server with its UI.
  let devServer: DevServer | undefined;
  let temporalAddress = config.TEMPORAL_ADDRESS;
  let uiUrl = config.TEMPORAL_UI_URL;
  const { host, port } = splitAddress(temporalAddress);
  if (await portOpen(host, port)) {
    say(`Temporal: using the server at ${temporalAddress}`);
  } else {
    const p = options.once ? await freePort() : port;
    devServer = await startDevServer({ port: p, uiPort: options.once ? await freePort() : p + 1000, dbFile: `${projectRoot}.data/temporal.db` });
    temporalAddress = devServer.address;
    uiUrl = devServer.uiUrl;
    say(`Temporal: started the dev server at ${temporalAddress} (UI ${uiUrl})`);
  }

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
      TEMPORAL_ADDRESS: temporalAddress,
      UPSTREAM_BASE_URL: sandbox.url,
      UPSTREAM_ASSUME_LIMITS: false,
      LOG_LEVEL: config.LOG_LEVEL === 'info' ? 'warn' : config.LOG_LEVEL,
    },
    { logger, poolSize: workerPoolSize(config) },
  );
  const worker = await startWorker(services, { maintenanceSchedule: true });
  const api = await startApi(services, { temporalAddress, ...(options.once ? { port: 0 } : {}) });
  const connection = await Connection.connect({ address: temporalAddress });
  const sync = new SyncControl(new Client({ connection, namespace: config.TEMPORAL_NAMESPACE }), config.TEMPORAL_TASK_QUEUE);

  const shutdown = async () => {
    await api.close();
    await worker.shutdown();
    await connection.close();
    await services.close();
    await sandbox.close();
    await devServer?.stop();
  };

  try {
    // Link one demo account per source system (idempotent: the same reference id keeps its account).
    const linked: { accountId: string; sourceSystem: string; accountToken: string }[] = [];
    for (const system of demoSourceSystems)
      linked.push(
        await linkDemoAccount(services, { url: sandbox.url, clientId: config.UPSTREAM_CLIENT_ID, clientSecret: config.UPSTREAM_CLIENT_SECRET }, system),
      );

    // Periodic passes as Temporal Schedules (visible, and triggerable, in the Temporal UI).
    if (!options.once)
      for (const a of linked)
        await sync.ensureSchedules(a.accountId, { incrementalMinutes: config.SYNC_INCREMENTAL_MINUTES, fullHours: config.SYNC_FULL_HOURS });

    // Full sync of every account, with progress. A demo that keeps running registers each account's
    // upstream webhooks after its pass (as linking does), and checks those of an earlier run: the
    // sandbox is new at every run and holds none of them.
    const handles = await Promise.all(
      linked.map((a) =>
        sync.start({ accountId: a.accountId, mode: 'full', concurrency: config.SYNC_STREAM_CONCURRENCY, ...(options.once ? {} : { registerWebhooks: true }) }),
      ),
    );
    const ticker = setInterval(
      () => {
        void Promise.all(handles.map((h) => sync.progress(h))).then((ps) => {
          const parts = ps.map(
            (p, i) => `${linked[i]!.sourceSystem}: ${p ? `${p.phase} ${p.streamsDone}/${p.streamsTotal} streams, ${p.records} records` : 'starting'}`,
          );
          say(`  sync  ${parts.join(' | ')}`);
        });
      },
      options.once ? 2000 : 1000,
    );
    let results: AccountSyncSummary[];
    try {
      results = await Promise.all(handles.map((h) => h.result()));
    } finally {
      clearInterval(ticker);
    }
    const records: Record<string, number> = {};
    for (const r of results) for (const [k, n] of Object.entries(r.byResource)) records[k] = (records[k] ?? 0) + n;
    const failed = results.flatMap((r) => r.failed);
    const seconds = Math.round((Date.now() - started) / 100) / 10;
    const total = Object.values(records).reduce((a, b) => a + b, 0);
    const coverage = Object.fromEntries(results.map((r, i) => [linked[i]!.sourceSystem, coverageOf(linked[i]!.sourceSystem, r.byResource)]));
    const uncovered = Object.values(coverage).reduce((n, c) => n + c.missing.length, 0);

    if (options.once) {
      console.log(
        JSON.stringify({
          accounts: linked.length,
          streams: results.reduce((a, r) => a + r.streams, 0),
          failedStreams: failed.length,
          records: total,
          recordsByResource: records,
          resourcesByAccount: coverage,
          seconds,
        }),
      );
      await shutdown();
      return failed.length === 0 && total > 0 && uncovered === 0 ? 0 : 1;
    }

    const first = linked[0]!;
    say('');
    say(
      `Mirrored ${total} records from ${linked.length} accounts in ${seconds} s${failed.length ? ` (${failed.length} streams failed: see the Temporal UI)` : ''}.`,
    );
    for (const [system, c] of Object.entries(coverage))
      say(`  ${system.padEnd(10)} ${c.mirrored}/${c.served} resources mirrored${c.missing.length ? ` (none yet: ${c.missing.join(', ')})` : ''}`);
    say('');
    say(`  Read API:     ${api.url}`);
    say(`  Client-Id:    ${config.MIRROR_CLIENT_ID}`);
    say(`  Client-Secret and account tokens: in .env.local and below (local demo credentials)`);
    say(`  Temporal UI:  ${uiUrl ?? '(your Temporal server)'}`);
    say('');
    say('Try:');
    say(
      `  curl -s ${api.url}/projects -H 'API-Version: 2021-11-21' -H 'Client-Id: ${config.MIRROR_CLIENT_ID}' -H "Client-Secret: $(grep ^MIRROR_CLIENT_SECRET= .env.local | cut -d= -f2)" -H 'Account-Token: ${first.accountToken}'`,
    );
    say('');
    say('Press Ctrl-C to stop.');
    await untilSignal();
    await shutdown();
    return 0;
  } catch (error) {
    await shutdown().catch(() => undefined);
    throw error;
  }
}
