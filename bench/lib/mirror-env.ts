// A whole mirror for one benchmark scenario: its own database (created, migrated, dropped), the
// sandbox upstream in this process, Temporal workers as separate processes (`mirror worker`, so their
// memory can be read) on their own task queue, optionally the read API as a process, and the
// services this process needs to link accounts and start syncs.
import { randomBytes, randomUUID } from 'node:crypto';
import { hostname } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import type { Client } from '@temporalio/client';
import { upsertApiClient } from '../../api/auth.ts';
import { linkWithPublicToken } from '../../api/link-service.ts';
import { SyncControl } from '../../api/sync-control.ts';
import { createServices, type Services } from '../../bin/services.ts';
import { freePort } from '../../bin/test-runner.ts';
import { createLinkToken } from '../../connectors/operations.ts';
import { parseConfig, type Config } from '../../lib/config.ts';
import { generateKey, randomSecret } from '../../lib/crypto.ts';
import { createLogger } from '../../lib/logger.ts';
import { dropDatabase, ensureDatabase, withDatabase } from '../../mirror/db/database.ts';
import { migrate } from '../../mirror/db/migrate.ts';
import { startSandbox, type Sandbox, type SandboxOptions } from '../../sandbox/server.ts';
import { apiProcessSettings, workerProcessSettings } from '../../bin/worker-relaunch.js';
import { benchNodeArgs, logTail, spawnNode, type Child } from './processes.ts';

/** The Postgres server the benchmark makes its databases on. */
export const serverUrl = process.env.BENCH_DATABASE_URL ?? process.env.TEST_DATABASE_URL ?? 'postgresql://postgres@127.0.0.1:5432/postgres';

export interface BenchShared {
  temporalAddress: string;
  temporal: Client;
  logDir: string;
}

export interface MirrorEnvOptions {
  name: string;
  sandbox: Partial<SandboxOptions>;
  /** Pace to published limits before the upstream's headers say (false for a sandbox without limits). */
  assumeLimits: boolean;
  /** Start the read API as a process too (webhooks need it: the sandbox delivers to it). */
  api?: boolean;
  /** Settings of every mirror process of this setup beside the bench's own (e.g. MIRROR_SYNC_BUDGET_SHARE). */
  env?: Record<string, string>;
  /** A database the scenario made (a test cluster's primary): migrated here, left in place at the end. */
  databaseUrl?: string;
}

export interface Linked {
  accountId: string;
  accountToken: string;
}

export interface WorkerSet {
  taskQueue: string;
  sync: SyncControl;
  children: Child[];
  stop(): Promise<void>;
}

export class MirrorEnv {
  readonly upstreamId = randomUUID();
  readonly upstreamSecret = randomSecret(40);
  readonly mirrorClientId = randomUUID();
  readonly mirrorClientSecret = randomSecret(40);
  readonly encryptionKey = generateKey();
  readonly signingKey = generateKey();
  readonly databaseUrl: string;
  /** The task queue of this env's API and (by default) its workers. */
  readonly taskQueue: string;
  sandbox!: Sandbox;
  services!: Services;
  config!: Config;
  api: { url: string; child: Child } | undefined;
  private apiPort = 0;
  private readonly workerSets: WorkerSet[] = [];
  private dbCreated = false;

  private constructor(
    readonly shared: BenchShared,
    readonly options: MirrorEnvOptions,
  ) {
    const tag = `${options.name.replace(/\W/g, '_')}_${process.pid}_${randomBytes(3).toString('hex')}`;
    this.databaseUrl = options.databaseUrl ?? withDatabase(serverUrl, `mirror_bench_${tag}`);
    this.taskQueue = `bench-${tag}`;
  }

  static async start(shared: BenchShared, options: MirrorEnvOptions): Promise<MirrorEnv> {
    const env = new MirrorEnv(shared, options);
    try {
      await env.init();
      return env;
    } catch (error) {
      await env.close();
      throw error;
    }
  }

