// The API process: builds the app from services and listens; closes cleanly on SIGTERM.
import { warmUp } from '../mirror/db/warm-up.ts';
import { Client, Connection } from '@temporalio/client';
import type { FastifyInstance } from 'fastify';
import { buildApp } from '../api/app.ts';
import { defaultTemporalUiUrl } from '../api/status-page/temporal.ts';
import { accountSyncControl, upstreamTarget, type Services } from './services.ts';
import { freshnessSettings } from './polling-settings.ts';
import { ReadRouter } from '../mirror/reads/read-router.ts';

/**
 * The Temporal client keeps a call's context (deadline, metadata) in an AsyncLocalStorage that its
 * first call enables and nothing disables. While any is enabled, Node runs async hooks for every
 * promise and async resource of the process: measured on the read API's filtered page (bench [11]),
 * 14 us of a request's ~480 us of CPU in the hooks themselves. The context is read synchronously as
 * a call starts (inside `run`), so the storage is disabled now (connecting made a call) and again
 * as each outermost `run` returns: the API's calls (a sync started, a webhook's signal, the status
 * page) keep their context, and the API's reads run without hooks.
 */
export function releaseCallContext(connection: Connection): void {
  const storage = connection.callContextStorage;
  // Connecting made a call (its deadline's run) already.
  storage.disable();
  const run = storage.run.bind(storage);
  let depth = 0;
  storage.run = <R, A extends unknown[]>(store: Parameters<typeof run>[0], callback: (...args: A) => R, ...args: A): R => {
    depth++;
    try {
      return run(store, callback, ...args);
    } finally {
      if (--depth === 0) storage.disable();
    }
  };
}

/** Where the API's reads go: the replicas of DATABASE_REPLICA_URLS with read-your-writes, else the primary. */
export function readRouter(services: Services): ReadRouter {
  const { config, logger } = services;
  return new ReadRouter(services.pool, {
    replicaUrls: config.DATABASE_REPLICA_URLS,
    maxLagMs: config.MIRROR_REPLICA_MAX_LAG_MS,
    // The replica's address only: its URL may hold a password.
    onReplicaError: (replica, error) =>
      logger.warn({ replica, err: error.message }, 'a read replica failed: its reads go to the primary until a probe finds it again'),
  });
}

export async function startApi(
  services: Services,
  options: { port?: number; host?: string; temporalAddress?: string } = {},
): Promise<{ app: FastifyInstance; url: string; close(): Promise<void> }> {
  const { config } = services;
  const connection = await Connection.connect({ address: options.temporalAddress ?? config.TEMPORAL_ADDRESS });
  releaseCallContext(connection);
  const sync = accountSyncControl(new Client({ connection, namespace: config.TEMPORAL_NAMESPACE }), config.TEMPORAL_TASK_QUEUE, config);
  const reads = readRouter(services);
  await reads.start();
  const app = await buildApp({
    pool: services.pool,
    reads,
    prisma: services.prisma,
    accounts: services.accounts,
    logger: services.logger,
    headerPrefix: config.UPSTREAM_HEADER_PREFIX,
    upstream: {
      client: services.upstream,
      target: upstreamTarget(config),
    },
    sync,
    hashKey: services.keys.signingKey,
    indexedFields: config.MIRROR_INDEXED_FIELDS,
    encryptionKey: services.keys.encryptionKey,
    freshness: freshnessSettings(config),
    operator: {
      token: config.OPERATOR_TOKEN,
      temporalUiUrl: config.TEMPORAL_UI_URL ?? defaultTemporalUiUrl(options.temporalAddress ?? config.TEMPORAL_ADDRESS),
    },
    // Unset, links are built on the address the app listens on (--port and port 0 included).
    publicBaseUrl: config.PUBLIC_BASE_URL,
    storageUrls: config.UPSTREAM_STORAGE_URL,
    callbacks: { allow: config.MIRROR_CALLBACK_ALLOW },
    timeouts: {
      headersMs: config.API_HEADERS_TIMEOUT_MS,
      bodyIdleMs: config.API_BODY_IDLE_TIMEOUT_MS,
      requestMs: config.API_REQUEST_TIMEOUT_MS,
      keepAliveMs: config.API_KEEPALIVE_TIMEOUT_MS,
    },
  });
  // The first request (a webhook delivery, a read) must not wait for the connections to open.
  await warmUp(services.pool, services.prisma, 2);
  const address = await app.listen({ port: options.port ?? config.API_PORT, host: options.host ?? config.API_HOST });
  return {
    app,
    url: address.replace('[::1]', '127.0.0.1'),
    async close() {
      await app.close();
      await connection.close();
    },
  };
}
