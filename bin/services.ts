// Wiring: builds the long-lived dependencies of a process from its configuration. The only place
// (with the other files in bin/) that knows every layer.
import type { Client } from '@temporalio/client';
import { SyncControl } from '../api/sync-control.ts';
import type { UpstreamTarget } from '../api/forward.ts';
import { PostgresRateGovernor } from '../connectors/governor/index.ts';
import type { Governor } from '../connectors/governor.ts';
import { selectResources } from '../connectors/source-systems/index.ts';
import { UpstreamClient } from '../connectors/upstream-client.ts';
import { incrementalMinutes, type Config } from '../lib/config.ts';
import { decodeKey } from '../lib/crypto.ts';
import { createLogger, type Logger } from '../lib/logger.ts';
import { AccountStore } from '../mirror/control/accounts.ts';
import { createPool, type Pool } from '../mirror/db/pool.ts';
import { createPrisma, type PrismaClient } from '../mirror/db/prisma.ts';
import { PostgresRateBudgets } from '../mirror/control/rate-budgets.ts';

export interface Services {
  config: Config;
  logger: Logger;
  pool: Pool;
  prisma: PrismaClient;
  accounts: AccountStore;
  upstream: UpstreamClient;
  /** The upstream client's governor: what this process's requests of each class waited (status, tests). */
  governor: PostgresRateGovernor;
  keys: { encryptionKey: Buffer; signingKey: Buffer };
  close(): Promise<void>;
}

export function createServices(config: Config, options: { logger?: Logger; name?: string; poolSize?: number } = {}): Services {
  const logger = options.logger ?? createLogger({ level: config.LOG_LEVEL, name: options.name });
  // One selection per process: the profiles every layer reads list only the mirrored resources.
  selectResources(config.MIRROR_RESOURCES);
  const pool = createPool(config.DATABASE_URL, {
    max: options.poolSize ?? 10,
    application: options.name,
    onError: (error) => logger.warn({ err: error.message }, 'an idle database connection was lost; the next query reconnects'),
  });
  const prisma = createPrisma(config.DATABASE_URL);
  const keys = { encryptionKey: decodeKey(config.MIRROR_ENCRYPTION_KEY), signingKey: decodeKey(config.MIRROR_SIGNING_KEY) };
  // Accounts belong to the mirror client that linked them; the configured one owns those linked before owners were recorded.
  const accounts = new AccountStore(prisma, { encryptionKey: keys.encryptionKey, hashKey: keys.signingKey }, { defaultClientId: config.MIRROR_CLIENT_ID });
  const governor = sharedGovernor(config, pool, logger);
  const upstream = upstreamClient(config, governor, logger);
  return {
    config,
    logger,
    pool,
    prisma,
    accounts,
    upstream,
    governor,
    keys,
    async close() {
      await governor.close().catch(() => undefined);
      await Promise.allSettled([pool.end(), prisma.$disconnect(), upstream.close()]);
    },
  };
}

/** The upstream's budgets, which every worker and API process shares through Postgres. */
export function sharedGovernor(config: Config, pool: Pool, logger: Logger): PostgresRateGovernor {
  return new PostgresRateGovernor(new PostgresRateBudgets(pool), {
    headerPrefix: config.UPSTREAM_HEADER_PREFIX,
    logger,
    assumeLimits: config.UPSTREAM_ASSUME_LIMITS,
    // Background work (the sync) keeps to its share of each window (fixed, or what the applications'
    // recent use leaves); forwarded calls go first.
    syncShare: config.MIRROR_SYNC_BUDGET_SHARE ?? 'adaptive',
    interactiveMaxWaitMs: config.MIRROR_INTERACTIVE_MAX_WAIT_MS,
  });
}

/** The one upstream client, configured as every process configures it; `maxAttempts` for a check that tries once. */
export function upstreamClient(config: Config, governor: Governor, logger: Logger, options: { maxAttempts?: number } = {}): UpstreamClient {
  return new UpstreamClient({
    baseUrl: config.UPSTREAM_BASE_URL,
    clientId: config.UPSTREAM_CLIENT_ID,
    clientSecret: config.UPSTREAM_CLIENT_SECRET,
    apiVersion: config.UPSTREAM_API_VERSION,
    headerPrefix: config.UPSTREAM_HEADER_PREFIX,
    timeoutMs: config.UPSTREAM_TIMEOUT_MS,
    totalTimeoutMs: config.UPSTREAM_TOTAL_TIMEOUT_MS,
    maxBodyBytes: config.UPSTREAM_MAX_BODY_BYTES,
    logger,
    governor,
    ...options,
  });
}

/** Where the upstream reaches the mirror (webhook callbacks): PUBLIC_BASE_URL, else the API's address. */
export function publicBaseUrl(config: Config): string {
  return config.PUBLIC_BASE_URL ?? `http://${config.API_HOST === '0.0.0.0' ? '127.0.0.1' : config.API_HOST}:${config.API_PORT}`;
}

/** Where forwarded requests go, with the upstream's credentials (sent by the one upstream client, which buildApp adds). */
export function upstreamTarget(config: Config): UpstreamTarget {
  return {
    baseUrl: config.UPSTREAM_BASE_URL,
    clientId: config.UPSTREAM_CLIENT_ID,
    clientSecret: config.UPSTREAM_CLIENT_SECRET,
    apiVersion: config.UPSTREAM_API_VERSION,
    headerPrefix: config.UPSTREAM_HEADER_PREFIX,
  };
}

/** The Temporal side of accounts over time, configured as every process configures it. */
export function accountSyncControl(
  client: Client,
  taskQueue: string,
  config: Pick<
    Config,
    | 'SYNC_INCREMENTAL_MINUTES'
    | 'SYNC_FRESHNESS_TARGET'
    | 'SYNC_FULL_HOURS'
    | 'MIRROR_CREDENTIALS_PROBE_AFTER'
    | 'MIRROR_CREDENTIALS_PROBE_MAX'
    | 'MIRROR_RETENTION_AFTER_UNLINK'
  >,
): SyncControl {
  return new SyncControl(client, taskQueue, { incrementalMinutes: incrementalMinutes(config), fullHours: config.SYNC_FULL_HOURS }, undefined, {
    probeFirstMs: config.MIRROR_CREDENTIALS_PROBE_AFTER,
    probeMaxMs: config.MIRROR_CREDENTIALS_PROBE_MAX,
    retentionAfterUnlinkMs: config.MIRROR_RETENTION_AFTER_UNLINK,
  });
}
