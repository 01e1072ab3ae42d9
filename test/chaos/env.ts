// A whole mirror for a chaos test, as real processes: its own database, the sandbox upstream (in this
// process: it is the oracle and the fault injector), the Temporal dev server, one `mirror worker`
// process and one `mirror api` process on a fixed port (webhook callbacks point at it, through a
// small recording proxy that learns the webhook Authorization values for the secrets scan).
import assert from 'node:assert/strict';
import { randomBytes, randomUUID } from 'node:crypto';
import { createServer, type Server } from 'node:http';
import { join } from 'node:path';
import { Client, Connection } from '@temporalio/client';
import { request as undiciRequest } from 'undici';
import { upsertApiClient } from '../../api/auth.ts';
import { linkWithPublicToken } from '../../api/link-service.ts';
import { SyncControl, type AccountSyncSummary } from '../../api/sync-control.ts';
import { createServices, type Services } from '../../bin/services.ts';
import { freePort } from '../../bin/test-runner.ts';
import { createLinkToken } from '../../connectors/operations.ts';
import { parseConfig } from '../../lib/config.ts';
import { generateKey, randomSecret } from '../../lib/crypto.ts';
import { createLogger } from '../../lib/logger.ts';
import { formatScope, resourceDef } from '../../lib/resources.ts';
import { startSandbox, type Sandbox, type SandboxOptions } from '../../sandbox/server.ts';
import { createTestDatabase, type TestDatabase } from '../helpers/database.ts';
import { LogCollector, MirrorProcess, waitFor } from '../helpers/processes.ts';
import { temporalForTests } from '../helpers/temporal.ts';
import { reportDir } from './report.ts';

export interface LinkedTestAccount {
  accountId: string;
  accountToken: string;
  sourceSystem: string;
  referenceId: string;
}

export interface FaultSpec {
  match?: { method?: string; path?: string; source_system?: string };
  kind:
    | 'status'
    | 'rate-limit'
    | 'slow'
    | 'timeout'
    | 'reset'
    | 'truncated-json'
    | 'malformed-json'
    | 'lying-has-more'
    | 'repeat-page'
    | 'oversized-page'
    | 'gzip-bomb'
    | 'trickle'
    | 'alternating-pages'
    | 'endless-pages';
  times?: number;
  probability?: number;
  status?: number;
  retry_after?: number;
  delay_ms?: number;
  has_more_results?: boolean | null;
  /** `oversized-page`: bytes sent; `gzip-bomb`: bytes it inflates to. */
  bytes?: number;
  /** `trickle`: ms between two bytes. */
  interval_ms?: number;
}

export interface StreamRow {
  resource: string;
  scope: string;
  state: string;
  pages: number;
  records: number;
  generation: number;
  last_error: string | null;
  checkpoint: { page: number; done: boolean; passKey: string } | null;
}

/** Children are listed through their parents: resource -> [parent resource, path segment]. */
const childPaths: Record<string, [string, string]> = {
  'ap-invoice-line-items': ['ap-invoices', 'line-items'],
  'file-versions': ['files', 'versions'],
  'drawing-versions': ['drawings', 'versions'],
};

export interface ChaosMirrorOptions {
  /** Names the log directory. */
  name: string;
  sandbox?: Partial<SandboxOptions>;
  /** A Temporal frontend of the test's own (the Temporal-restart test); else the suite's. */
  temporalAddress?: string;
  /** Extra environment for the mirror processes. */
  env?: Record<string, string>;
  startApi?: boolean;
  /** Where the worker and API run from: a release's dist/ (the production drill); the sources by default. */
  root?: string;
}

/** JSON with object keys sorted: Postgres jsonb does not keep the upstream's key order. */
export function canonical(v: unknown): string {
  if (Array.isArray(v)) return `[${v.map(canonical).join(',')}]`;
  if (v && typeof v === 'object') {
    return `{${Object.keys(v)
      .sort()
      .map((k) => `${JSON.stringify(k)}:${canonical((v as Record<string, unknown>)[k])}`)
      .join(',')}}`;
  }
  return JSON.stringify(v) ?? 'null';
}