  private async init(): Promise<void> {
    await ensureDatabase(this.databaseUrl);
    this.dbCreated = this.options.databaseUrl === undefined;
    await migrate(this.databaseUrl);
    this.sandbox = await startSandbox({
      port: 0,
      seed: 1,
      clientId: this.upstreamId,
      clientSecret: this.upstreamSecret,
      rateLimits: false,
      logger: false,
      ...this.options.sandbox,
    });
    this.apiPort = this.options.api ? await freePort() : 0;
    this.config = parseConfig(this.childEnv(this.taskQueue));
    this.services = createServices(this.config, { logger: createLogger({ level: 'silent' }), name: 'bench' });
    await upsertApiClient(this.services.prisma, this.mirrorClientId, this.mirrorClientSecret);
    if (this.options.api) await this.startApi();
  }

  /** The environment of a mirror process of this setup. */
  childEnv(taskQueue: string): Record<string, string> {
    const env: Record<string, string> = {
      DATABASE_URL: this.databaseUrl,
      TEMPORAL_ADDRESS: this.shared.temporalAddress,
      TEMPORAL_NAMESPACE: 'default',
      TEMPORAL_TASK_QUEUE: taskQueue,
      UPSTREAM_BASE_URL: this.sandbox.url,
      UPSTREAM_CLIENT_ID: this.upstreamId,
      UPSTREAM_CLIENT_SECRET: this.upstreamSecret,
      UPSTREAM_ASSUME_LIMITS: this.options.assumeLimits ? 'true' : 'false',
      MIRROR_CLIENT_ID: this.mirrorClientId,
      MIRROR_CLIENT_SECRET: this.mirrorClientSecret,
      MIRROR_ENCRYPTION_KEY: this.encryptionKey,
      MIRROR_SIGNING_KEY: this.signingKey,
      LOG_LEVEL: process.env.BENCH_LOG_LEVEL ?? 'warn',
      API_HOST: '127.0.0.1',
      ...this.options.env,
    };
    if (this.apiPort) {
      env.API_PORT = String(this.apiPort);
      env.PUBLIC_BASE_URL = `http://127.0.0.1:${this.apiPort}`;
    }
    return env;
  }

  private spawnMirror(name: string, args: string[], taskQueue: string): Child {
    const nodeArgs = benchNodeArgs();
    // A worker starts with its settings from the outset (as a container would start it), so the
    // process measured is the worker itself rather than a launcher waiting for it.
    const worker = args[0] === 'worker' ? workerProcessSettings() : args[0] === 'api' ? apiProcessSettings() : { nodeArgs: [], env: {} };
    return spawnNode(
      name,
      [...nodeArgs, ...worker.nodeArgs, 'bin/mirror.js', ...args],
      { ...process.env, ...worker.env, ...this.childEnv(taskQueue) },
      join(this.shared.logDir, `${this.options.name}-${name}.log`),
    );
  }

  /**
   * Starts `count` worker processes on a task queue (default: the env's own, which the API's webhook
   * wake-ups go to) and waits until each one polls it.
   */
  async startWorkers(count: number, taskQueue = this.taskQueue): Promise<WorkerSet> {
    const children: Child[] = [];
    const set: WorkerSet = {
      taskQueue,
      sync: new SyncControl(this.shared.temporal, taskQueue),
      children,
      stop: async () => {
        await Promise.allSettled(children.map((c) => c.stop()));
      },
    };
    this.workerSets.push(set);
    for (let i = 0; i < count; i++) children.push(this.spawnMirror(`worker-${this.workerSets.length}-${i + 1}`, ['worker'], taskQueue));
    await this.waitForPollers(taskQueue, children);
    return set;
  }

  private async waitForPollers(taskQueue: string, children: Child[]): Promise<void> {
    const deadline = Date.now() + 120_000;
    const host = hostname();
    for (;;) {
      for (const c of children) {
        if (c.process.exitCode !== null || c.process.signalCode !== null) throw new Error(`${c.name} exited at start:\n${logTail(c.logFile)}`);
      }
      const seen = new Set<string>();
      for (const taskQueueType of [1, 2]) {
        // 1: workflow tasks, 2: activity tasks.
        const res = await this.shared.temporal.workflowService.describeTaskQueue({ namespace: 'default', taskQueue: { name: taskQueue }, taskQueueType });
        // A worker's identity is `<pid>@<host> construction-mirror/<release>` (lib/build-info.ts workerIdentity).
        for (const p of res.pollers ?? []) if (p.identity) seen.add(`${taskQueueType}:${p.identity.split(' ')[0]}`);
      }
      if (children.every((c) => seen.has(`1:${c.pid}@${host}`) && seen.has(`2:${c.pid}@${host}`))) return;
      if (Date.now() > deadline) throw new Error(`workers did not poll ${taskQueue} within 120 s:\n${children.map((c) => logTail(c.logFile, 5)).join('\n')}`);
      await sleep(200);
    }
  }

