// Everything one sandbox instance holds in memory, built once and handed to each route module.
import type { Logger } from '../lib/logger.ts';
import { AccountRegistry } from './auth-and-link/accounts.ts';
import { LinkSessions } from './auth-and-link/link-sessions.ts';
import { Dataset } from './data/dataset.ts';
import { FaultRegistry } from './faults/faults.ts';
import { headerNames, type HeaderNames } from './http/header-names.ts';
import type { ResolvedOptions } from './options.ts';
import { RateLimiter } from './rate-limits/limiter.ts';
import { SerialQueues } from './rate-limits/serial-queue.ts';
import { Stats } from './admin/stats.ts';
import { StorageSigner } from './storage/signing.ts';
import { WebhookRegistry } from './webhooks/registry.ts';
import { AsyncRequests } from './async/async-requests.ts';
import { ChurnRunner } from './webhooks/churn.ts';
import { RecordCache } from './resources/record-cache.ts';

/** Per-source-system knobs settable at runtime (`PUT /_admin/source-systems/:slug`). */
interface SourceSystemSettings {
  /** Simulated latency added to each request, to make queues and concurrency observable. */
  latencyMs: number;
  maxQueued?: number;
  maxExecutionMs?: number;
}

export interface SandboxContext {
  options: ResolvedOptions;
  headers: HeaderNames;
  logger: Logger | undefined;
  dataset: Dataset;
  accounts: AccountRegistry;
  sessions: LinkSessions;
  limiter: RateLimiter;
  serial: SerialQueues;
  faults: FaultRegistry;
  stats: Stats;
  signer: StorageSigner;
  webhooks: WebhookRegistry;
  asyncRequests: AsyncRequests;
  churn: ChurnRunner;
  /** JSON of recently served list records (resources/routes.ts). */
  records: RecordCache;
  sourceSettings: Map<string, SourceSystemSettings>;
  /** The sandbox's own base URL (publicUrl, else the listen address once known). */
  baseUrl: string;
}

export function createContext(options: ResolvedOptions, logger: Logger | undefined): SandboxContext {
  const baseUrl = options.publicUrl ?? 'http://127.0.0.1';
  const signer = new StorageSigner(options.signingKey, `${baseUrl}/storage`, options.storageUrlTtlMs);
  const dataset = new Dataset({
    seed: options.seed,
    size: options.size,
    sizes: options.sizes,
    ...(options.projectSkew ? { projectSkew: options.projectSkew } : {}),
    fileUrls: (ref) => signer.urls(ref),
  });
  return {
    options,
    headers: headerNames(options.headerPrefix),
    logger,
    dataset,
    accounts: new AccountRegistry(dataset),
    sessions: new LinkSessions(),
    limiter: new RateLimiter(options.rateLimits, options.headerPrefix),
    serial: new SerialQueues(),
    faults: new FaultRegistry(options.seed),
    stats: new Stats(),
    signer,
    webhooks: new WebhookRegistry(logger),
    asyncRequests: new AsyncRequests(options.asyncResultTtlMs),
    churn: new ChurnRunner(),
    records: new RecordCache(options.recordCacheBytes),
    sourceSettings: new Map(),
    baseUrl,
  };
}

/** Once the listen address is known (or publicUrl given), URLs point at it. */
export function setBaseUrl(ctx: SandboxContext, url: string): void {
  ctx.baseUrl = url.replace(/\/+$/, '');
  ctx.signer.storageUrl = `${ctx.baseUrl}/storage`;
}