export class ChaosMirror {
  readonly logs: LogCollector;
  /** Error bodies the mirror's API answered during the test (the secrets scan reads them). */
  readonly errorBodies: string[] = [];
  /** Values the upstream sent as webhook Authorization (seen by the recording proxy). */
  readonly webhookAuthorizations = new Set<string>();
  /** Webhook deliveries the recording proxy passed on: how many, in flight, and the API's answers. */
  readonly inbound = { total: 0, inFlight: 0, statuses: new Map<number, number>() };
  /**
   * The last delivery the mirror answered, as it came, with the mirror's status (replay tests): noted
   * once answered, so a test that replays it replays a delivery the mirror has already received.
   */
  lastDelivery: { at: number; url: string; authorization: string; body: string; status: number } | undefined;
  readonly accounts: LinkedTestAccount[] = [];
  /** Extra secrets a test made (link-session secrets, ...). */
  readonly extraSecrets = new Set<string>();
  worker!: MirrorProcess;
  api!: MirrorProcess;
  services!: Services;
  temporal!: Client;
  sync!: SyncControl;
  sandbox!: Sandbox;
  db!: TestDatabase;
  env!: Record<string, string>;
  upstreamHeaders!: Record<string, string>;
  clientHeaders!: Record<string, string>;
  /** Where the upstream delivers webhooks (the recording proxy in front of the API). */
  publicUrl!: string;
  private temporalServer!: { address: string; stop(): Promise<void> };
  private connection!: Connection;
  private proxy!: Server;
  private apiPort!: number;
  private closers: (() => Promise<void>)[] = [];

  constructor(readonly options: ChaosMirrorOptions) {
    this.logs = new LogCollector(join(reportDir, 'logs', `${options.name}-${process.pid}`));
  }

  async start(): Promise<this> {
    const o = this.options;
    this.db = await createTestDatabase('mirror_chaos');
    this.closers.push(() => this.db.drop());
    const upstreamId = randomUUID();
    const upstreamSecret = randomSecret(40);
    this.sandbox = await startSandbox({
      port: 0,
      seed: 11,
      clientId: upstreamId,
      clientSecret: upstreamSecret,
      rateLimits: false,
      logger: false,
      size: 30,
      ...o.sandbox,
    });
    this.closers.push(() => this.sandbox.close());
    if (o.temporalAddress) this.temporalServer = { address: o.temporalAddress, stop: async () => undefined };
    else {
      this.temporalServer = await temporalForTests();
      this.closers.push(() => this.temporalServer.stop());
    }
    this.apiPort = await freePort();
    await this.startProxy();
    this.env = {
      DATABASE_URL: this.db.url,
      TEMPORAL_ADDRESS: this.temporalServer.address,
      TEMPORAL_TASK_QUEUE: `chaos-${randomBytes(4).toString('hex')}`,
      UPSTREAM_BASE_URL: this.sandbox.url,
      UPSTREAM_CLIENT_ID: upstreamId,
      UPSTREAM_CLIENT_SECRET: upstreamSecret,
      MIRROR_CLIENT_ID: randomUUID(),
      MIRROR_CLIENT_SECRET: randomSecret(40),
      MIRROR_ENCRYPTION_KEY: generateKey(),
      MIRROR_SIGNING_KEY: generateKey(),
      UPSTREAM_ASSUME_LIMITS: 'false',
      // Short enough for the timeout fault to cost little, long enough for a loaded machine.
      UPSTREAM_TIMEOUT_MS: '10000',
      PUBLIC_BASE_URL: this.publicUrl,
      API_PORT: String(this.apiPort),
      // Debug: the most log lines for the secrets scan to read.
      LOG_LEVEL: 'debug',
      ...o.env,
    };
    const config = parseConfig(this.env);
    this.services = createServices(config, { logger: createLogger({ level: 'silent' }), name: 'chaos-test', poolSize: 4 });
    this.closers.push(() => this.services.close());
    await upsertApiClient(this.services.prisma, config.MIRROR_CLIENT_ID, config.MIRROR_CLIENT_SECRET);
    this.connection = await Connection.connect({ address: config.TEMPORAL_ADDRESS });
    this.closers.push(() => this.connection.close());
    this.temporal = new Client({ connection: this.connection, namespace: config.TEMPORAL_NAMESPACE });
    this.sync = new SyncControl(this.temporal, config.TEMPORAL_TASK_QUEUE);
    this.upstreamHeaders = { 'api-version': '2021-11-21', 'client-id': upstreamId, 'client-secret': upstreamSecret };
    this.clientHeaders = { 'api-version': '2021-11-21', 'client-id': config.MIRROR_CLIENT_ID, 'client-secret': config.MIRROR_CLIENT_SECRET };
    // Supervised as in production: a process that crashes is started again (and the crash recorded).
    const root = o.root ? { root: o.root } : {};
    this.worker = new MirrorProcess({ command: 'worker', env: this.env, logs: this.logs, restartOnCrash: true, ...root });
    this.api = new MirrorProcess({ command: 'api', env: this.env, logs: this.logs, port: this.apiPort, restartOnCrash: true, ...root });
    this.closers.push(
      () => this.worker.stop(),
      () => this.api.stop(),
    );
    await Promise.all([this.worker.start(), o.startApi === false ? Promise.resolve() : this.api.start()]);
    return this;
  }

