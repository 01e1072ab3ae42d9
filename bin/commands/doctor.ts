// `mirror doctor`: checks what the mirror needs, each with what to do when it is wrong: the
// configuration, Postgres, migrations, clocks, Temporal (and a worker on the task queue), the upstream
// and its credentials, the mirror's own credentials and keys, and the API; and which release this CLI,
// the workers polling the task queue and the API run (a mixed set is a warning). Exits 1 if a check failed.
import { request } from 'undici';
import { unlimitedGovernor } from '../../connectors/governor.ts';
import { linkTokenSchema } from '../../connectors/schemas.ts';
import type { UpstreamClient } from '../../connectors/upstream-client.ts';
import { buildInfo, releaseLabel } from '../../lib/build-info.ts';
import { parseConfig, loadEnvFile, type Config } from '../../lib/config.ts';
import { decryptSecret, decodeKey, sha256Hex } from '../../lib/crypto.ts';
import { RateLimitedError, UpstreamAuthError, UpstreamError } from '../../lib/errors.ts';
import { DiagnosticConnection } from '../../mirror/ops/diagnostics.ts';
import { readMigrations } from '../../mirror/db/migrate.ts';
import { placeholderSecrets } from './migrate.ts';
import { exitCode, oneLine, postgresProblem, safeUrl, UsageError, type Command } from './shared.ts';

type CheckStatus = 'ok' | 'warn' | 'fail' | 'skip';

export interface Check {
  name: string;
  status: CheckStatus;
  detail: string;
  /** What to do about it (for warn and fail). */
  fix?: string;
}

interface DoctorOptions {
  /** Per network check (default 5 s). */
  timeoutMs?: number;
  /** Skip the API check (no API is expected to run). */
  api?: boolean;
}

const secretNames = ['UPSTREAM_CLIENT_ID', 'UPSTREAM_CLIENT_SECRET', 'MIRROR_CLIENT_ID', 'MIRROR_CLIENT_SECRET', 'MIRROR_ENCRYPTION_KEY', 'MIRROR_SIGNING_KEY'];

/** Runs every check against the configuration in `env`. Never throws: a failure is a check. */
export async function diagnose(env: Record<string, string | undefined>, options: DoctorOptions = {}): Promise<Check[]> {
  const timeoutMs = options.timeoutMs ?? 5000;
  const checks: Check[] = [];
  const add = (c: Check) => checks.push(c);
  const info = buildInfo();
  add({
    name: 'release',
    status: 'ok',
    detail: `this CLI runs construction-mirror ${info.version}, commit ${info.commit ?? 'unknown (no MIRROR_COMMIT and no git)'}`,
  });
  const settings = checkConfig(env, add);
  if (!settings) return checks;
  const { config, broken } = settings;
  const { db, skewMs } = await checkPostgres(config, timeoutMs, add);
  try {
    const migrated = db ? await checkMigrations(db, add) : false;
    if (!db) add({ name: 'migrations', status: 'skip', detail: 'needs Postgres' });
    await checkTemporal(config, timeoutMs, add);
    // The upstream's checks spend the shared budget, whose table needs Postgres and the migrations.
    const upstreamConfigured = !broken.has('UPSTREAM_CLIENT_ID') && !broken.has('UPSTREAM_CLIENT_SECRET');
    const upstream = upstreamConfigured ? await doctorUpstream(config, db !== undefined && migrated) : undefined;
    try {
      const answer = upstream ? await checkUpstream(upstream.client, config, timeoutMs, add) : { ok: false, skewMs: undefined };
      if (!upstream) add({ name: 'upstream', status: 'skip', detail: 'needs UPSTREAM_CLIENT_ID and UPSTREAM_CLIENT_SECRET' });
      checkClocks(skewMs, answer.skewMs, add);
      if (db && migrated && ![...broken].some((k) => k.startsWith('MIRROR_')))
        await checkCredentials(db, config, timeoutMs, answer.ok ? upstream?.client : undefined, add);
      else add({ name: 'credentials', status: 'skip', detail: 'needs Postgres, migrations and the MIRROR_* settings' });
    } finally {
      await upstream?.close();
    }
  } finally {
    await db?.close().catch(() => undefined);
  }
  if (options.api !== false) await checkApi(config, timeoutMs, add);
  return checks;
}

