// Builds the mirror's API (never listens: bin/api-server.ts does, tests use inject()).
import { randomUUID } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';
import Fastify, { LogController, type FastifyBaseLogger, type FastifyInstance, type RawServerDefault } from 'fastify';
import type { Bindings, ChildLoggerOptions, LogFn } from 'pino';
import { createCallbackGuard, type CallbackPolicy } from '../lib/address-guard.ts';
import { buildInfo } from '../lib/build-info.ts';
import type { Logger } from '../lib/logger.ts';
import type { AccountStore } from '../mirror/control/accounts.ts';
import type { Pool } from '../mirror/db/pool.ts';
import type { PrismaClient } from '../mirror/db/prisma.ts';
import { createAuthenticator, type Authenticator } from './auth.ts';
import { AccountUse, withAccountUse } from './account-use.ts';
import { registerErrorHandling } from './errors.ts';
import { registerAsync } from './async.ts';
import { AsyncRequestStore } from '../mirror/control/async-requests.ts';
import { ReadRouter } from '../mirror/reads/read-router.ts';
import { registerResourceRoutes } from './routes/resources.ts';
import { registerAggregateRoutes } from './routes/aggregates.ts';
import { textIndexed, type IndexedField } from '../lib/indexed-fields.ts';
import { registerForwardedRoutes } from './routes/forwarded.ts';
import { registerWriteRoutes } from './routes/writes.ts';
import { registerStorageRoutes } from './routes/storage.ts';
import { defaultStorageUrls, linkBase } from './storage-proxy.ts';
import { registerInboundWebhookRoutes } from './routes/webhooks-inbound.ts';
import { registerSubscriptionRoutes } from './routes/subscriptions.ts';
import type { UpstreamClient } from '../connectors/upstream-client.ts';
import { AccountCredentials } from '../connectors/credentials.ts';
import { forwardCredentials, type UpstreamTarget } from './forward.ts';
import type { SyncControl } from './sync-control.ts';
import { ProjectIds } from './project-ids.ts';
import { defaultApiTimeouts, registerBodyTimeouts, serverTimeoutOptions, type ApiTimeouts } from './request-timeouts.ts';
import { registerOpenApi } from './openapi.ts';
import { json, useZodSchemas } from './route-schema.ts';
import { z } from 'zod';
import { registerMetricsRoutes } from './routes/metrics.ts';
import { registerStatusRoutes } from './routes/status.ts';
import type { FreshnessSettings } from '../mirror/streams/freshness.ts';

interface ApiDeps {
  /** The primary: writes, the control plane, and reads without replicas. */
  pool: Pool;
  /** Where reads go (replicas with read-your-writes); the app closes it. Without it every read is the primary's. */
  reads?: ReadRouter;
  prisma: PrismaClient;
  accounts: AccountStore;
  logger: Logger;
  /** Brand prefix of the response headers (`Svc-Debug-Id`, ...). */
  headerPrefix?: string;
  /** The upstream, for what is forwarded; without it only mirrored reads are served. */
  upstream?: { client: UpstreamClient; target: UpstreamTarget };
  sync?: SyncControl;
  /** Key of the keyed hashes (webhook secrets). */
  hashKey?: Buffer;
  /** Key that encrypts subscribers' authorization headers at rest. */
  encryptionKey?: Buffer;
  /** Operator pages: OPERATOR_TOKEN, where the Temporal UI is (links on /status), how often /status refreshes. */
  operator?: { token?: string; temporalUiUrl?: string; refreshMs?: number };
  /** The freshness views' settings (the polling policy and the source systems' published rates): the status page and /metrics show freshness with them. */
  freshness?: FreshnessSettings;
  /** Base of the absolute links the API answers (storage links): PUBLIC_BASE_URL; unset, the address it listens on. Never a request's Host header. */
  publicBaseUrl?: string;
  /** The upstream's storage URLs (UPSTREAM_STORAGE_URL), the only places the storage proxy fetches from; unset, the upstream base URL's `/storage`. */
  storageUrls?: readonly string[];
  /** Where subscribers' callbacks may point: public addresses, plus MIRROR_CALLBACK_ALLOW (empty when unset). */
  callbacks?: CallbackPolicy;
  /** Headers, body and keep-alive timeouts (API_*_TIMEOUT_MS); unset, their documented defaults. */
  timeouts?: ApiTimeouts;
  /** The fields with an expression index (MIRROR_INDEXED_FIELDS): their filters compare the indexed expression. */
  indexedFields?: readonly IndexedField[];
  /** Records each account's use (idle accounts); unset, one of the app's own, waking idle accounts through `sync`. */
  accountUse?: AccountUse;
}

const healthzSchema = {
  summary: 'Liveness, and the release the API runs',
  tags: ['operator'],
  access: 'public',
  response: {
    200: json(
      'The process answers, with its package version and git commit (null when unknown).',
      z.object({ ok: z.boolean(), version: z.string(), commit: z.string().nullable() }),
    ),
  },
} as const;

