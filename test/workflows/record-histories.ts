// `mirror record-histories --release <name>`: records the Temporal histories of representative
// workflows, run against the sandbox, into test/workflows/histories/<release>/. The replay test
// (test/unit/workflows/replay.test.ts) replays every recorded release against today's workflow code,
// so a change that alters the commands of a running workflow fails `npm test` before it ships.
// It runs what an integration test runs (test/helpers/harness.ts: the sandbox, a temporary database,
// a worker on its own task queue) against a Temporal dev server of its own, whose server suggests
// continue-as-new after a few dozen events so that the change workflow is caught across one.
import { randomUUID } from 'node:crypto';
import { existsSync, mkdirSync, readdirSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { gzipSync } from 'node:zlib';
import type { Client } from '@temporalio/client';
import type { History } from '@temporalio/common/lib/proto-utils.js';
import { asyncRequestWorkflowId, changesWorkflowId, streamWorkflowId, subscriptionWorkflowId } from '../../lib/workflow-ids.ts';
import { historiesRoot } from './replay.ts';

/** A release folder's name: a date, a version, a word (it becomes a directory). */
const releaseName = /^[A-Za-z0-9][A-Za-z0-9._-]{0,79}$/;

/**
 * History events before the dev server suggests continuing as new. The change workflow applies a
 * burst of events in about a dozen: with 60, its first run continues as new after a few bursts,
 * while a stream pass of a few slices stays in one run, as in production.
 */
const suggestContinueAsNewAfter = 60;

/** Entry point (`mirror record-histories` starts it): the options, checked, then the recording. */
async function main(): Promise<number> {
  const usage = (message: string) => {
    console.error(`mirror record-histories: ${message}`);
    return 2;
  };
  const { values: v } = parseArgs({ options: { release: { type: 'string' }, size: { type: 'string' }, force: { type: 'boolean' } } });
  const release = typeof v.release === 'string' ? v.release : '';
  if (!releaseName.test(release))
    return usage(
      '--release needs a name for the folder of this release\'s histories: letters, digits, ".", "-" or "_" (e.g. --release 2026-11-25 or --release 0.2.0).',
    );
  const size = v.size === undefined ? 12 : Number(v.size);
  if (!Number.isInteger(size) || size < 2 || size > 200) return usage("--size is the sandbox's list size: an integer from 2 to 200.");
  const dir = join(historiesRoot, release);
  if (existsSync(dir) && readdirSync(dir).length > 0 && !v.force) {
    return usage(`${dir} already holds histories: a release's histories are recorded once (pass --force to record them again).`);
  }
  const written = await recordHistories(dir, { size, log: (line) => console.error(line) });
  console.log(`mirror record-histories: ${written.length} histories in ${dir}`);
  for (const f of written) console.log(`  ${f}`);
  return 0;
}

interface Recorded {
  name: string;
  json: string;
}

async function recordHistories(dir: string, options: { size: number; log: (line: string) => void }): Promise<string[]> {
  // Loaded here: the protobuf definitions are heavy for every other command of the CLI.
  const { historyToJSON } = await import('@temporalio/common/lib/proto-utils.js');
  const { freePort } = await import('../../bin/test-runner.ts');
  const { startDevServer } = await import('../../bin/temporal-cli.ts');
  const temporal = await startDevServer({
    port: await freePort(),
    headless: true,
    dynamicConfig: { 'limit.historyCount.suggestContinueAsNew': suggestContinueAsNewAfter },
  });
  // The harness takes the dev server it is given (test/helpers/temporal.ts).
  process.env.TEMPORAL_TEST_ADDRESS = temporal.address;
  process.env.LOG_LEVEL ??= 'silent';
  const { eventually, sandboxAdmin, startHarness, upstreamAll } = await import('../helpers/harness.ts');
  // 600 customers: three pages of GraphLedger's 250 (several slices) and two of the SQL ERP's 500 (two async requests).
  const h = await startHarness({ sandbox: { size: options.size, sizes: { customers: 600 } } });
  const hook = await subscriber();
  const out: Recorded[] = [];
  const secrets: string[] = [h.upstreamHeaders['client-secret']!, h.clientHeaders['client-secret']!];
  try {
    const client = h.temporal;
    const record = async (name: string, workflowId: string, runId?: string) => {
      for (const run of await runsOf(client, workflowId, runId))
        out.push({ name: run.index === undefined ? name : `${name}-${run.index}`, json: historyToJSON(run.history) });
    };
    const pass = async (accountId: string, mode: 'full' | 'incremental', first = false) => {
      const handle = first ? await h.sync.onLinked(accountId) : await h.sync.start({ accountId, mode });
      const result = await handle.result();
      if (result.failed.length > 0) throw new Error(`a ${mode} pass failed: ${JSON.stringify(result.failed)}`);
      // The pass's own run: a later pass of the account runs under the same workflow id.
      return { workflowId: handle.workflowId, runId: (await handle.describe()).runId };
    };

    const linked: Record<string, { accountId: string; accountToken: string }> = {};
    for (const system of ['buildpro', 'graphledger']) {
      options.log(`record-histories: ${system} full and incremental passes`);
      const { accountId, accountToken } = (linked[system] = await h.link(system, `record-${system}`));
      secrets.push(accountToken);
      const full = await pass(accountId, 'full', true);
      await record(`account-sync-${system}-full`, full.workflowId, full.runId);
      const incremental = await pass(accountId, 'incremental');
      await record(`account-sync-${system}-incremental`, incremental.workflowId, incremental.runId);
      if (system === 'graphledger') {
        options.log('record-histories: a stream pass of several slices');
        const workflowId = `record-slices:${randomUUID()}`;
        const handle = await client.workflow.start('streamSyncWorkflow', {
          taskQueue: h.taskQueue,
          workflowId,
          args: [{ accountId, resource: 'customers', scope: '', path: '/customers', passKey: randomUUID(), mode: 'full', maxPages: 1 }],
        });
        await handle.result();
        await record('stream-sync-slices', workflowId, handle.firstExecutionRunId);
      }
    }

    options.log('record-histories: a stream of async pages (SQL ERP)');
    const erp = await h.link('sqlerp', 'record-sqlerp');
    secrets.push(erp.accountToken);
    const erpPass = await h.sync.start({ accountId: erp.accountId, mode: 'full', resource: 'customers' });
    const erpResult = await erpPass.result();
    if (erpResult.failed.length > 0) throw new Error(`the SQL ERP pass failed: ${JSON.stringify(erpResult.failed)}`);
    await record('stream-sync-async-pages', streamWorkflowId(erp.accountId, 'customers', ''));

    // The change workflow and the deliveries: webhook events of the BuildPro account (registered by its first pass).
    const { accountId, accountToken } = linked.buildpro!;
    const headers = { ...h.clientHeaders, 'account-token': accountToken };
    const created = await h.app.inject({
      method: 'POST',
      url: '/webhooks',
      headers,
      payload: { callback_url: hook.url, authorization_header: 'Bearer record', event: 'UPDATE', type: 'vendor' },
    });
    if (created.statusCode !== 201) throw new Error(`creating a subscription failed: ${created.statusCode} ${created.body}`);
    const subscription = created.json<{ id: string }>();
    const vendors = await upstreamAll(h, '/vendors', { 'account-token': accountToken });
    const changes = client.workflow.getHandle(changesWorkflowId(accountId));
    options.log('record-histories: the change workflow across a continue-as-new, a delivery');
    let firstRun: string | undefined;
    for (let i = 0; i < 40; i++) {
      const vendor = vendors[i % vendors.length]!;
      const name = `Renamed ${i} for the histories`;
      await sandboxAdmin(h, 'PATCH', '/_admin/objects', { account_token: accountToken, resource: 'vendors', id: vendor.id, patch: { name } });
      await eventually(`update ${i} delivered`, async () => (hook.received.some((r) => r.includes(name)) ? true : undefined), 60_000, 50);
      const described = await changes.describe();
      firstRun ??= described.runId;
      // Two events into the second run, then stop.
      if (described.runId !== firstRun && (await client.workflow.getHandle(changes.workflowId, described.runId).fetchHistory()).events!.length > 15) break;
    }
    const latest = await changes.describe();
    if (!firstRun || latest.runId === firstRun) throw new Error('the change workflow did not continue as new within 40 events');
    await record('account-changes-continue-as-new', changes.workflowId, firstRun);
    const removed = await h.app.inject({ method: 'DELETE', url: `/webhooks/${subscription.id}`, headers });
    if (removed.statusCode !== 200) throw new Error(`deleting the subscription failed: ${removed.statusCode} ${removed.body}`);
    const delivery = client.workflow.getHandle(subscriptionWorkflowId(subscription.id));
    await delivery.result().catch(() => undefined);
    await record('subscription-delivery', delivery.workflowId, (await delivery.describe()).raw.workflowExecutionInfo?.firstRunId ?? undefined);

    options.log('record-histories: an async request');
    const accepted = await h.app.inject({ method: 'GET', url: '/vendors?per_page=5', headers: { ...headers, 'async-request': 'true' } });
    const requestId = String(accepted.headers['svc-async-request-id'] ?? '');
    if (accepted.statusCode !== 202 || !requestId) throw new Error(`the async request was not accepted: ${accepted.statusCode} ${accepted.body}`);
    await client.workflow.getHandle(asyncRequestWorkflowId(requestId)).result();
    await record('async-request', asyncRequestWorkflowId(requestId));
  } finally {
    await new Promise((r) => hook.server.close(r));
    await h.close();
    await temporal.stop();
  }

  // A history holds workflow and activity inputs and results: none of them may carry a credential.
  for (const r of out) {
    const text = `${r.json}\n${decodedPayloads(r.json)}`;
    if (secrets.some((s) => s && text.includes(s))) throw new Error(`the history ${r.name} holds a credential: nothing was written`);
  }
  mkdirSync(dir, { recursive: true });
  return out.map((r) => {
    const file = `${r.name}.json.gz`;
    writeFileSync(join(dir, file), gzipSync(r.json));
    return file;
  });
}

/**
 * The runs of a workflow from `runId` (the latest run without one), following continue-as-new,
 * numbered from 1 when there are several. Of a long chain (a busy delivery loop continues as new
 * every few dozen events here) the first two and the last are kept: a run started fresh, one
 * started by continue-as-new, and the end; the runs between replay the same way.
 */
async function runsOf(client: Client, workflowId: string, runId?: string): Promise<{ index?: number; history: History }[]> {
  const runs: History[] = [];
  let next: string | undefined = runId;
  while (runs.length < 100) {
    const history = await client.workflow.getHandle(workflowId, next).fetchHistory();
    runs.push(history);
    const last = history.events?.at(-1);
    next = last?.workflowExecutionContinuedAsNewEventAttributes?.newExecutionRunId ?? undefined;
    if (!next) break;
  }
  if (runs.length === 1) return [{ history: runs[0]! }];
  return runs.map((history, i) => ({ index: i + 1, history })).filter((r) => r.index <= 2 || r.index === runs.length);
}

/** The JSON payloads' data of a history, decoded, for the credential check. */
function decodedPayloads(json: string): string {
  return [...json.matchAll(/"data":\s*"([A-Za-z0-9+/=]+)"/g)].map((m) => Buffer.from(m[1]!, 'base64').toString('utf8')).join('\n');
}

/** A subscriber that answers 200 to every delivery and keeps the bodies. */
function subscriber(): Promise<{ server: Server; url: string; received: string[] }> {
  const received: string[] = [];
  const server = createServer((req, res) => {
    let data = '';
    req.on('data', (c: Buffer) => (data += c.toString()));
    req.on('end', () => {
      received.push(data);
      res.writeHead(200).end();
    });
  });
  return new Promise((resolve) =>
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as { port: number };
      resolve({ server, url: `http://127.0.0.1:${port}/hook`, received });
    }),
  );
}

process.exitCode = await main();