/** 1. Configuration. With only secrets missing, the other checks go on with stand-ins for them. */
function checkConfig(env: Record<string, string | undefined>, add: (c: Check) => void): { config: Config; broken: Set<string> } | undefined {
  const broken = new Set<string>();
  try {
    const config = parseConfig(env);
    add({
      name: 'config',
      status: 'ok',
      detail: `settings parse (upstream ${config.UPSTREAM_BASE_URL}, Temporal ${config.TEMPORAL_ADDRESS}, task queue ${config.TEMPORAL_TASK_QUEUE})`,
    });
    return { config, broken };
  } catch (error) {
    const details = ((error as { details?: { path?: string; message: string }[] }).details ?? []).map((d) => d.message);
    for (const d of details) broken.add(d.split(':')[0] ?? '');
    const onlySecrets = [...broken].every((k) => secretNames.includes(k));
    add({
      name: 'config',
      status: 'fail',
      detail: details.length ? details.join('; ') : oneLine((error as Error).message),
      fix: onlySecrets
        ? 'run `npx mirror setup` (it generates the missing secrets into .env.local), or set them in the environment.'
        : 'set these in the environment or in .env.local (docs/configuration.md lists every variable).',
    });
    if (!onlySecrets) return undefined;
    // Go on with stand-ins for the broken secrets: Postgres and Temporal need none of them.
    const rest = Object.fromEntries(Object.entries(env).filter(([k]) => !broken.has(k)));
    return { config: parseConfig({ ...rest, ...placeholderSecrets(rest) }), broken };
  }
}

/** 2. Postgres, and the clock against it. */
async function checkPostgres(config: Config, timeoutMs: number, add: (c: Check) => void): Promise<{ db?: DiagnosticConnection; skewMs?: number }> {
  let db: DiagnosticConnection | undefined;
  try {
    db = await DiagnosticConnection.open(config.DATABASE_URL, timeoutMs);
    const before = Date.now();
    const server = await db.serverClock();
    const skewMs = server.now.getTime() - (before + Date.now()) / 2;
    add({ name: 'postgres', status: 'ok', detail: `${safeUrl(config.DATABASE_URL)} answers (PostgreSQL ${server.version})` });
    return { db, skewMs };
  } catch (error) {
    await db?.close().catch(() => undefined);
    const p = postgresProblem(error, config.DATABASE_URL);
    add({
      name: 'postgres',
      status: 'fail',
      detail: p ? `${p.problem} (${safeUrl(config.DATABASE_URL)})` : `${safeUrl(config.DATABASE_URL)}: ${oneLine((error as Error).message)}`,
      fix: p?.fix ?? 'check DATABASE_URL and that the server accepts connections.',
    });
    return {};
  }
}

/** 3. Migrations: all applied, none failed or changed since. */
async function checkMigrations(db: DiagnosticConnection, add: (c: Check) => void): Promise<boolean> {
  try {
    const files = await readMigrations();
    const rows = await db.appliedMigrations();
    if (!rows) {
      add({ name: 'migrations', status: 'fail', detail: `none applied (${files.length} to apply)`, fix: 'run `npx mirror migrate`.' });
      return false;
    }
    const failed = rows.filter((r) => r.finished_at === null && r.rolled_back_at === null);
    const applied = new Map(rows.filter((r) => r.finished_at !== null).map((r) => [r.migration_name, r.checksum]));
    const pending = files.filter((f) => !applied.has(f.name));
    const changed = files.filter((f) => applied.has(f.name) && applied.get(f.name) !== f.checksum);
    if (failed.length)
      add({
        name: 'migrations',
        status: 'fail',
        detail: `${failed[0]!.migration_name} failed and was not rolled back`,
        fix: 'see `npx mirror migrate` for how to recover.',
      });
    else if (changed.length)
      add({
        name: 'migrations',
        status: 'fail',
        detail: `${changed.map((f) => f.name).join(', ')} changed after it was applied`,
        fix: 'restore the applied migration file and add a new migration instead.',
      });
    else if (pending.length)
      add({
        name: 'migrations',
        status: 'fail',
        detail: `${pending.length} pending (${pending.map((f) => f.name).join(', ')})`,
        fix: 'run `npx mirror migrate`.',
      });
    else {
      add({ name: 'migrations', status: 'ok', detail: `${applied.size} applied, none pending` });
      return true;
    }
    return false;
  } catch (error) {
    add({ name: 'migrations', status: 'fail', detail: oneLine((error as Error).message), fix: 'run `npx mirror migrate`.' });
    return false;
  }
}

