// Configuration, parsed once from the environment with zod. A process that is misconfigured refuses
// to start and lists every problem with what to set.
import { existsSync } from 'node:fs';
import { resolve } from 'node:path';
import { z } from 'zod';
import { allowEntryProblem } from './address-guard.ts';
import { ConfigError } from './errors.ts';
import { parseIndexedFields } from './indexed-fields.ts';
import { parseResourceSelection } from './resource-selection.ts';

const port = z.coerce.number().int().min(0).max(65535);

const durationUnits: Record<string, number> = { ms: 1, s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000 };
/** A duration such as `30d`, `12h`, `15m`, `90s` or `500ms` (a bare number is seconds), in milliseconds. */
const duration = z
  .string()
  .trim()
  .regex(/^\d+(ms|s|m|h|d)?$/, 'must be a whole number with a unit: ms, s, m, h or d (e.g. 30d; a bare number is seconds)')
  .transform((v) => {
    const [, n, unit] = /^(\d+)(ms|s|m|h|d)?$/.exec(v)!;
    return Number(n) * durationUnits[unit ?? 's']!;
  });
const base64Key = z.string().refine((v) => Buffer.from(v, 'base64').length === 32, 'must be 32 bytes, base64-encoded (run `npx mirror setup`)');
/** Comma-separated http(s) base URLs, without credentials, query or fragment. */
const baseUrlList = z
  .string()
  .transform((v) =>
    v
      .split(',')
      .map((s) => s.trim())
      .filter((s) => s !== ''),
  )
  .pipe(
    z
      .array(
        z.url({ protocol: /^https?$/, message: 'must be http(s) URLs' }).refine((u) => {
          if (!URL.canParse(u)) return true; // z.url has said what is wrong
          const url = new URL(u);
          return !url.username && !url.password && !url.search && !url.hash && !u.includes('#');
        }, 'must be URLs without user, password, query or fragment'),
      )
      .min(1, 'must name at least one URL'),
  );

