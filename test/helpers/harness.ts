// A whole mirror for an integration test: its own database, the sandbox upstream on a free port, a
// worker on its own task queue against the real Temporal dev server, and the API app (inject()).
import { randomBytes, randomUUID } from 'node:crypto';
import { Client, Connection } from '@temporalio/client';
import type { FastifyInstance } from 'fastify';
import { buildApp } from '../../api/app.ts';
import { upsertApiClient } from '../../api/auth.ts';
import { SyncControl } from '../../api/sync-control.ts';
import { readRouter, releaseCallContext } from '../../bin/api-server.ts';
import { createServices, upstreamTarget, type Services } from '../../bin/services.ts';
import { startWorker, workerPoolSize, type WorkerHandle } from '../../bin/temporal-worker.ts';
import { createLinkToken } from '../../connectors/operations.ts';
import { parseConfig } from '../../lib/config.ts';
import { generateKey, randomSecret } from '../../lib/crypto.ts';
import { createLogger } from '../../lib/logger.ts';
import { startSandbox, type Sandbox, type SandboxOptions } from '../../sandbox/server.ts';
import { linkWithPublicToken } from '../../api/link-service.ts';
import { createTestDatabase, type TestDatabase } from './database.ts';
import type { ReadRouter } from '../../mirror/reads/read-router.ts';
import { temporalForTests } from './temporal.ts';

export interface Harness {
  services: Services;
  sandbox: Sandbox;
  db: TestDatabase;
  worker: WorkerHandle;
  temporal: Client;
  sync: SyncControl;
  /** Where the API's reads go (DATABASE_REPLICA_URLS in `config`); the primary alone by default. */
  reads: ReadRouter;
  app: FastifyInstance;
  /** The API's base URL (it listens on a free port, so the upstream can deliver webhooks to it). */
  apiUrl: string;
  taskQueue: string;
  clientHeaders: Record<string, string>;
  upstreamHeaders: Record<string, string>;
  /** Links an account on the sandbox for a source system and registers it (no sync started). */
  link(sourceSystem: string, referenceId?: string): Promise<{ accountId: string; accountToken: string }>;
  close(): Promise<void>;
}

