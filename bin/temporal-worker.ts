// The Temporal worker: registers every workflow and activity on the mirror's task queue.
import { randomUUID } from 'node:crypto';
import { Client, Connection } from '@temporalio/client';
import { DefaultLogger, NativeConnection, Runtime, Worker, type LogLevel } from '@temporalio/worker';
import type { FastifyInstance } from 'fastify';
import { createActivities } from '../activities/index.ts';
import { writeDepth } from '../activities/sync.ts';
import type { RequestExecutor } from '../activities/async-requests.ts';
import { buildApp } from '../api/app.ts';
import { AccountCredentials } from '../connectors/credentials.ts';
import { internalHeader, internalToken } from '../api/auth.ts';
import { AsyncRequestStore } from '../mirror/control/async-requests.ts';
import { retentionPolicy } from '../mirror/ops/retention.ts';
import { warmUp } from '../mirror/db/warm-up.ts';
import type { Config } from '../lib/config.ts';
import { workerIdentity } from '../lib/build-info.ts';
import type { Logger } from '../lib/logger.ts';
import { promptTaskQueue, promptWarmUpWorkflowId } from '../lib/workflow-ids.ts';
import { accountSyncControl, publicBaseUrl, upstreamTarget, type Services } from './services.ts';

import { workflowBundlePath } from './workflow-bundle.ts';
import { pollingPolicy } from './polling-settings.ts';

/** Activities a worker runs at once: each syncs one stream's slice (or handles an event, a request). */
export function activitySlots(config: Pick<Config, 'SYNC_STREAM_CONCURRENCY'>): number {
  return config.SYNC_STREAM_CONCURRENCY * 2;
}

/**
 * Activities a worker runs at once on its prompt task queue (lib/workflow-ids.ts `promptTaskQueue`):
 * the change workflows' event batches, on slots no pass activity takes, so one account's backfill
 * holding every slot of the main queue does not delay another account's changes. Half the pass slots
 * (each batch holds at most one connection at a time, and fetches within the account's budget).
 */
function promptActivitySlots(config: Pick<Config, 'SYNC_STREAM_CONCURRENCY'>): number {
  return Math.max(2, config.SYNC_STREAM_CONCURRENCY);
}

/**
 * Database connections a worker's pool needs. A sync activity's pages wait, connection held, for the
 * page before them to commit (`writeDepth` in flight, all but the first waiting), and a page written
 * a second time (an insert that met a record already there, a kept page that could not be kept) asks
 * for a connection anew while its successors wait on it: were every connection held by waiting
 * pages, none would move. Each activity's waiting pages therefore fit, a connection for each prompt
 * slot (events), and four over for everything else (the rate governor, a page written again).
 */
export function workerPoolSize(config: Pick<Config, 'SYNC_STREAM_CONCURRENCY'>): number {
  return activitySlots(config) * (writeDepth - 1) + promptActivitySlots(config) + 4;
}

/** Pool connections of a process that runs the prompt task queue alone (`mirror worker`'s prompt process). */
export function promptPoolSize(config: Pick<Config, 'SYNC_STREAM_CONCURRENCY'>): number {
  return promptActivitySlots(config) + 4;
}

/**
 * Which task queues a worker polls: both (one process, as in the tests and the demo), or one of them
 * (`mirror worker` runs the prompt queue in a process of its own, whose event loop a backfill's pages
 * on the main queue do not hold up).
 */
type WorkerQueues = 'both' | 'main' | 'prompt';

export interface WorkerHandle {
  /** The worker that polls the main task queue (workflows, and every pass activity), or the prompt queue's when it polls that alone. */
  worker: Worker;
  /** Resolves when the worker has stopped. */
  running: Promise<void>;
  shutdown(): Promise<void>;
}

