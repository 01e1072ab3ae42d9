// The sandbox's options, as callers give them and as the sandbox uses them (defaults applied).
import { createHash } from 'node:crypto';
import type { Logger } from '../lib/logger.ts';
import type { ProjectSkew } from './data/dataset.ts';
import type { RateLimitSettings, SourceSystemWindow } from './rate-limits/limiter.ts';

export interface SandboxOptions {
  /** Default 1; all data derives deterministically from it. */
  seed?: number;
  /** The only accepted Client-Id (36 chars). */
  clientId: string;
  /** The only accepted Client-Secret (40 chars). */
  clientSecret: string;
  /** Brand prefix of the `Svc-*` headers; default 'Svc'. */
  headerPrefix?: string;
  /** Records per list (per scope) for big resources; default 60. */
  size?: number;
  /**
   * Per-resource override of the list size (records per list, per scope) of top-level resources,
   * e.g. `{ customers: 200_000, projects: 1 }`: one big list and little else (benchmarks).
   */
  sizes?: Partial<Record<string, number>>;
  /**
   * Project-scoped lists sized by project (a few big projects, many small; see data/dataset.ts
   * `ProjectSkew`); unset: every project's lists follow `size` and `sizes`.
   */
  projectSkew?: ProjectSkew;
  /** Default: realistic limits on; false: off. */
  /**
   * `sourceSystemWindows`: source systems (by slug) that enforce several windows at once, e.g.
   * `{ procloud: [{ limit: 3600, windowMs: 3_600_000 }, { limit: 100, windowMs: 10_000 }] }`; their
   * headers report the window nearer to running out (rate-limits/limiter.ts).
   */
  rateLimits?:
    | false
    | {
        windowMs?: number;
        accountLimit?: number;
        sourceSystemLimits?: Record<string, number>;
        sourceSystemWindows?: Record<string, readonly SourceSystemWindow[]>;
      };
  logger?: Logger | false;
  /** Base for Link page and storage URLs; default the listen URL. */
  publicUrl?: string;
  /** Lifetime of signed storage URLs; default 6 hours. */
  storageUrlTtlMs?: number;
  /** How long async results stay available; default 1 hour. */
  asyncResultTtlMs?: number;
  /**
   * Memory for the JSON text of recently served list records, reused while no data changes
   * (see resources/record-cache.ts); default 64 MB, 0 turns it off.
   */
  recordCacheMb?: number;
}

export interface ResolvedOptions {
  seed: number;
  clientId: string;
  clientSecret: string;
  headerPrefix: string;
  size: number;
  /** Per-resource list sizes that replace `size`'s rule (whole numbers >= 0). */
  sizes: Readonly<Record<string, number>>;
  projectSkew?: ProjectSkew | undefined;
  rateLimits: RateLimitSettings;
  publicUrl: string | undefined;
  storageUrlTtlMs: number;
  asyncResultTtlMs: number;
  /** Bytes of the served-record text cache (0: none). */
  recordCacheBytes: number;
  /** Keys derived from the seed and secret: stable URLs across restarts, unguessable without the secret. */
  signingKey: Buffer;
}

export const API_VERSION = '2021-11-21';

export function resolveOptions(o: SandboxOptions): ResolvedOptions {
  const rl = o.rateLimits;
  const seed = o.seed ?? 1;
  return {
    seed,
    clientId: o.clientId,
    clientSecret: o.clientSecret,
    headerPrefix: o.headerPrefix ?? 'Svc',
    size: Math.max(1, Math.floor(o.size ?? 60)),
    sizes: resolveSizes(o.sizes),
    projectSkew: resolveSkew(o.projectSkew),
    rateLimits: {
      enabled: rl !== false,
      windowMs: (rl && rl.windowMs) || 60_000,
      windowOverride: Boolean(rl && rl.windowMs),
      accountLimit: (rl && rl.accountLimit) || 150,
      sourceSystemLimits: (rl && rl.sourceSystemLimits) || {},
      ...(rl && rl.sourceSystemWindows ? { sourceSystemWindows: resolveWindows(rl.sourceSystemWindows) } : {}),
    },
    publicUrl: o.publicUrl?.replace(/\/+$/, ''),
    storageUrlTtlMs: o.storageUrlTtlMs ?? 6 * 3_600_000,
    asyncResultTtlMs: o.asyncResultTtlMs ?? 3_600_000,
    recordCacheBytes: cacheBytes(o.recordCacheMb ?? 64),
    signingKey: createHash('sha256').update(`sandbox-storage|${seed}|${o.clientSecret}`).digest(),
  };
}

function resolveWindows(windows: Record<string, readonly SourceSystemWindow[]>): Record<string, SourceSystemWindow[]> {
  const out: Record<string, SourceSystemWindow[]> = {};
  for (const [slug, list] of Object.entries(windows)) {
    for (const w of list) {
      if (!Number.isInteger(w.limit) || w.limit < 1 || !Number.isFinite(w.windowMs) || w.windowMs <= 0) {
        throw new RangeError(
          `sandbox rateLimits.sourceSystemWindows.${slug}: each window needs a whole limit >= 1 and a windowMs > 0 (got ${JSON.stringify(w)})`,
        );
      }
    }
    out[slug] = list.map((w) => ({ limit: w.limit, windowMs: w.windowMs }));
  }
  return out;
}

function cacheBytes(mb: number): number {
  if (!Number.isFinite(mb) || mb < 0) throw new RangeError(`sandbox recordCacheMb must be a number >= 0 (got ${mb})`);
  return Math.floor(mb * 1024 * 1024);
}

function resolveSizes(sizes: SandboxOptions['sizes']): Record<string, number> {
  const out: Record<string, number> = {};
  for (const [resource, n] of Object.entries(sizes ?? {})) {
    if (n === undefined) continue;
    if (!Number.isFinite(n) || n < 0) throw new RangeError(`sandbox sizes.${resource} must be a number >= 0 (got ${n})`);
    out[resource] = Math.floor(n);
  }
  return out;
}

function resolveSkew(skew: ProjectSkew | undefined): ProjectSkew | undefined {
  if (!skew) return undefined;
  for (const [k, n] of Object.entries(skew)) {
    if (!Number.isInteger(n) || n < 0) throw new RangeError(`sandbox projectSkew.${k} must be a whole number >= 0 (got ${n})`);
  }
  return { bigProjects: skew.bigProjects, big: skew.big, small: skew.small };
}