/** 6. Clocks: this machine against Postgres (and the upstream's Date header, to the second). */
function checkClocks(skewMs: number | undefined, upstreamSkew: number | undefined, add: (c: Check) => void): void {
  if (skewMs === undefined && upstreamSkew === undefined) {
    add({ name: 'clock', status: 'skip', detail: 'needs Postgres or the upstream' });
    return;
  }
  const parts = [
    ...(skewMs !== undefined ? [`Postgres ${(skewMs / 1000).toFixed(2)} s`] : []),
    ...(upstreamSkew !== undefined ? [`upstream ${Math.round(upstreamSkew / 1000) || 0} s`] : []),
  ];
  const worst = Math.max(Math.abs(skewMs ?? 0), Math.abs(upstreamSkew ?? 0) - 1000);
  const fix = 'synchronise the clocks (e.g. `timedatectl set-ntp true`, or chrony): rate-limit resets and freshness are computed from them.';
  if (worst > 30_000) add({ name: 'clock', status: 'fail', detail: `this machine's clock is off: ${parts.join(', ')}`, fix });
  else if (worst > 2_000) add({ name: 'clock', status: 'warn', detail: `clocks differ: ${parts.join(', ')}`, fix });
  else add({ name: 'clock', status: 'ok', detail: `this machine agrees with ${parts.join(' and ')}` });
}

/**
 * 8. The API (only a warning: the CLI works without it), and the release it runs. Its /healthz is the
 * mirror's own process, not the upstream: asked directly.
 */
async function checkApi(config: Config, timeoutMs: number, add: (c: Check) => void): Promise<void> {
  const host = config.API_HOST === '0.0.0.0' ? '127.0.0.1' : config.API_HOST;
  const url = `http://${host}:${config.API_PORT}/healthz`;
  const release = releaseLabel();
  try {
    const res = await request(url, { signal: AbortSignal.timeout(timeoutMs) });
    const body = (await res.body.json().catch(() => ({}))) as { version?: unknown; commit?: unknown };
    const apiRelease =
      typeof body.version === 'string' ? releaseLabel({ version: body.version, commit: typeof body.commit === 'string' ? body.commit : null }) : 'unknown';
    if (res.statusCode < 200 || res.statusCode >= 300)
      add({ name: 'api', status: 'warn', detail: `${url} answered ${res.statusCode}`, fix: 'check the API process logs.' });
    else if (apiRelease !== release)
      add({
        name: 'api',
        status: 'warn',
        detail: `${url} answers, running release ${apiRelease}; this CLI is ${release}`,
        fix: 'restart the API on the new release.',
      });
    else add({ name: 'api', status: 'ok', detail: `${url} answers, release ${apiRelease}` });
  } catch {
    add({
      name: 'api',
      status: 'warn',
      detail: `no API answers at ${url}`,
      fix: 'start it with `npx mirror api` (applications read the mirror through it).',
    });
  }
}

