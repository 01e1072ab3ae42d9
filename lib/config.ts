// Configuration, parsed once from the environment with zod. A process that is misconfigured refuses
// to start and lists every problem with what to set.
import { existsSync } from 'node:fs';
import { resolve } from 'node:path';
import { z } from 'zod';
import { ConfigError } from './errors.ts';

const port = z.coerce.number().int().min(0).max(65535);
const base64Key = z
  .string()
  .refine((v) => Buffer.from(v, 'base64').length === 32, 'must be 32 bytes, base64-encoded (run `npx mirror setup`)');

export const configSchema = z.object({
  DATABASE_URL: z.string().url().default('postgresql://postgres@127.0.0.1:5432/mirror'),
  TEMPORAL_ADDRESS: z.string().min(1).default('127.0.0.1:7233'),
  TEMPORAL_NAMESPACE: z.string().min(1).default('default'),
  TEMPORAL_TASK_QUEUE: z.string().min(1).default('mirror'),
  TEMPORAL_UI_URL: z.string().url().optional(),

  UPSTREAM_BASE_URL: z.string().url().default('http://127.0.0.1:4010'),
  UPSTREAM_CLIENT_ID: z.string().length(36, 'must be the 36-character client id the upstream issued'),
  UPSTREAM_CLIENT_SECRET: z.string().length(40, 'must be the 40-character client secret the upstream issued'),
  UPSTREAM_API_VERSION: z.string().min(1).default('2021-11-21'),
  /** Brand prefix of the upstream's headers (`Svc-RateLimit-Total`, ...). */
  UPSTREAM_HEADER_PREFIX: z.string().regex(/^[A-Za-z][A-Za-z0-9]*$/, 'letters and digits only').default('Svc'),
  /** Pace to published limits until the upstream's headers report its own (false for an upstream without limits). */
  UPSTREAM_ASSUME_LIMITS: z.enum(['true', 'false']).default('true').transform((v) => v === 'true'),
  UPSTREAM_TIMEOUT_MS: z.coerce.number().int().positive().default(30_000),

  MIRROR_CLIENT_ID: z.string().length(36, 'must be a 36-character id clients of the mirror present'),
  MIRROR_CLIENT_SECRET: z.string().length(40, 'must be a 40-character secret clients of the mirror present'),
  MIRROR_ENCRYPTION_KEY: base64Key,
  MIRROR_SIGNING_KEY: base64Key,

  API_HOST: z.string().default('127.0.0.1'),
  API_PORT: port.default(4000),
  PUBLIC_BASE_URL: z.string().url().optional(),
  SANDBOX_PORT: port.default(4010),
  SYNC_INCREMENTAL_MINUTES: z.coerce.number().positive().default(15),
  SYNC_FULL_HOURS: z.coerce.number().positive().default(24),
  SYNC_STREAM_CONCURRENCY: z.coerce.number().int().min(1).max(64).default(4),
  LOG_LEVEL: z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']).default('info'),
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

let cached: Config | undefined;
/** The process's configuration, parsed on first use. */
export function config(): Config {
  cached ??= parseConfig();
  return cached;
}