export async function startWorker(
  services: Services,
  options: {
    address?: string;
    namespace?: string;
    taskQueue?: string;
    maxConcurrentActivities?: number;
    publicBaseUrl?: string;
    /** Make the hourly maintenance schedule (retention purges, idle accounts) if it is missing: `mirror worker` and the demo do. */
    maintenanceSchedule?: boolean;
    /** The task queues this worker polls (default both). */
    queues?: WorkerQueues;
  } = {},
): Promise<WorkerHandle> {
  const { config } = services;
  installRuntimeLogger(config.LOG_LEVEL);
  const connection = await NativeConnection.connect({ address: options.address ?? config.TEMPORAL_ADDRESS });
  // A client beside the worker: an account whose credentials are refused or which is unlinked has its
  // schedules paused or deleted, and its probe or purge started, from the activity that found it out.
  const clientConnection = await Connection.connect({ address: options.address ?? config.TEMPORAL_ADDRESS });
  const taskQueue = options.taskQueue ?? config.TEMPORAL_TASK_QUEUE;
  const client = new Client({ connection: clientConnection, namespace: options.namespace ?? config.TEMPORAL_NAMESPACE });
  const lifecycle = accountSyncControl(client, taskQueue, config);
  const activities = createActivities({
    upstream: services.upstream,
    pool: services.pool,
    prisma: services.prisma,
    accounts: services.accounts,
    logger: services.logger,
    publicBaseUrl: options.publicBaseUrl ?? publicBaseUrl(config),
    hashKey: services.keys.signingKey,
    // With read replicas, an applied webhook event and a pass's writes record their account's position (read-your-writes).
    recordWritePositions: config.DATABASE_REPLICA_URLS.length > 0,
    asyncRequests: new AsyncRequestStore(services.prisma),
    encryptionKey: services.keys.encryptionKey,
    maxPagesPerPass: config.SYNC_MAX_PAGES_PER_PASS,
    // The schedules' periods (api/sync-control.ts), the polling share and the freshness target: the freshness scheduler's settings.
    polling: pollingPolicy(config),
    // When a stream whose checkpoint does not move is stalled, and how it backs off.
    stalls: {
      attempts: config.MIRROR_STALL_ATTEMPTS,
      afterMs: config.MIRROR_STALL_AFTER,
      backoffMs: config.MIRROR_STALL_BACKOFF,
      backoffMaxMs: config.MIRROR_STALL_BACKOFF_MAX,
    },
    callbacks: { allow: config.MIRROR_CALLBACK_ALLOW },
    credentials: new AccountCredentials({ upstream: services.upstream, accounts: services.accounts, lifecycle }),
    retention: retentionPolicy(config),
    idle: { afterMs: config.MIRROR_IDLE_AFTER, slowdown: config.MIRROR_IDLE_SLOWDOWN, schedules: lifecycle },
    executor: lazyExecutor(services, options.publicBaseUrl ?? publicBaseUrl(config)),
  });
  const queues = options.queues ?? 'both';
  // The first event a fresh process applies must not wait for its connections to open.
  await warmUp(services.pool, services.prisma, queues === 'main' ? 2 : promptActivitySlots(config));
  const workflowBundle = { codePath: await workflowBundlePath() };
  // One worker a task queue, with its own activity slots; the identity is the release it runs, for
  // `mirror doctor` (Temporal lists the identities of a task queue's pollers).
  const workerFor = (queue: string, slots: number) =>
    Worker.create({
      connection,
      identity: workerIdentity(),
      namespace: options.namespace ?? config.TEMPORAL_NAMESPACE,
      taskQueue: queue,
      workflowBundle,
      activities,
      maxConcurrentActivityTaskExecutions: slots,
    });
  const workers: Worker[] = [];
  if (queues !== 'prompt') workers.push(await workerFor(taskQueue, options.maxConcurrentActivities ?? activitySlots(config)));
  // The prompt task queue: the change workflows and their event activities, on slots of their own.
  if (queues !== 'main') workers.push(await workerFor(promptTaskQueue(taskQueue), promptActivitySlots(config)));
  if (options.maintenanceSchedule) await lifecycle.ensureMaintenanceSchedule();
  // Either worker stopping (a shutdown, a fatal error) stops the other; the connections close once both have.
  const stop = () => {
    for (const w of workers) if (w.getState() === 'RUNNING') w.shutdown();
  };
  const running = Promise.allSettled(workers.map((w) => w.run().finally(stop))).then(async (outcomes) => {
    await connection.close();
    await clientConnection.close();
    for (const o of outcomes) if (o.status === 'rejected') throw o.reason;
  });
  // A process of the prompt queue alone runs its first workflow task and event activity before it
  // reports running, so the first webhook change it takes does not pay for code run the first time.
  if (queues === 'prompt') await warmUpPromptQueue(client, promptTaskQueue(taskQueue), services.logger);
  return {
    worker: workers[0]!,
    running,
    async shutdown() {
      stop();
      await running;
    },
  };
}