async function checkTemporal(config: Config, timeoutMs: number, add: (c: Check) => void): Promise<void> {
  const { Connection } = await import('@temporalio/client');
  let connection: Awaited<ReturnType<typeof Connection.connect>> | undefined;
  try {
    connection = await Connection.connect({ address: config.TEMPORAL_ADDRESS, connectTimeout: timeoutMs });
  } catch {
    add({
      name: 'temporal',
      status: 'fail',
      detail: `no Temporal server answers at ${config.TEMPORAL_ADDRESS}`,
      fix: 'start one (`temporal server start-dev`, `npx mirror demo`, or `docker compose up -d temporal`) or set TEMPORAL_ADDRESS.',
    });
    add({ name: 'worker', status: 'skip', detail: 'needs Temporal' });
    return;
  }
  try {
    const deadline = () => new Date(Date.now() + timeoutMs);
    try {
      await connection.withDeadline(deadline(), () => connection.workflowService.describeNamespace({ namespace: config.TEMPORAL_NAMESPACE }));
      add({ name: 'temporal', status: 'ok', detail: `${config.TEMPORAL_ADDRESS}, namespace ${config.TEMPORAL_NAMESPACE}` });
    } catch (error) {
      add({
        name: 'temporal',
        status: 'fail',
        detail: `${config.TEMPORAL_ADDRESS} answers but namespace "${config.TEMPORAL_NAMESPACE}" is unusable (${oneLine((error as Error).message)})`,
        fix: `create it (\`temporal operator namespace create --namespace ${config.TEMPORAL_NAMESPACE}\`) or set TEMPORAL_NAMESPACE.`,
      });
      add({ name: 'worker', status: 'skip', detail: 'needs the namespace' });
      return;
    }
    const res = await connection.withDeadline(deadline(), () =>
      connection.workflowService.describeTaskQueue({ namespace: config.TEMPORAL_NAMESPACE, taskQueue: { name: config.TEMPORAL_TASK_QUEUE }, taskQueueType: 1 }),
    );
    const pollers = res.pollers?.length ?? 0;
    // Each worker's identity ends with the release it runs (lib/build-info.ts `workerIdentity`).
    const releases = [...new Set((res.pollers ?? []).map((p) => /construction-mirror\/(\S+)$/.exec(p.identity ?? '')?.[1] ?? 'unknown'))].sort();
    const others = releases.filter((r) => r !== releaseLabel());
    if (pollers === 0)
      add({
        name: 'worker',
        status: 'warn',
        detail: `no worker polls task queue "${config.TEMPORAL_TASK_QUEUE}": syncs would wait`,
        fix: 'start one with `npx mirror worker` (as many as you like).',
      });
    else if (others.length > 0) {
      add({
        name: 'worker',
        status: 'warn',
        detail: `${pollers} worker poller(s) on task queue "${config.TEMPORAL_TASK_QUEUE}" run ${releases.join(', ')}; this CLI is ${releaseLabel()}`,
        fix: 'finish the upgrade: restart every worker on the new release (a worker of an older release cannot replay a workflow a newer one patched).',
      });
    } else
      add({
        name: 'worker',
        status: 'ok',
        detail: `${pollers} worker poller(s) on task queue "${config.TEMPORAL_TASK_QUEUE}", release ${releases.join(', ')}`,
      });
  } catch (error) {
    add({
      name: 'worker',
      status: 'warn',
      detail: `could not ask Temporal about task queue "${config.TEMPORAL_TASK_QUEUE}": ${oneLine((error as Error).message)}`,
      fix: 'check the Temporal server.',
    });
  } finally {
    await connection.close().catch(() => undefined);
  }
}

/**
 * The upstream client the doctor's checks call through, as every process has it, trying each call
 * once (a check says what it found). It spends the shared budget when its table is there (Postgres
 * answers, migrations applied); without them nothing else runs either, and nothing is spent.
 */
async function doctorUpstream(config: Config, withBudget: boolean): Promise<{ client: UpstreamClient; close(): Promise<void> }> {
  // Loaded when used: every command of the CLI loads this file.
  const [{ sharedGovernor, upstreamClient }, { createPool }, { createLogger }] = await Promise.all([
    import('../services.ts'),
    import('../../mirror/db/pool.ts'),
    import('../../lib/logger.ts'),
  ]);
  const logger = createLogger({ level: 'silent' });
  const pool = withBudget ? createPool(config.DATABASE_URL, { max: 2, application: 'mirror-doctor' }) : undefined;
  const governor = pool ? sharedGovernor(config, pool, logger) : undefined;
  const client = upstreamClient(config, governor ?? unlimitedGovernor, logger, { maxAttempts: 1 });
  return {
    client: client.withPriority('interactive'),
    async close() {
      await client.close().catch(() => undefined);
      await governor?.close().catch(() => undefined);
      await pool?.end().catch(() => undefined);
    },
  };
}

/** 5. Creates a throwaway link token: the cheapest call that proves the client credentials. Returns the clock skew. */
async function checkUpstream(
  client: UpstreamClient,
  config: Config,
  timeoutMs: number,
  add: (c: Check) => void,
): Promise<{ ok: boolean; skewMs: number | undefined }> {
  const base = config.UPSTREAM_BASE_URL.replace(/\/+$/, '');
  const started = Date.now();
  try {
    const res = await client.request(
      {
        method: 'POST',
        path: '/link/token/create',
        body: { reference_id: 'mirror-doctor' },
        what: 'a link token',
        signal: AbortSignal.timeout(Math.max(timeoutMs, 5000)),
      },
      linkTokenSchema,
    );
    add({ name: 'upstream', status: 'ok', detail: `${base} accepted the client credentials (${Date.now() - started} ms)` });
    const date = res.headers.date;
    return { ok: true, skewMs: typeof date === 'string' ? Date.parse(date) - (started + Date.now()) / 2 : undefined };
  } catch (error) {
    add(upstreamProblem(error, base));
    return { ok: false, skewMs: undefined };
  }
}