export const configSchema = z.object({
  DATABASE_URL: z.string().url().default('postgresql://postgres@127.0.0.1:5432/mirror'),
  /**
   * Streaming replicas of DATABASE_URL (comma-separated postgres URLs): the API reads lists, objects,
   * aggregates and the change feed from them, each account only once a replica has replayed its own
   * writes. Empty: every read is the primary's.
   */
  DATABASE_REPLICA_URLS: z
    .string()
    .default('')
    .transform((v) =>
      v
        .split(',')
        .map((s) => s.trim())
        .filter((s) => s !== ''),
    )
    .pipe(
      z.array(
        z
          .string()
          .refine((u) => URL.canParse(u) && /^postgres(ql)?:$/.test(new URL(u).protocol), 'must be postgres:// or postgresql:// URLs (comma-separated)'),
      ),
    ),
  /** A replica further behind the primary than this (milliseconds) is not read from until it catches up. */
  MIRROR_REPLICA_MAX_LAG_MS: z.coerce.number().int().min(0).default(5_000),
  TEMPORAL_ADDRESS: z.string().min(1).default('127.0.0.1:7233'),
  TEMPORAL_NAMESPACE: z.string().min(1).default('default'),
  TEMPORAL_TASK_QUEUE: z.string().min(1).default('mirror'),
  TEMPORAL_UI_URL: z.string().url().optional(),

  UPSTREAM_BASE_URL: z.string().url().default('http://127.0.0.1:4010'),
  UPSTREAM_CLIENT_ID: z.string().length(36, 'must be the 36-character client id the upstream issued'),
  UPSTREAM_CLIENT_SECRET: z.string().length(40, 'must be the 40-character client secret the upstream issued'),
  UPSTREAM_API_VERSION: z.string().min(1).default('2021-11-21'),
  /** Brand prefix of the upstream's headers (`Svc-RateLimit-Total`, ...). */
  UPSTREAM_HEADER_PREFIX: z
    .string()
    .regex(/^[A-Za-z][A-Za-z0-9]*$/, 'letters and digits only')
    .default('Svc'),
  /** Pace to published limits until the upstream's headers report its own (false for an upstream without limits). */
  UPSTREAM_ASSUME_LIMITS: z
    .enum(['true', 'false'])
    .default('true')
    .transform((v) => v === 'true'),
  /** Idle timeouts of an upstream request: waiting for its headers, and between two chunks of its body. */
  UPSTREAM_TIMEOUT_MS: z.coerce.number().int().positive().default(30_000),
  /** Deadline of an upstream request, headers and body together: a body that trickles in is cut here. */
  UPSTREAM_TOTAL_TIMEOUT_MS: z.coerce.number().int().positive().default(120_000),
  /**
   * Most bytes of one upstream answer, as received and once inflated (gzip, deflate): reading stops
   * there. The largest real page is about 4 MB (1000 records with source data).
   */
  UPSTREAM_MAX_BODY_BYTES: z.coerce
    .number()
    .int()
    .min(64 * 1024)
    .default(64 * 1024 * 1024),
  /**
   * The upstream's storage URLs (`{storage_url}`, comma-separated): the storage proxy fetches file
   * bytes only from `<one of these>/download/<file>` or `/preview/<file>`. Unset: UPSTREAM_BASE_URL + `/storage`
   * (where the sandbox serves its files).
   */
  UPSTREAM_STORAGE_URL: baseUrlList.optional(),
  /**
   * Most of each upstream rate budget the mirror's background work (sync pages, event fetches, async
   * polls, webhook registration) may spend in a window, in (0, 1]: a hard cap; the rest is kept for the
   * applications' forwarded calls, which may use all of it. 1 lets the sync take whole windows. Unset:
   * the applications' reserve follows their use of the recent windows (connectors/governor/reserve.ts).
   */
  MIRROR_SYNC_BUDGET_SHARE: z.coerce.number().gt(0, 'must be above 0').max(1, 'must be at most 1').optional(),
  /**
   * A forwarded call whose send slot in the account's budget is further away than this is answered
   * at once with a 429 and the upstream's rate-limit headers (as the mirror knows them), not held.
   */
  MIRROR_INTERACTIVE_MAX_WAIT_MS: z.coerce.number().int().min(0).default(2_000),
  /**
   * Fields that get an expression index at `mirror migrate` (lib/indexed-fields.ts): comma-separated
   * `<resource>.<field>[:number]`, e.g. `customers.status,customers.source_data.Region`.
   */
  MIRROR_INDEXED_FIELDS: z
    .string()
    .default('')
    .transform((v, ctx) => {
      const r = parseIndexedFields(v);
      for (const problem of r.problems) ctx.addIssue({ code: 'custom', message: problem });
      return r.fields;
    }),

  /**
   * Which resources to mirror (lib/resource-selection.ts): `*` every resource the source system serves,
   * `contract` the contract's own, or a comma-separated list of names (their parents and `projects`
   * come with them). Reads of a resource left out are forwarded to the upstream.
   */
  MIRROR_RESOURCES: z
    .string()
    .default('*')
    .transform((v, ctx) => {
      const r = parseResourceSelection(v);
      for (const problem of r.problems) ctx.addIssue({ code: 'custom', message: problem });
      return r.selection;
    }),

  MIRROR_CLIENT_ID: z.string().length(36, 'must be a 36-character id clients of the mirror present'),
  MIRROR_CLIENT_SECRET: z.string().length(40, 'must be a 40-character secret clients of the mirror present'),
  MIRROR_ENCRYPTION_KEY: base64Key,
  MIRROR_SIGNING_KEY: base64Key,

  API_HOST: z.string().default('127.0.0.1'),
  API_PORT: port.default(4000),
  /**
   * The API's timeouts on what callers send (api/request-timeouts.ts). Headers: complete within 10 s
   * of a connection's first byte (real clients send them in one packet; a slowloris never finishes).
   * Body idle: a body that pauses 10 s is stalled (TCP keeps a moving body's gaps far shorter); applies
   * to streamed pass-through uploads too, which are otherwise unbounded in time. Request: a body the
   * API buffers whole (writes, webhook deliveries, at most 10 MB) complete within 30 s. Keep-alive: an
   * idle connection closes after 5 s (Node's default; Fastify's 72 s kept idle sockets open); behind a
   * load balancer that reuses connections, set it above the balancer's own idle timeout.
   */
  API_HEADERS_TIMEOUT_MS: z.coerce.number().int().min(100).max(600_000).default(10_000),
  API_BODY_IDLE_TIMEOUT_MS: z.coerce.number().int().min(100).max(3_600_000).default(10_000),
  API_REQUEST_TIMEOUT_MS: z.coerce.number().int().min(100).max(3_600_000).default(30_000),
  API_KEEPALIVE_TIMEOUT_MS: z.coerce.number().int().min(100).max(600_000).default(5_000),
  PUBLIC_BASE_URL: z.string().url().optional(),
  /**
   * Receivers the mirror's subscribers may name although they are internal (comma-separated host
   * names, addresses, CIDR ranges; e.g. `127.0.0.1,hooks.internal,10.1.0.0/16`). Empty: callbacks
   * must resolve to public addresses only.
   */
  MIRROR_CALLBACK_ALLOW: z
    .string()
    .default('')
    .transform((v) =>
      v
        .split(',')
        .map((s) => s.trim())
        .filter((s) => s !== ''),
    )
    .superRefine((entries, ctx) => {
      for (const e of entries) {
        const problem = allowEntryProblem(e);
        if (problem) ctx.addIssue({ code: 'custom', message: problem });
      }
    }),
  SANDBOX_PORT: port.default(4010),
  /** The incremental passes' period; unset: derived from SYNC_FRESHNESS_TARGET ({@link incrementalMinutes}). */
  SYNC_INCREMENTAL_MINUTES: z.coerce.number().positive().optional(),
  SYNC_FULL_HOURS: z.coerce.number().positive().default(24),
  /** Project lists an incremental pass may visit where the source system's rate is not known; 0: as many as the source system serves resources. */
  SYNC_POLLS_PER_PASS: z.coerce.number().int().min(0).default(0),
  /** The staleness every list should be kept within ("15m", "1h", "90s"; a bare number is minutes); the mirror says when the budget cannot meet it. */
  SYNC_FRESHNESS_TARGET: z
    .string()
    .default('1h')
    .transform((v, ctx) => {
      const m = /^\s*(\d+(?:\.\d+)?)\s*(s|m|min|h)?\s*$/i.exec(v);
      if (!m || Number(m[1]) <= 0) {
        ctx.addIssue({ code: 'custom', message: `expected a duration such as 15m, 1h or 90s, got "${v}"` });
        return z.NEVER;
      }
      const unit = (m[2] ?? 'm').toLowerCase();
      return Number(m[1]) * (unit === 's' ? 1_000 : unit === 'h' ? 3_600_000 : 60_000);
    }),
  /** The most of the sync's budget incremental polling may spend (the rest: full passes, backfills, events). */
  SYNC_POLLING_SHARE: z.coerce.number().gt(0, 'must be above 0').max(1, 'must be at most 1').default(0.5),
  SYNC_STREAM_CONCURRENCY: z.coerce.number().int().min(1).max(64).default(4),
  /** Most pages one pass of a stream may take before it stops with an error (an upstream whose pages never end). */
  SYNC_MAX_PAGES_PER_PASS: z.coerce.number().int().positive().default(100_000),
  LOG_LEVEL: z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']).default('info'),
  /** How long an unlinked account's mirrored data is kept before it is purged; 0 purges at once. */
  MIRROR_RETENTION_AFTER_UNLINK: duration.default(30 * 86_400_000),
  /**
   * The first wait before a probe asks the upstream whether it takes a refused account token again;
   * each refused probe doubles it, up to MIRROR_CREDENTIALS_PROBE_MAX.
   */
  MIRROR_CREDENTIALS_PROBE_AFTER: duration.default(60_000),
  MIRROR_CREDENTIALS_PROBE_MAX: duration.default(6 * 3_600_000),
  /** An account nobody read or wrote through the mirror for this long is idle: its schedules run MIRROR_IDLE_SLOWDOWN times less often until its next use. */
  MIRROR_IDLE_AFTER: duration.default(14 * 86_400_000),
  /** How many times less often an idle account's incremental and full passes run (1: not slowed). */
  MIRROR_IDLE_SLOWDOWN: z.coerce.number().min(1, 'must be at least 1 (1 leaves idle accounts at the usual cadence)').default(8),
  /** How long a deleted record's tombstone is kept (the changes feed serves it as DELETE); never purged before every subscription has passed it. */
  MIRROR_TOMBSTONE_RETENTION: duration.default(30 * 86_400_000),
  /** How long a stream's finished passes (sync_runs) are kept; each stream's latest pass always stays. */
  MIRROR_RUN_RETENTION: duration.default(30 * 86_400_000),
  /** How long applied webhook events (the inbox), the storage proxy's access log and expired async requests are kept. */
  MIRROR_LOG_RETENTION: duration.default(30 * 86_400_000),
  /**
   * A stream whose checkpoint does not move (its next page comes back as the page before, or never
   * answers) is `stalled` after this many attempts in a row: at most 8, below the 10 attempts Temporal
   * gives a stream's activity...
   */
  MIRROR_STALL_ATTEMPTS: z.coerce.number().int().min(1).max(8).default(3),
  /** ... or once its checkpoint has not moved for this long, whatever the count. */
  MIRROR_STALL_AFTER: duration.default(15 * 60_000),
  /** A stalled stream is tried again (one attempt) after this wait, doubled by each try that does not move it, up to MIRROR_STALL_BACKOFF_MAX. */
  MIRROR_STALL_BACKOFF: duration.default(5 * 60_000),
  MIRROR_STALL_BACKOFF_MAX: duration.default(6 * 3_600_000),
  /** Opens the status page and /metrics to operators (Bearer, or Basic with user `operator`) besides the mirror's client credentials. */
  OPERATOR_TOKEN: z.string().min(16, 'must be at least 16 characters (e.g. `openssl rand -hex 24`)').optional(),
  /** Where `mirror worker` serves its own /metrics (upstream requests and 429s it made); off when unset. */
  WORKER_METRICS_PORT: port.optional(),
});

