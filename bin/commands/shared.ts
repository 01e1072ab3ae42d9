// What the CLI's commands share: the command shape, exit codes, one-line errors that say what to do,
// quiet services, a Temporal connection with a clear failure, and plain-text tables.
import type { ParseArgsConfig } from 'node:util';
import { loadEnvFile, parseConfig, type Config } from '../../lib/config.ts';
import { ConfigError, MirrorError, NotFoundError, UpstreamAuthError, UpstreamError } from '../../lib/errors.ts';
import type { Services } from '../services.ts';

export type Values = Record<string, string | boolean | undefined>;

export interface Command {
  summary: string;
  usage: string;
  /** More on what it does, its options and an example or two (shown by --help). */
  help?: string;
  options?: ParseArgsConfig['options'];
  run(values: Values, positionals: string[]): Promise<number | void>;
}

/** Exit codes every command keeps to (docs/operating.md "Operating the mirror"). */
export const exitCode = {
  ok: 0,
  /** The command ran and something failed: a stream, a check, a delivery. */
  failed: 1,
  /** Wrong flags or arguments. */
  usage: 2,
  /** The set-up is not right: configuration, Postgres, Temporal or the upstream. */
  environment: 3,
  /** What was named does not exist (an account id, ...). */
  notFound: 4,
} as const;

/** Wrong use of a command: its usage is shown, exit 2. */
export class UsageError extends Error {}

/** One line: what went wrong and what to do. */
export function oneLine(message: string): string {
  return message
    .replace(/\s*\n\s*-?\s*/g, '; ')
    .replace(/;\s*;/g, ';')
    .trim();
}

const doctorHint = 'Run `npx mirror doctor` to check the set-up.';

/** The exit code and the one line to print for an error that ended a command. */
export function describeFailure(error: unknown, config?: Partial<Config>): { code: number; message: string } {
  if (error instanceof UsageError) return { code: exitCode.usage, message: error.message };
  if (error instanceof ConfigError) return { code: exitCode.environment, message: oneLine(error.message) };
  if (error instanceof NotFoundError)
    return { code: exitCode.notFound, message: `${sentence(oneLine(error.message))} \`npx mirror accounts\` lists the linked accounts.` };
  if (error instanceof UpstreamAuthError) {
    return {
      code: exitCode.environment,
      message: `The upstream refused the credentials (${oneLine(error.message)}): set UPSTREAM_CLIENT_ID and UPSTREAM_CLIENT_SECRET to what the upstream issued. ${doctorHint}`,
    };
  }
  if (error instanceof UpstreamError && error.upstreamStatus === undefined) {
    return {
      code: exitCode.environment,
      message: `${sentence(oneLine(error.message))} Start the upstream (\`npx mirror sandbox\`) or fix UPSTREAM_BASE_URL. ${doctorHint}`,
    };
  }
  const pg = postgresProblem(error, config?.DATABASE_URL);
  if (pg) return { code: exitCode.environment, message: `${pg.problem}: ${pg.fix}` };
  if (error instanceof MirrorError) return { code: exitCode.failed, message: oneLine(error.message) };
  const message = error instanceof Error ? error.message : String(error);
  return { code: exitCode.failed, message: `${sentence(oneLine(message))} ${doctorHint}` };
}

/** Ends a message with a full stop (once). */
function sentence(s: string): string {
  return /[.!?]$/.test(s) ? s : `${s}.`;
}

function causes(error: unknown): { code?: string; message?: string }[] {
  const out: { code?: string; message?: string }[] = [];
  let e: unknown = error;
  for (let i = 0; i < 6 && e && typeof e === 'object'; i++) {
    out.push(e);
    const inner = e as { cause?: unknown; errors?: unknown[] };
    e = inner.cause ?? inner.errors?.[0];
  }
  return out;
}

/** Redacts the password of a connection URL before it is shown. */
export function safeUrl(url: string): string {
  try {
    const u = new URL(url);
    if (u.password) u.password = '***';
    return u.toString();
  } catch {
    return url;
  }
}

/** A Postgres failure in words, with its fix; undefined for other errors. */
export function postgresProblem(error: unknown, databaseUrl = 'postgresql://postgres@127.0.0.1:5432/mirror'): { problem: string; fix: string } | undefined {
  let where = databaseUrl;
  let name = 'mirror';
  try {
    const u = new URL(databaseUrl);
    where = `${u.hostname}:${u.port || 5432}`;
    name = decodeURIComponent(u.pathname.slice(1)) || 'postgres';
  } catch {
    // keep the raw value
  }
  for (const c of causes(error)) {
    const code = c.code ?? '';
    if (
      code === 'ECONNREFUSED' ||
      code === 'ENOTFOUND' ||
      code === 'EHOSTUNREACH' ||
      code === 'ETIMEDOUT' ||
      /connect(ion)? (refused|timeout|terminated)/i.test(c.message ?? '')
    ) {
      return {
        problem: `No PostgreSQL answers at ${where}`,
        fix: 'start it (e.g. `pg_ctlcluster 15 main start`, or `docker compose up -d postgres`) or set DATABASE_URL.',
      };
    }
    if (code === '3D000')
      return { problem: `Database "${name}" does not exist at ${where}`, fix: 'run `npx mirror setup` (or `npx mirror migrate`) to create and migrate it.' };
    if (code === '42P01') return { problem: `Database "${name}" is not migrated`, fix: 'run `npx mirror migrate`.' };
    if (code === '28P01' || code === '28000') return { problem: `PostgreSQL at ${where} refused the login`, fix: 'fix the user and password in DATABASE_URL.' };
  }
  return undefined;
}