/** What a failed link token request says about the upstream's settings. */
function upstreamProblem(error: unknown, base: string): Check {
  if (error instanceof UpstreamAuthError) {
    const what = /version/i.test(error.message) ? 'UPSTREAM_API_VERSION' : 'UPSTREAM_CLIENT_ID / UPSTREAM_CLIENT_SECRET';
    return {
      name: 'upstream',
      status: 'fail',
      detail: `${base} refused ${what} (${oneLine(error.message)})`,
      fix:
        what === 'UPSTREAM_API_VERSION'
          ? 'set UPSTREAM_API_VERSION to the version the upstream serves.'
          : 'set UPSTREAM_CLIENT_ID and UPSTREAM_CLIENT_SECRET to the credentials the upstream issued (for the sandbox: the ones in .env.local it was started with; restart it after changing them).',
    };
  }
  if (error instanceof RateLimitedError) {
    return {
      name: 'upstream',
      status: 'warn',
      detail: `the upstream's rate budget is spent for now (${oneLine(error.message)})`,
      fix: 'run `npx mirror doctor` again once the window resets.',
    };
  }
  if (error instanceof UpstreamError && error.upstreamStatus !== undefined) {
    return {
      name: 'upstream',
      status: 'fail',
      detail: `${base} answered ${error.upstreamStatus} to a link token request (${oneLine(error.message)})`,
      fix: "check UPSTREAM_BASE_URL: it must be the unified API's base URL.",
    };
  }
  return {
    name: 'upstream',
    status: 'fail',
    detail: `no answer from ${base} (${noAnswerReason(error)})`,
    fix: "start the sandbox (`npx mirror sandbox`) or set UPSTREAM_BASE_URL to the unified API's base URL.",
  };
}

/** Why no answer came: the connection's error code (ECONNREFUSED), else the error's name (TimeoutError). */
function noAnswerReason(error: unknown): string {
  const cause = (error instanceof UpstreamError && error.cause !== undefined ? error.cause : error) as { code?: unknown; name?: unknown };
  return typeof cause.code === 'string' ? cause.code : typeof cause.name === 'string' ? cause.name : 'no answer';
}