  private async startApi(): Promise<void> {
    this.api = await this.startApiProcess('api', this.apiPort);
  }

  /**
   * Starts an API process on `port` with `env` beside this setup's settings (e.g. DATABASE_REPLICA_URLS)
   * and waits until it answers; the caller stops it.
   */
  async startApiProcess(name: string, port: number, env: Record<string, string> = {}): Promise<{ url: string; child: Child }> {
    // Its task queue is where webhook wake-ups (signals to the change workflow) go.
    const nodeArgs = benchNodeArgs();
    const settings = apiProcessSettings();
    const child = spawnNode(
      name,
      [...nodeArgs, ...settings.nodeArgs, 'bin/mirror.js', 'api', '--port', String(port)],
      { ...process.env, ...settings.env, ...this.childEnv(this.taskQueue), API_PORT: String(port), ...env },
      join(this.shared.logDir, `${this.options.name}-${name}.log`),
    );
    const url = `http://127.0.0.1:${port}`;
    const deadline = Date.now() + 60_000;
    for (;;) {
      if (child.process.exitCode !== null) throw new Error(`the API exited at start:\n${logTail(child.logFile)}`);
      const ok = await fetch(`${url}/healthz`).then(
        (r) => r.ok,
        () => false,
      );
      if (ok) break;
      if (Date.now() > deadline) {
        await child.stop().catch(() => undefined);
        throw new Error(`the API did not answer within 60 s:\n${logTail(child.logFile)}`);
      }
      await sleep(200);
    }
    return { url, child };
  }

  /** Links an account on the sandbox through the mirror, as an application would (no sync started). */
  async link(sourceSystem: string, referenceId: string): Promise<Linked> {
    const linkToken = await createLinkToken(this.services.upstream, referenceId);
    const res = await fetch(`${this.sandbox.url}/_admin/link/public-token`, {
      method: 'POST',
      headers: { ...this.upstreamHeaders, 'content-type': 'application/json' },
      body: JSON.stringify({ link_token: linkToken, source_system: sourceSystem }),
    });
    if (!res.ok) throw new Error(`minting a public token failed: ${res.status} ${await res.text()}`);
    const { public_token } = (await res.json()) as { public_token: string };
    const { account, linked } = await linkWithPublicToken({ upstream: this.services.upstream, accounts: this.services.accounts }, public_token);
    return { accountId: account.id, accountToken: linked.account_token };
  }

  get upstreamHeaders(): Record<string, string> {
    return { 'api-version': '2021-11-21', 'client-id': this.upstreamId, 'client-secret': this.upstreamSecret };
  }

  /** Headers an application presents to the mirror's read API for an account. */
  mirrorHeaders(accountToken: string): Record<string, string> {
    return { 'api-version': '2021-11-21', 'client-id': this.mirrorClientId, 'client-secret': this.mirrorClientSecret, 'account-token': accountToken };
  }

  async close(): Promise<void> {
    await Promise.allSettled(this.workerSets.map((s) => s.stop()));
    if (this.api) await this.api.child.stop().catch(() => undefined);
    if (this.services) await this.services.close().catch(() => undefined);
    if (this.sandbox) await this.sandbox.close().catch(() => undefined);
    // BENCH_KEEP_DB=1 leaves the database for a look afterwards (its name is printed).
    if (this.dbCreated && process.env.BENCH_KEEP_DB) console.log(`bench: database kept: ${this.databaseUrl}`);
    else if (this.dbCreated) await dropDatabase(this.databaseUrl).catch(() => undefined);
  }
}