  /** Forwards webhook deliveries to the API process, noting their Authorization values. */
  private async startProxy(): Promise<void> {
    const port = await freePort();
    const answered = (status: number) => {
      this.inbound.inFlight--;
      this.inbound.statuses.set(status, (this.inbound.statuses.get(status) ?? 0) + 1);
    };
    this.proxy = createServer((req, res) => {
      if (typeof req.headers.authorization === 'string') this.webhookAuthorizations.add(req.headers.authorization);
      this.inbound.total++;
      this.inbound.inFlight++;
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => {
        const delivery = {
          at: Date.now(),
          url: req.url ?? '/',
          authorization: String(req.headers.authorization ?? ''),
          body: Buffer.concat(chunks).toString('utf8'),
        };
        const headers = Object.fromEntries(
          Object.entries(req.headers).filter(([k, v]) => typeof v === 'string' && !['host', 'connection', 'content-length', 'transfer-encoding'].includes(k)),
        ) as Record<string, string>;
        undiciRequest(`http://127.0.0.1:${this.apiPort}${req.url ?? '/'}`, {
          method: req.method as 'POST',
          headers,
          body: Buffer.concat(chunks),
          headersTimeout: 30_000,
          bodyTimeout: 30_000,
        })
          .then(async (r) => {
            const body = await r.body.text();
            if (r.statusCode >= 400) this.errorBodies.push(body);
            this.lastDelivery = { ...delivery, status: r.statusCode };
            answered(r.statusCode);
            res.writeHead(r.statusCode, { 'content-type': String(r.headers['content-type'] ?? 'application/json') }).end(body);
          })
          .catch(() => {
            answered(502);
            res.writeHead(502).end('{"message":"mirror API down"}');
          });
      });
    });
    await new Promise<void>((resolve) => this.proxy.listen(port, '127.0.0.1', resolve));
    this.publicUrl = `http://127.0.0.1:${port}`;
    this.closers.push(
      () =>
        new Promise<void>((resolve) => {
          this.proxy.closeAllConnections();
          this.proxy.close(() => resolve());
        }),
    );
  }

  get apiUrl(): string {
    return this.api.url;
  }

  /** Links an account on the sandbox and registers it in the mirror (no sync yet). */
  async link(sourceSystem: string, referenceId = `ref-${sourceSystem}-${randomBytes(3).toString('hex')}`): Promise<LinkedTestAccount> {
    const linkToken = await createLinkToken(this.services.upstream, referenceId);
    const { public_token } = await this.admin<{ public_token: string }>('POST', '/_admin/link/public-token', {
      link_token: linkToken,
      source_system: sourceSystem,
    });
    const { account, linked } = await linkWithPublicToken({ upstream: this.services.upstream, accounts: this.services.accounts }, public_token);
    const a = { accountId: account.id, accountToken: linked.account_token, sourceSystem, referenceId };
    this.accounts.push(a);
    return a;
  }

  /** A call to the sandbox's admin API. */
  async admin<T = unknown>(method: string, path: string, body?: unknown): Promise<T> {
    const res = await fetch(`${this.sandbox.url}${path}`, {
      method,
      headers: { ...this.upstreamHeaders, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
      ...(body === undefined ? {} : { body: JSON.stringify(body) }),
    });
    const text = await res.text();
    if (!res.ok) throw new Error(`sandbox ${method} ${path}: ${res.status} ${text}`);
    return (text ? JSON.parse(text) : undefined) as T;
  }

  async fault(spec: FaultSpec): Promise<string> {
    return (await this.admin<{ id: string }>('POST', '/_admin/faults', spec)).id;
  }

  async faults(): Promise<(FaultSpec & { id: string; hits: number })[]> {
    return (await this.admin<{ data: (FaultSpec & { id: string; hits: number })[] }>('GET', '/_admin/faults')).data;
  }

  async clearFaults(): Promise<void> {
    await this.admin('DELETE', '/_admin/faults');
  }

  /** A request to the mirror's API process; error bodies are kept for the secrets scan. */
  async apiFetch(
    path: string,
    init: { method?: string; headers?: Record<string, string>; body?: string } = {},
  ): Promise<{ status: number; text: string; headers: Headers }> {
    const res = await fetch(`${this.apiUrl}${path}`, {
      method: init.method ?? 'GET',
      headers: { ...this.clientHeaders, ...init.headers },
      ...(init.body === undefined ? {} : { body: init.body }),
    });
    const text = await res.text();
    if (res.status >= 400) this.errorBodies.push(text);
    return { status: res.status, text, headers: res.headers };
  }

  /** Runs an account pass and waits for its result (with a deadline). */
  async runPass(
    accountId: string,
    options: { mode?: 'full' | 'incremental'; resource?: string; registerWebhooks?: boolean; timeoutMs?: number } = {},
  ): Promise<AccountSyncSummary> {
    const handle = await this.sync.start({ accountId, mode: options.mode ?? 'full', resource: options.resource, registerWebhooks: options.registerWebhooks });
    return this.resultWithin(handle.workflowId, options.timeoutMs ?? 180_000);
  }

  async resultWithin(workflowId: string, timeoutMs: number): Promise<AccountSyncSummary> {
    const handle = this.temporal.workflow.getHandle(workflowId);
    let timer: NodeJS.Timeout | undefined;
    try {
      return await Promise.race([
        handle.result() as Promise<AccountSyncSummary>,
        new Promise<never>((_, reject) => {
          timer = setTimeout(() => reject(new Error(`workflow ${workflowId} did not finish within ${timeoutMs} ms`)), timeoutMs);
        }),
      ]);
    } finally {
      clearTimeout(timer);
    }
  }

  async streams(accountId: string): Promise<StreamRow[]> {
    const { rows } = await this.services.pool.query<StreamRow>(
      `SELECT resource, scope, state, pages, records, generation, last_error, checkpoint FROM streams WHERE account_id = $1 ORDER BY resource, scope`,
      [accountId],
    );
    return rows;
  }

  async stream(accountId: string, resource: string, scope = ''): Promise<StreamRow | undefined> {
    return (await this.streams(accountId)).find((s) => s.resource === resource && s.scope === scope);
  }

  /** Every page of an upstream list (the oracle), one request at a time (serial systems queue). */
  async upstreamList(accountToken: string, path: string, headers: Record<string, string> = {}): Promise<Record<string, unknown>[]> {
    const out: Record<string, unknown>[] = [];
    const perPage = 1000;
    for (let page = 1; page < 10_000; page++) {
      const sep = path.includes('?') ? '&' : '?';
      const res = await fetch(`${this.sandbox.url}${path}${sep}page=${page}&per_page=${perPage}`, {
        headers: { ...this.upstreamHeaders, 'account-token': accountToken, 'include-source-data': 'true', ...headers },
      });
      if (!res.ok) throw new Error(`oracle ${path} page ${page}: ${res.status} ${await res.text()}`);
      const body = (await res.json()) as { data: Record<string, unknown>[]; meta: { has_more_results: boolean | null } };
      out.push(...body.data);
      const more = body.meta.has_more_results;
      // The sandbox caps per_page at the system's maximum, so a null answer goes on while pages are non-empty.
      if (more === false || body.data.length === 0) break;
    }
    return out;
  }

  /**
   * The upstream's truth for a whole account: every stream (resource and scope) and its records in
   * order, discovered from the sandbox's own description of the source system (not the mirror's).
   */
  async oracle(account: LinkedTestAccount, only?: readonly string[]): Promise<Map<string, Record<string, unknown>[]>> {
    const { data } = await this.admin<{ data: { slug: string; resources: Record<string, { scope: string }> }[] }>('GET', '/_admin/source-systems');
    const profile = data.find((p) => p.slug === account.sourceSystem)!;
    const out = new Map<string, Record<string, unknown>[]>();
    const names = Object.keys(profile.resources);
    const want = (r: string) => !only || only.includes(r);
    let projectIds: string[] = [];
    if (profile.resources.projects) {
      const projects = await this.upstreamList(account.accountToken, '/projects');
      projectIds = projects.map((p) => String(p.id));
      if (want('projects')) out.set('projects|', projects);
    }
    const parentScopes = (r: string): { scope: string; projectId?: string }[] =>
      profile.resources[r]?.scope === 'project' ? projectIds.map((p) => ({ scope: formatScope([['project', p]]), projectId: p })) : [{ scope: '' }];
    for (const r of names) {
      if (r === 'projects' || profile.resources[r]!.scope === 'child') continue;
      const needed = want(r) || names.some((c) => childPaths[c]?.[0] === r && want(c));
      if (!needed) continue;
      for (const ps of parentScopes(r)) {
        const list = await this.upstreamList(account.accountToken, `/${r}`, ps.projectId ? { 'project-id': ps.projectId } : {});
        if (want(r)) out.set(`${r}|${ps.scope}`, list);
        for (const c of names.filter((n) => childPaths[n]?.[0] === r && want(n))) {
          for (const parent of list) {
            const pid = String(parent.id);
            const children = await this.upstreamList(
              account.accountToken,
              `/${r}/${encodeURIComponent(pid)}/${childPaths[c]![1]}`,
              ps.projectId ? { 'project-id': ps.projectId } : {},
            );
            out.set(`${c}|${ps.scope ? `${ps.scope}/` : ''}${r}=${pid}`, children);
          }
        }
      }
    }
    return out;
  }

  /** The mirror's live records of an account, per stream, in the upstream's order. */
  async mirrored(accountId: string, only?: readonly string[]): Promise<Map<string, Record<string, unknown>[]>> {
    const { rows } = await this.services.pool.query<{ resource: string; scope: string; data: Record<string, unknown>; source_data: unknown }>(
      `SELECT resource, scope, data, source_data FROM records WHERE account_id = $1 AND deleted_at IS NULL AND ($2::text[] IS NULL OR resource = ANY($2)) ORDER BY resource, scope, ordinal, id`,
      [accountId, only ?? null],
    );
    const out = new Map<string, Record<string, unknown>[]>();
    for (const r of rows) {
      const k = `${r.resource}|${r.scope}`;
      const obj = r.source_data === null ? r.data : { ...r.data, source_data: r.source_data };
      out.set(k, [...(out.get(k) ?? []), obj]);
    }
    return out;
  }

  /**
   * Asserts the mirror holds exactly the upstream's records for the account: every stream, every
   * record (signed URL fields aside, they change with every fetch), no duplicate, no extra, in order
   * unless `ordered` is false (records applied from events go last, as the upstream's do not).
   */
  async assertExact(account: LinkedTestAccount, options: { only?: readonly string[]; ordered?: boolean } = {}): Promise<{ streams: number; records: number }> {
    const [truth, mirror] = [await this.oracle(account, options.only), await this.mirrored(account.accountId, options.only)];
    const strip = (resource: string, list: Record<string, unknown>[]) => {
      const url = resourceDef(resource)?.urlFields ?? [];
      const out = list.map((o) => Object.fromEntries(Object.entries(o).filter(([k]) => !url.includes(k))));
      return options.ordered === false ? out.sort((a, b) => String(a.id).localeCompare(String(b.id))) : out;
    };
    let records = 0;
    for (const [k, list] of truth) {
      const resource = k.split('|')[0]!;
      const got = mirror.get(k) ?? [];
      if (got.length !== list.length || canonical(strip(resource, got)) !== canonical(strip(resource, list))) {
        const ids = new Set(list.map((o) => String(o.id)));
        const gotIds = got.map((o) => String(o.id));
        const missing = [...ids].filter((id) => !gotIds.includes(id));
        const extra = gotIds.filter((id) => !ids.has(id));
        const a = strip(resource, got).map(canonical);
        const b = strip(resource, list).map(canonical);
        const at = a.findIndex((x, i) => x !== b[i]);
        const sameSet = missing.length === 0 && extra.length === 0 && [...a].sort().join() === [...b].sort().join();
        const why = sameSet ? 'same records, in another order' : `first difference at #${at}: mirror ${a[at]?.slice(0, 300)} upstream ${b[at]?.slice(0, 300)}`;
        assert.deepEqual(
          strip(resource, got),
          strip(resource, list),
          `stream ${k}: mirror has ${got.length} records, upstream ${list.length}; missing ${missing.slice(0, 5).join(',')} extra ${extra.slice(0, 5).join(',')}; ${why}`,
        );
      }
      records += list.length;
    }
    const extraStreams = [...mirror.keys()].filter((k) => !truth.has(k) && (mirror.get(k)?.length ?? 0) > 0);
    assert.deepEqual(extraStreams, [], 'the mirror has no live records in streams the upstream does not serve');
    return { streams: truth.size, records };
  }

  /** Every secret the mirror handled: none may appear in a log line or an error body. */
  secrets(): { name: string; value: string }[] {
    const out = [
      { name: 'UPSTREAM_CLIENT_SECRET', value: this.env.UPSTREAM_CLIENT_SECRET! },
      { name: 'MIRROR_CLIENT_SECRET', value: this.env.MIRROR_CLIENT_SECRET! },
      { name: 'MIRROR_ENCRYPTION_KEY', value: this.env.MIRROR_ENCRYPTION_KEY! },
      { name: 'MIRROR_SIGNING_KEY', value: this.env.MIRROR_SIGNING_KEY! },
      ...this.accounts.map((a) => ({ name: `account token of ${a.sourceSystem}`, value: a.accountToken })),
      ...[...this.webhookAuthorizations].map((v) => ({ name: 'webhook authorization', value: v })),
      ...[...this.extraSecrets].map((v) => ({ name: 'session or other secret', value: v })),
    ];
    return out.filter((s) => s.value && s.value.length >= 8);
  }

  /** Scans every log line and error body for every secret; returns the findings (must be none). */
  scanForSecrets(): { lines: number; bodies: number; secrets: number; findings: string[] } {
    const secrets = this.secrets();
    const findings: string[] = [];
    const variants = (v: string) => [v, encodeURIComponent(v), Buffer.from(v).toString('base64')];
    for (const l of this.logs.lines) {
      for (const s of secrets)
        if (variants(s.value).some((x) => l.line.includes(x)))
          findings.push(`${s.name} in a log line of ${l.process}: ${l.line.slice(0, 200).replace(s.value, '<SECRET>')}`);
    }
    for (const b of this.errorBodies) {
      for (const s of secrets) if (variants(s.value).some((x) => b.includes(x))) findings.push(`${s.name} in an error body`);
    }
    return { lines: this.logs.lines.length, bodies: this.errorBodies.length, secrets: secrets.length, findings };
  }

  /** Waits until no connection of the mirror processes is inside a transaction or a query. */
  async quiesceDatabase(timeoutMs = 30_000): Promise<void> {
    await waitFor(
      "the killed process's database sessions to end",
      async () => {
        const { rows } = await this.services.pool.query<{ n: number }>(
          `SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid() AND application_name = 'worker' AND state <> 'idle'`,
        );
        return rows[0]!.n === 0;
      },
      { timeoutMs },
    );
  }

  async close(): Promise<void> {
    for (const c of this.closers.reverse()) await c().catch(() => undefined);
    this.closers = [];
  }
}

export async function startChaosMirror(options: ChaosMirrorOptions): Promise<ChaosMirror> {
  const m = new ChaosMirror(options);
  try {
    return await m.start();
  } catch (error) {
    await m.close();
    throw error;
  }
}