export async function startHarness(
  options: {
    sandbox?: Partial<SandboxOptions>;
    /** The database to use (e.g. the primary of test/helpers/replica-cluster.ts); a fresh one on the test server by default. It is dropped by close(). */
    db?: TestDatabase;
    /** Settings beside the harness's own (e.g. MIRROR_SYNC_BUDGET_SHARE). */ config?: Record<string, string>;
  } = {},
): Promise<Harness> {
  const db = options.db ?? (await createTestDatabase());
  const upstreamId = randomUUID();
  const upstreamSecret = randomSecret(40);
  const sandbox = await startSandbox({
    port: 0,
    seed: 7,
    clientId: upstreamId,
    clientSecret: upstreamSecret,
    rateLimits: false,
    logger: false,
    ...options.sandbox,
  });
  const temporalServer = await temporalForTests();
  const config = parseConfig({
    DATABASE_URL: db.url,
    TEMPORAL_ADDRESS: temporalServer.address,
    TEMPORAL_TASK_QUEUE: `test-${randomBytes(4).toString('hex')}`,
    UPSTREAM_BASE_URL: sandbox.url,
    UPSTREAM_CLIENT_ID: upstreamId,
    UPSTREAM_CLIENT_SECRET: upstreamSecret,
    MIRROR_CLIENT_ID: randomUUID(),
    MIRROR_CLIENT_SECRET: randomSecret(40),
    MIRROR_ENCRYPTION_KEY: generateKey(),
    MIRROR_SIGNING_KEY: generateKey(),
    LOG_LEVEL: process.env.LOG_LEVEL ?? 'silent',
    // Without the sandbox's limits there are no headers: pace only to what it reports.
    UPSTREAM_ASSUME_LIMITS: options.sandbox?.rateLimits ? 'true' : 'false',
    // Tests' subscribers listen on loopback: allowed here, as an operator would allow an internal receiver.
    MIRROR_CALLBACK_ALLOW: '127.0.0.1',
    // The contract's resources only, unless a test asks for the real catalog (`MIRROR_RESOURCES: '*'`):
    // a full pass of BuildPro or SQL ERP lists 18-30 more resources, which the catalog's own tests cover.
    MIRROR_RESOURCES: 'contract',
    ...options.config,
  });
  const logger = createLogger({ level: config.LOG_LEVEL });
  const services = createServices(config, { logger, poolSize: workerPoolSize(config) });
  await upsertApiClient(services.prisma, config.MIRROR_CLIENT_ID, config.MIRROR_CLIENT_SECRET);
  const connection = await Connection.connect({ address: config.TEMPORAL_ADDRESS });
  // As the API process does (bin/api-server.ts): its calls' context released once they have started.
  releaseCallContext(connection);
  const temporal = new Client({ connection, namespace: config.TEMPORAL_NAMESPACE });
  const sync = new SyncControl(temporal, config.TEMPORAL_TASK_QUEUE);
  const reads = readRouter(services);
  await reads.start();
  const app = await buildApp({
    pool: services.pool,
    reads,
    prisma: services.prisma,
    accounts: services.accounts,
    logger,
    upstream: { client: services.upstream, target: upstreamTarget(config) },
    sync,
    hashKey: services.keys.signingKey,
    encryptionKey: services.keys.encryptionKey,
    callbacks: { allow: config.MIRROR_CALLBACK_ALLOW },
    indexedFields: config.MIRROR_INDEXED_FIELDS,
  });
  const apiUrl = (await app.listen({ port: 0, host: '127.0.0.1' })).replace('localhost', '127.0.0.1');
  const worker = await startWorker(services, { publicBaseUrl: apiUrl });
  const upstreamHeaders = { 'api-version': '2021-11-21', 'client-id': upstreamId, 'client-secret': upstreamSecret };
  const harness: Harness = {
    services,
    sandbox,
    db,
    worker,
    temporal,
    sync,
    reads,
    app,
    apiUrl,
    taskQueue: config.TEMPORAL_TASK_QUEUE,
    clientHeaders: { 'api-version': '2021-11-21', 'client-id': config.MIRROR_CLIENT_ID, 'client-secret': config.MIRROR_CLIENT_SECRET },
    upstreamHeaders,
    async link(sourceSystem, referenceId = `ref-${sourceSystem}`) {
      const linkToken = await createLinkToken(services.upstream, referenceId);
      const res = await fetch(`${sandbox.url}/_admin/link/public-token`, {
        method: 'POST',
        headers: { ...upstreamHeaders, 'content-type': 'application/json' },
        body: JSON.stringify({ link_token: linkToken, source_system: sourceSystem }),
      });
      if (!res.ok) throw new Error(`minting a public token failed: ${res.status} ${await res.text()}`);
      const { public_token } = (await res.json()) as { public_token: string };
      const { account, linked } = await linkWithPublicToken({ upstream: services.upstream, accounts: services.accounts }, public_token);
      return { accountId: account.id, accountToken: linked.account_token };
    },
    async close() {
      await app.close();
      // A test may have replaced the worker (to restart it): stop the current one.
      await harness.worker.shutdown();
      await connection.close();
      await services.close();
      await sandbox.close();
      await temporalServer.stop();
      await db.drop();
    },
  };
  return harness;
}