export type Config = z.infer<typeof configSchema>;

/** The git-ignored file `npx mirror setup` writes the generated secrets to. */
export const envFileName = '.env.local';

/** Loads `.env.local` from `dir` into process.env without overriding what is already set. */
export function loadEnvFile(dir = process.cwd()): void {
  const file = resolve(dir, envFileName);
  if (existsSync(file)) process.loadEnvFile(file);
}

export function parseConfig(env: Record<string, string | undefined> = process.env): Config {
  const result = configSchema.safeParse(env);
  if (result.success) return result.data;
  const details = result.error.issues.map((issue) => ({
    path: issue.path.join('.'),
    message: `${issue.path.join('.')}: ${issue.message}`,
  }));
  throw new ConfigError(
    `Invalid configuration:\n${details.map((d) => `  - ${d.message}`).join('\n')}\n` +
      'Set these in the environment or in .env.local (`npx mirror setup` creates one).',
    { details },
  );
}

/**
 * The incremental passes' period in minutes: SYNC_INCREMENTAL_MINUTES, else a quarter of the freshness
 * target, between 1 and 15 minutes. Lists are verified at passes, so a list's longest wait is its
 * interval rounded up to whole passes: passes a quarter of the target apart leave the scheduler room to
 * keep lists within it, and the default target (1 h) keeps the 15 minutes of before.
 */
export function incrementalMinutes(config: Pick<Config, 'SYNC_INCREMENTAL_MINUTES' | 'SYNC_FRESHNESS_TARGET'>): number {
  return config.SYNC_INCREMENTAL_MINUTES ?? Math.min(15, Math.max(1, config.SYNC_FRESHNESS_TARGET / 60_000 / 4));
}