/**
 * Runs the warm-up workflow (workflows/account-changes.ts `promptWarmUpWorkflow`) on the prompt queue
 * and waits for it, 30 s at most. Best effort: where other processes poll the same queue one of them
 * may take it, and a warm-up that fails leaves only the first change slower.
 */
async function warmUpPromptQueue(client: Client, queue: string, logger: Logger): Promise<void> {
  const began = performance.now();
  try {
    await client.workflow.execute('promptWarmUpWorkflow', {
      taskQueue: queue,
      workflowId: promptWarmUpWorkflowId(queue, randomUUID()),
      workflowExecutionTimeout: '30 seconds',
    });
    logger.info({ ms: Math.round(performance.now() - began) }, 'prompt queue warmed up');
  } catch (error) {
    logger.warn({ err: error instanceof Error ? error.message : String(error) }, 'prompt queue warm-up failed: its first change runs cold');
  }
}

/** Async requests run through the API's own handlers, in process, as their account. */
function lazyExecutor(services: Services, apiBaseUrl: string): () => Promise<RequestExecutor> {
  let app: Promise<FastifyInstance> | undefined;
  return async () => {
    app ??= buildApp({
      pool: services.pool,
      prisma: services.prisma,
      accounts: services.accounts,
      logger: services.logger,
      headerPrefix: services.config.UPSTREAM_HEADER_PREFIX,
      hashKey: services.keys.signingKey,
      upstream: { client: services.upstream, target: upstreamTarget(services.config) },
      // This app never listens: its answers carry links to the API's address.
      publicBaseUrl: apiBaseUrl,
      storageUrls: services.config.UPSTREAM_STORAGE_URL,
      indexedFields: services.config.MIRROR_INDEXED_FIELDS,
    });
    const instance = await app;
    return async (req) => {
      const res = await instance.inject({
        method: req.method as 'GET',
        url: req.path,
        headers: { ...req.headers, [internalHeader]: internalToken(services.keys.signingKey, req.accountId) },
        ...(req.body ? { payload: req.body } : {}),
      });
      const headers: Record<string, string> = {};
      const type = res.headers['content-type'];
      if (typeof type === 'string') headers['content-type'] = type;
      return { status: res.statusCode, headers, body: res.rawPayload };
    };
  };
}

let runtimeInstalled = false;
/** The SDK's own log level follows LOG_LEVEL (it can be set once per process). */
function installRuntimeLogger(level: string): void {
  if (runtimeInstalled) return;
  runtimeInstalled = true;
  const map: Record<string, LogLevel> = { trace: 'TRACE', debug: 'DEBUG', info: 'INFO', warn: 'WARN', error: 'ERROR', fatal: 'ERROR' };
  try {
    Runtime.install({ logger: level === 'silent' ? new DefaultLogger('ERROR', () => undefined) : new DefaultLogger(map[level] ?? 'INFO') });
  } catch {
    // Already installed by the host process (tests, the demo): keep its logger.
  }
}