/** 7. The mirror's own credentials and keys; the linked accounts' tokens, checked upstream when `upstream` (one that answered) is given. */
async function checkCredentials(
  db: DiagnosticConnection,
  config: Config,
  timeoutMs: number,
  upstream: UpstreamClient | undefined,
  add: (c: Check) => void,
): Promise<void> {
  const secretHash = await db.clientSecretHash(config.MIRROR_CLIENT_ID);
  if (secretHash === undefined) {
    add({
      name: 'credentials',
      status: 'fail',
      detail: `MIRROR_CLIENT_ID ${config.MIRROR_CLIENT_ID} is not registered: the API refuses it`,
      fix: 'run `npx mirror setup` (it registers MIRROR_CLIENT_ID and MIRROR_CLIENT_SECRET).',
    });
  } else if (secretHash !== sha256Hex(config.MIRROR_CLIENT_SECRET)) {
    add({
      name: 'credentials',
      status: 'fail',
      detail: 'MIRROR_CLIENT_SECRET is not the registered secret of MIRROR_CLIENT_ID',
      fix: 'run `npx mirror setup` to register the new secret (applications must then send it), or restore the old one.',
    });
  } else add({ name: 'credentials', status: 'ok', detail: `MIRROR_CLIENT_ID is registered with this secret` });

  const accounts = await db.linkedAccountTokens(3);
  if (accounts.length === 0) {
    add({ name: 'accounts', status: 'ok', detail: 'no linked account yet (`npx mirror link` links one)' });
    return;
  }
  const tokens: { id: string; token: string }[] = [];
  try {
    const key = decodeKey(config.MIRROR_ENCRYPTION_KEY);
    for (const a of accounts) tokens.push({ id: a.id, token: decryptSecret(key, a.token_ciphertext) });
  } catch {
    add({
      name: 'accounts',
      status: 'fail',
      detail: 'MIRROR_ENCRYPTION_KEY cannot decrypt the stored account tokens',
      fix: 'restore the MIRROR_ENCRYPTION_KEY that encrypted them (docs/operating.md explains rotating it), or link the accounts again.',
    });
    return;
  }
  if (!upstream) {
    add({ name: 'accounts', status: 'skip', detail: `${tokens.length} account tokens decrypt; checking them upstream needs a working upstream` });
    return;
  }
  const refused: string[] = [];
  for (const t of tokens) {
    try {
      await upstream.request({
        method: 'GET',
        path: '/link/account',
        accountToken: t.token,
        budget: { account: t.id },
        what: `the linked account ${t.id}`,
        signal: AbortSignal.timeout(Math.max(timeoutMs, 5000)),
      });
    } catch (error) {
      if (error instanceof UpstreamAuthError) refused.push(t.id);
      // Any other answer is not a refusal of the token.
      else if (!(error instanceof UpstreamError && error.upstreamStatus !== undefined)) {
        add({ name: 'accounts', status: 'skip', detail: `${tokens.length} account tokens decrypt; the upstream did not answer to check them` });
        return;
      }
    }
  }
  add(
    refused.length
      ? {
          name: 'accounts',
          status: 'warn',
          detail: `the upstream refuses the token of ${refused.join(', ')}`,
          fix: 'link them again (`npx mirror link --reference-id <id>`), or unlink them (`npx mirror unlink --account <id>`).',
        }
      : { name: 'accounts', status: 'ok', detail: `account tokens decrypt and the upstream accepts them (${tokens.length} checked)` },
  );
}

const marks: Record<CheckStatus, string> = { ok: 'ok  ', warn: 'WARN', fail: 'FAIL', skip: 'skip' };

export function formatChecks(checks: readonly Check[]): string {
  const width = Math.max(...checks.map((c) => c.name.length));
  const lines = checks.flatMap((c) => [
    `  ${marks[c.status]}  ${c.name.padEnd(width)}  ${c.detail}`,
    ...(c.fix && c.status !== 'ok' ? [`        ${' '.repeat(width)}  fix: ${c.fix}`] : []),
  ]);
  const failed = checks.filter((c) => c.status === 'fail');
  const warned = checks.filter((c) => c.status === 'warn');
  lines.push(
    '',
    failed.length
      ? `${failed.length} problem${failed.length > 1 ? 's' : ''} (${failed.map((c) => c.name).join(', ')}): fix ${failed.length > 1 ? 'them' : 'it'} as said above, then run \`npx mirror doctor\` again.`
      : `All checks passed${warned.length ? ` (${warned.length} warning${warned.length > 1 ? 's' : ''}: ${warned.map((c) => c.name).join(', ')})` : ''}.`,
  );
  return lines.join('\n');
}

export const doctorCommand: Command = {
  summary: 'Check Postgres, Temporal, the upstream, credentials, migrations and clocks; say what to fix',
  usage: 'mirror doctor [--json] [--no-api] [--timeout 5]',
  help:
    'Each check prints ok, WARN or FAIL, and what to do about a problem. Exits 0 when nothing failed (warnings allowed), 1 otherwise.\n' +
    'The upstream check creates a throwaway link token (reference id "mirror-doctor"): the cheapest call that proves the client credentials. --no-api skips the API check; --timeout is how long each network check may take, in seconds (default 5).',
  options: { json: { type: 'boolean' }, 'no-api': { type: 'boolean' }, timeout: { type: 'string' } },
  async run(v) {
    const seconds = v.timeout === undefined ? 5 : Number(v.timeout);
    if (!(seconds > 0)) throw new UsageError('--timeout is a number of seconds.');
    loadEnvFile();
    const checks = await diagnose(process.env, { api: !v['no-api'], timeoutMs: seconds * 1000 });
    if (v.json) console.log(JSON.stringify({ ok: !checks.some((c) => c.status === 'fail'), checks }, null, 2));
    else console.log(`mirror doctor\n${formatChecks(checks)}`);
    return checks.some((c) => c.status === 'fail') ? exitCode.failed : exitCode.ok;
  },
};