/** What a mirror CLI process (`node bin/mirror.js <command>`) needs to reach this harness's database, Temporal, upstream and keys. */
export function cliEnv(h: Harness): Record<string, string> {
  const c = h.services.config;
  return {
    DATABASE_URL: c.DATABASE_URL,
    TEMPORAL_ADDRESS: c.TEMPORAL_ADDRESS,
    TEMPORAL_TASK_QUEUE: c.TEMPORAL_TASK_QUEUE,
    UPSTREAM_BASE_URL: c.UPSTREAM_BASE_URL,
    UPSTREAM_CLIENT_ID: c.UPSTREAM_CLIENT_ID,
    UPSTREAM_CLIENT_SECRET: c.UPSTREAM_CLIENT_SECRET,
    MIRROR_CLIENT_ID: c.MIRROR_CLIENT_ID,
    MIRROR_CLIENT_SECRET: c.MIRROR_CLIENT_SECRET,
    MIRROR_ENCRYPTION_KEY: c.MIRROR_ENCRYPTION_KEY,
    MIRROR_SIGNING_KEY: c.MIRROR_SIGNING_KEY,
  };
}

/** Links an account and runs its first full pass to the end; throws if any stream failed. */
export async function linkAndSync(h: Harness, sourceSystem: string, referenceId?: string): Promise<{ accountId: string; accountToken: string }> {
  const linked = await h.link(sourceSystem, referenceId);
  const result = await (await h.sync.start({ accountId: linked.accountId, mode: 'full' })).result();
  if (result.failed.length > 0) throw new Error(`the first pass of ${sourceSystem} failed: ${JSON.stringify(result.failed)}`);
  return linked;
}

/** The id of an account's first mirrored project (upstream order). */
export async function firstProjectId(h: Harness, accountId: string): Promise<string> {
  const { rows } = await h.services.pool.query<{ id: string }>(
    `SELECT id FROM records WHERE account_id = $1 AND resource = 'projects' ORDER BY ordinal LIMIT 1`,
    [accountId],
  );
  if (!rows[0]) throw new Error(`account ${accountId} has no mirrored project`);
  return rows[0].id;
}

/** Every page of a list from the sandbox, as the upstream serves it. */
export async function upstreamAll(h: Harness, path: string, headers: Record<string, string>, perPage = 1000): Promise<Record<string, unknown>[]> {
  const out: Record<string, unknown>[] = [];
  for (let page = 1; page < 10_000; page++) {
    const sep = path.includes('?') ? '&' : '?';
    const res = await fetch(`${h.sandbox.url}${path}${sep}page=${page}&per_page=${perPage}`, { headers: { ...h.upstreamHeaders, ...headers } });
    if (!res.ok) throw new Error(`sandbox ${path} page ${page}: ${res.status} ${await res.text()}`);
    const body = (await res.json()) as { data: Record<string, unknown>[]; meta: { has_more_results: boolean | null } };
    out.push(...body.data);
    const more = body.meta.has_more_results;
    if (more === false || body.data.length === 0 || (more === null && body.data.length < perPage)) break;
  }
  return out;
}

/** Calls the sandbox's admin API. */
export async function sandboxAdmin<T = unknown>(h: Harness, method: string, path: string, body?: unknown): Promise<T> {
  const res = await fetch(`${h.sandbox.url}${path}`, {
    method,
    headers: { ...h.upstreamHeaders, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await res.text();
  if (!res.ok) throw new Error(`sandbox ${method} ${path}: ${res.status} ${text}`);
  return (text ? JSON.parse(text) : undefined) as T;
}

/** Polls `fn` until it returns a value other than undefined, or fails after `timeoutMs`. */
export async function eventually<T>(what: string, fn: () => Promise<T | undefined>, timeoutMs = 30_000, everyMs = 100): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  let last: unknown;
  for (;;) {
    try {
      const v = await fn();
      if (v !== undefined) return v;
    } catch (error) {
      last = error;
    }
    if (Date.now() > deadline)
      throw new Error(`timed out waiting for ${what}${last ? `: ${last instanceof Error ? last.message : JSON.stringify(last)}` : ''}`);
    await new Promise((r) => setTimeout(r, everyMs));
  }
}