type Level = 'fatal' | 'error' | 'warn' | 'info' | 'debug' | 'trace' | 'silent';

/**
 * A request's logger, made only when something is logged: most requests log nothing, and a pino child
 * (its bindings go through the redaction of every credential path) costs more than the rest of a
 * cached read. Logs exactly what `parent.child(bindings, options)` would, redaction included.
 */
class LazyChildLogger {
  #parent: FastifyBaseLogger;
  #bindings: Bindings;
  #options: ChildLoggerOptions;
  #child: FastifyBaseLogger | undefined;
  constructor(parent: FastifyBaseLogger, bindings: Bindings, options: ChildLoggerOptions) {
    this.#parent = parent;
    this.#bindings = bindings;
    this.#options = options;
  }
  get #logger(): FastifyBaseLogger {
    return (this.#child ??= this.#parent.child(this.#bindings, this.#options));
  }
  #log(level: Level, args: Parameters<LogFn>): void {
    this.#logger[level](...args);
  }
  get level(): string {
    return this.#child?.level ?? this.#options.level ?? this.#parent.level;
  }
  set level(level: string) {
    this.#logger.level = level;
  }
  isLevelEnabled(level: string): boolean {
    return (this.#logger as Logger).isLevelEnabled(level);
  }
  bindings(): Bindings {
    return (this.#logger as Logger).bindings();
  }
  child(bindings: Bindings, options?: ChildLoggerOptions): FastifyBaseLogger {
    return this.#logger.child(bindings, options);
  }
  fatal(...args: Parameters<LogFn>): void {
    this.#log('fatal', args);
  }
  error(...args: Parameters<LogFn>): void {
    this.#log('error', args);
  }
  warn(...args: Parameters<LogFn>): void {
    this.#log('warn', args);
  }
  info(...args: Parameters<LogFn>): void {
    this.#log('info', args);
  }
  debug(...args: Parameters<LogFn>): void {
    this.#log('debug', args);
  }
  trace(...args: Parameters<LogFn>): void {
    this.#log('trace', args);
  }
  silent(...args: Parameters<LogFn>): void {
    this.#log('silent', args);
  }
}

/** The Fastify instance with the server's options: request ids, the lazy request logger, body limit and timeouts. */
function createServer(deps: ApiDeps): FastifyInstance {
  return Fastify<RawServerDefault, IncomingMessage, ServerResponse, FastifyBaseLogger>({
    loggerInstance: deps.logger,
    genReqId: () => randomUUID(),
    logController: new LogController({ disableRequestLogging: true }),
    childLoggerFactory: (logger, bindings, options) => new LazyChildLogger(logger, bindings, options),
    bodyLimit: 10 * 1024 * 1024,
    // `/webhooks/` is `/webhooks`, as on the upstream (its own clients send both).
    routerOptions: { ignoreTrailingSlash: true },
    ...serverTimeoutOptions(deps.timeouts ?? defaultApiTimeouts),
  });
}

/** What every request goes through before its route: the debug id header, body timeouts, error mapping, schemas. */
function registerRequestPipeline(app: FastifyInstance, deps: ApiDeps, prefix: string): void {
  // Hooks of every request are plain callbacks (an async hook costs a promise and a tick each).
  const debugIdHeader = `${prefix}-Debug-Id`;
  app.addHook('onRequest', (request, reply, done) => {
    void reply.header(debugIdHeader, request.id);
    done();
  });
  registerBodyTimeouts(app, deps.timeouts ?? defaultApiTimeouts, debugIdHeader);
  registerErrorHandling(app);
  // Every route validates its input and serializes its objects with its own zod schema, the one the
  // document is generated from (register the document first: it collects the routes as they come).
  useZodSchemas(app);
  registerOpenApi(app);
}

/**
 * Forwards send the account's stored token for requests the worker runs as the account, and check a
 * link session's scopes: the credential sources travel with the upstream target, and so does the one
 * upstream client that sends them (its governor counts them against the account's budget).
 */
function forwardTargetOf(deps: ApiDeps & { upstream: NonNullable<ApiDeps['upstream']> }): UpstreamTarget {
  return {
    ...deps.upstream.target,
    client: deps.upstream.client,
    credentials: forwardCredentials({
      accounts: deps.accounts,
      prisma: deps.prisma,
      sessionKey: deps.hashKey,
      check: new AccountCredentials({ upstream: deps.upstream.client, accounts: deps.accounts, lifecycle: deps.sync }),
      logger: deps.logger,
    }),
  };
}

/** The operator's routes: /metrics, /status, /healthz. */
function registerOperatorRoutes(app: FastifyInstance, deps: ApiDeps, { auth, router }: Pick<Shared, 'auth' | 'router'>): void {
  registerMetricsRoutes(app, {
    pool: deps.pool,
    router,
    auth,
    upstream: deps.upstream?.client,
    operator: deps.operator,
    ...(deps.freshness ? { freshness: deps.freshness } : {}),
  });
  registerStatusRoutes(app, {
    pool: deps.pool,
    router,
    auth,
    sync: deps.sync,
    operator: deps.operator,
    upstream: deps.upstream?.client,
    ...(deps.freshness ? { freshness: deps.freshness } : {}),
  });
  app.get('/healthz', { schema: healthzSchema }, async () => ({ ok: true, ...buildInfo() }));
}

interface Shared {
  prefix: string;
  /** Where each read goes: a replica that holds the account's writes, else the primary (one reader per server). */
  router: ReadRouter;
  auth: Authenticator;
  projects: ProjectIds;
  forwardTarget: UpstreamTarget | undefined;
}

/** What the mirror serves from its own tables: records, aggregates, async requests, webhooks in, subscriptions. */
function registerMirroredRoutes(app: FastifyInstance, deps: ApiDeps, { prefix, auth, projects, forwardTarget, router }: Shared): void {
  if (deps.sync) registerAsync(app, { auth, store: new AsyncRequestStore(deps.prisma), sync: deps.sync, headerPrefix: prefix });
  const indexed = textIndexed(deps.indexedFields ?? []);
  registerResourceRoutes(app, {
    pool: deps.pool,
    reader: router.primaryReader,
    router,
    indexed,
    auth,
    headerPrefix: prefix,
    upstream: forwardTarget,
    sync: deps.sync,
    projects,
    ...(deps.upstream && deps.hashKey ? { storageKey: deps.hashKey, linkBase: linkBase(app.server, deps.publicBaseUrl) } : {}),
  });
  registerAggregateRoutes(app, { pool: deps.pool, router, auth, headerPrefix: prefix, projects, indexed });
  if (deps.hashKey) registerInboundWebhookRoutes(app, { pool: deps.pool, prisma: deps.prisma, hashKey: deps.hashKey, sync: deps.sync });
  if (deps.sync && deps.encryptionKey)
    registerSubscriptionRoutes(app, {
      auth,
      prisma: deps.prisma,
      sync: deps.sync,
      encryptionKey: deps.encryptionKey,
      callbacks: createCallbackGuard(deps.callbacks),
      projects,
    });
}

/** What goes to the upstream: forwarded calls, the storage proxy and writes. */
function registerUpstreamRoutes(
  app: FastifyInstance,
  deps: ApiDeps & { upstream: NonNullable<ApiDeps['upstream']> },
  { prefix, auth, forwardTarget, router }: Shared & { forwardTarget: UpstreamTarget },
): void {
  registerForwardedRoutes(app, {
    headerPrefix: prefix,
    auth,
    target: forwardTarget,
    upstream: deps.upstream.client,
    accounts: deps.accounts,
    sync: deps.sync,
    prisma: deps.prisma,
    sessionKey: deps.hashKey,
  });
  if (deps.hashKey)
    registerStorageRoutes(app, {
      pool: deps.pool,
      prisma: deps.prisma,
      key: deps.hashKey,
      upstream: deps.upstream.client,
      accounts: deps.accounts,
      storageUrls: deps.storageUrls ?? defaultStorageUrls(deps.upstream.target.baseUrl),
    });
  registerWriteRoutes(app, {
    pool: deps.pool,
    router,
    auth,
    target: forwardTarget,
    headerPrefix: prefix,
    upstream: deps.upstream.client,
    accounts: deps.accounts,
  });
}

export async function buildApp(input: ApiDeps): Promise<FastifyInstance> {
  // Every upstream call the API makes has an application waiting on it: interactive.
  const deps: ApiDeps = input.upstream ? { ...input, upstream: { ...input.upstream, client: input.upstream.client.withPriority('interactive') } } : input;
  const prefix = deps.headerPrefix ?? 'Svc';
  const app = createServer(deps);
  registerRequestPipeline(app, deps, prefix);
  const forwardTarget = deps.upstream && forwardTargetOf({ ...deps, upstream: deps.upstream });
  // Every request answered as an account is a use of it: an idle account wakes on its next read or write.
  const auth = withAccountUse(
    createAuthenticator({ prisma: deps.prisma, accounts: deps.accounts, internalKey: deps.hashKey, upstream: deps.upstream?.client }),
    deps.accountUse ?? new AccountUse({ pool: deps.pool, waker: deps.sync, logger: deps.logger }),
  );
  // Without replicas, every read is the primary's (through the router's reader of it).
  const router = deps.reads ?? new ReadRouter(deps.pool, { replicaUrls: [], maxLagMs: 0 });
  app.addHook('onClose', () => router.close());
  registerOperatorRoutes(app, deps, { auth, router });
  const projects = new ProjectIds({ pool: deps.pool, ...(deps.upstream ? { upstream: { client: deps.upstream.client, accounts: deps.accounts } } : {}) });
  const shared: Shared = { prefix, auth, projects, forwardTarget, router };
  registerMirroredRoutes(app, deps, shared);
  if (deps.upstream && forwardTarget) registerUpstreamRoutes(app, { ...deps, upstream: deps.upstream }, { ...shared, forwardTarget });
  await app.ready();
  return app;
}