/** Configuration for a command: .env.local, then the environment (which wins). */
export function cliConfig(): Config {
  loadEnvFile();
  return parseConfig();
}

/** Services for a command, silent, after checking that Postgres answers (so failures read well). */
export async function cliServices(config: Config = cliConfig()): Promise<Services> {
  const { createServices } = await import('../services.ts');
  const { assertSchemaReachable } = await import('../../mirror/db/database.ts');
  const { createLogger } = await import('../../lib/logger.ts');
  const services = createServices(config, { name: 'cli', poolSize: 4, logger: createLogger({ level: 'silent' }) });
  try {
    await assertSchemaReachable(services.pool);
  } catch (error) {
    await services.close();
    const p = postgresProblem(error, config.DATABASE_URL);
    if (p) throw new ConfigError(`${p.problem}: ${p.fix}`, { cause: error });
    throw error;
  }
  return services;
}

interface TemporalHandle {
  sync: import('../../api/sync-control.ts').SyncControl;
  close(): Promise<void>;
}

/** A Temporal client for the configured server, or a one-line error that says how to get one. */
export async function connectTemporal(config: Config): Promise<TemporalHandle> {
  const { Client, Connection } = await import('@temporalio/client');
  const { accountSyncControl } = await import('../services.ts');
  let connection;
  try {
    connection = await Connection.connect({ address: config.TEMPORAL_ADDRESS, connectTimeout: '5s' });
  } catch (error) {
    throw new ConfigError(
      `Temporal does not answer at ${config.TEMPORAL_ADDRESS}: start it (\`npx mirror demo\` starts a dev server, or \`temporal server start-dev\`) or set TEMPORAL_ADDRESS.`,
      { cause: error },
    );
  }
  const client = new Client({ connection, namespace: config.TEMPORAL_NAMESPACE });
  const sync = accountSyncControl(client, config.TEMPORAL_TASK_QUEUE, config);
  return { sync, close: () => connection.close() };
}

/** The value of a required string option, or a usage error naming it. */
export function required(values: Values, name: string, hint = ''): string {
  const v = values[name];
  if (typeof v !== 'string' || v === '') throw new UsageError(`name the ${name.replace(/-/g, ' ')} with --${name} <value>${hint ? ` (${hint})` : ''}.`);
  return v;
}

const uuid = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/** `--account`: a full id, or a unique prefix of one (as `status` and `accounts` print them). */
export async function resolveAccount(services: Services, ref: string): Promise<string> {
  if (uuid.test(ref)) return (await services.accounts.get(ref.toLowerCase())).id;
  const matches = (await services.accounts.list()).filter((a) => a.id.startsWith(ref.toLowerCase()) || a.referenceId === ref);
  if (matches.length === 1) return matches[0]!.id;
  if (matches.length === 0) throw new NotFoundError(`No linked account matches "${ref}"`);
  throw new UsageError(`"${ref}" matches ${matches.length} accounts: give more of the id.`);
}

/** A plain-text table; columns whose header starts with '>' are right-aligned. */
export function table(headers: string[], rows: (string | number | null | undefined)[][]): string {
  const right = headers.map((h) => h.startsWith('>'));
  const head = headers.map((h) => h.replace(/^>/, ''));
  const cells = rows.map((r) => r.map((c) => (c === null || c === undefined ? '' : String(c))));
  const widths = head.map((h, i) => Math.max(h.length, ...cells.map((r) => (r[i] ?? '').length)));
  const line = (r: string[]) =>
    r
      .map((c, i) => (right[i] ? c.padStart(widths[i]!) : c.padEnd(widths[i]!)))
      .join('  ')
      .trimEnd();
  return [line(head), line(widths.map((w) => '-'.repeat(w))), ...cells.map(line)].join('\n');
}

export function age(seconds: number | null | undefined): string {
  if (seconds === null || seconds === undefined) return 'never';
  if (seconds < 90) return `${Math.round(seconds)}s`;
  if (seconds < 90 * 60) return `${Math.round(seconds / 60)}m`;
  if (seconds < 36 * 3600) return `${Math.round(seconds / 360) / 10}h`;
  return `${Math.round(seconds / 8640) / 10}d`;
}

export function clip(s: string | null | undefined, n: number): string {
  if (!s) return '';
  const flat = s.replace(/\s+/g, ' ');
  return flat.length > n ? `${flat.slice(0, n - 1)}…` : flat;
}
