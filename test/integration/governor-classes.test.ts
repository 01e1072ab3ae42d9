// One budget for everything the mirror sends upstream, end to end against the sandbox's
// rate limits (CRM Cloud: 10 requests per 5 s window per account): forwarded calls of every variant go
// through the governor and spend the same budget as the sync; a 429 from the upstream on a forwarded
// call is relayed with its headers and teaches the governor, which then answers the next call itself;
// and with MIRROR_SYNC_BUDGET_SHARE=0.5 a sync by two worker processes keeps to half of each window
// while an application's steady pass-through through a third (API) process is never refused.
import assert from 'node:assert/strict';
import type { Server } from 'node:http';
import { after, before, describe, it } from 'node:test';
import type { FastifyInstance } from 'fastify';
import { buildApp } from '../../api/app.ts';
import { createServices, upstreamTarget, type Services } from '../../bin/services.ts';
import { startWorker, type WorkerHandle } from '../../bin/temporal-worker.ts';
import { sandboxAdmin, startHarness, type Harness } from '../helpers/harness.ts';
import { recordWindows } from '../helpers/rate-windows.ts';

const limit = 10;
const windowMs = 5_000;
const header = 'crmcloud-ratelimit';

/** Every answer the sandbox gives this account, with the window (its reset) it fell in. */
const record = (h: { sandbox: { app: { server: Server } } }, accountToken: string) => recordWindows(h.sandbox.app.server, accountToken, header);

const forwardedPath = (p: string) => p.startsWith('/passthrough') || p.startsWith('/link/');

describe('one budget for the sync and the application', { timeout: 300_000 }, () => {
  let h: Harness;
  const extra: { services: Services; worker?: WorkerHandle; app?: FastifyInstance }[] = [];

  before(async () => {
    h = await startHarness({
      sandbox: { size: 20, sizes: { customers: 4_000 }, rateLimits: { windowMs, accountLimit: 1_000, sourceSystemLimits: { crmcloud: limit } } },
      // Calls are held (not refused) while the governor learns the 5 s window (it first assumes 60 s).
      config: { MIRROR_SYNC_BUDGET_SHARE: '0.5', MIRROR_INTERACTIVE_MAX_WAIT_MS: '15000' },
    });
  });

  after(async () => {
    for (const e of extra) {
      await e.app?.close();
      await e.worker?.shutdown();
      await e.services.close();
    }
    await h?.close();
  });

  const passthrough = (app: FastifyInstance, token: string) =>
    app.inject({
      method: 'POST',
      url: '/passthrough-download',
      headers: { ...h.clientHeaders, 'account-token': token, 'content-type': 'application/json' },
      payload: { method: 'GET', path: '/files/a.bin' },
    });

  it('sends forwarded calls of every variant through the governor, against the account budget the sync spends', async () => {
    const { accountId, accountToken } = await h.link('crmcloud', 'variants');
    const rec = record(h, accountToken);
    const governor = h.services.governor;
    const before = governor.usage().interactive.granted;
    const headers = { ...h.clientHeaders, 'account-token': accountToken };
    const answers = [
      await passthrough(h.app, accountToken),
      await h.app.inject({ method: 'GET', url: '/link/account', headers }),
      await h.app.inject({
        method: 'POST',
        url: '/customers',
        headers: { ...headers, 'content-type': 'application/json' },
        payload: { name: 'Written through the mirror' },
      }),
      // A list never synced: answered by the upstream (and a sync of it starts).
      await h.app.inject({ method: 'GET', url: '/leads', headers }),
    ];
    for (const a of answers) assert.ok(a.statusCode < 300, `${a.statusCode} ${a.body.slice(0, 200)}`);
    rec.stop();
    const paths = rec.seen.map((s) => s.path);
    for (const p of ['/passthrough-download', '/link/account', '/customers', '/leads'])
      assert.ok(paths.includes(p), `the sandbox served ${p} for the account: ${paths.join(', ')}`);
    // Each one was granted by the governor as an interactive request (the write's read-back too).
    assert.ok(governor.usage().interactive.granted - before >= 4, `interactive grants: ${governor.usage().interactive.granted - before}`);
    // Against the account's source-system budget, the one the sync's requests spend.
    const [service, source] = governor.budgets({ client: h.services.config.UPSTREAM_CLIENT_ID, account: accountId, sourceSystem: 'crmcloud' });
    assert.ok(service && source);
    assert.equal(source.facts.total, limit, 'the forwarded answers taught the governor the source system window');
    const stats = await sandboxAdmin<{ accounts: Record<string, { reference_id: string; requests: number }> }>(h, 'GET', '/_admin/stats');
    const counted = Object.values(stats.accounts).find((a) => a.reference_id === 'variants');
    assert.ok(counted && counted.requests >= 4, 'the sandbox counted them against the account');
  });

  it('relays an upstream 429 on a forwarded call with its headers, and the governor then answers the next one itself', async () => {
    const { accountToken } = await h.link('crmcloud', 'spent');
    // An API process that holds a call at most 200 ms.
    const apiServices = createServices({ ...h.services.config, MIRROR_INTERACTIVE_MAX_WAIT_MS: 200 }, { name: 'api-short-wait' });
    const api = await buildApp({
      pool: apiServices.pool,
      prisma: apiServices.prisma,
      accounts: apiServices.accounts,
      logger: apiServices.logger,
      upstream: { client: apiServices.upstream, target: upstreamTarget(apiServices.config) },
      hashKey: apiServices.keys.signingKey,
    });
    extra.push({ services: apiServices, app: api });
    // Another client of the same account spends the window behind the mirror's back.
    let direct = 0;
    for (;;) {
      const res = await fetch(`${h.sandbox.url}/customers?per_page=1`, { headers: { ...h.upstreamHeaders, 'account-token': accountToken } });
      await res.arrayBuffer();
      if (res.status === 429) break;
      assert.ok(++direct <= limit, 'the sandbox enforces its limit');
    }
    const rec = record(h, accountToken);
    const relayed = await passthrough(api, accountToken);
    assert.equal(relayed.statusCode, 429, relayed.body);
    assert.equal(relayed.headers[`${header}-remaining`], '0');
    assert.ok(relayed.headers[`${header}-resetsattimestamp`], 'the upstream rate-limit headers are relayed');
    assert.equal(rec.seen.length, 1, 'that one reached the upstream');
    const refused = await passthrough(api, accountToken);
    assert.equal(refused.statusCode, 429, refused.body);
    assert.equal((JSON.parse(refused.body) as { code: string }).code, 'rate_limited');
    assert.ok(Number(refused.headers['retry-after']) >= 1, 'with Retry-After');
    assert.equal(refused.headers[`${header}-remaining`], '0', 'with the window as the governor knows it');
    assert.equal(refused.headers[`${header}-total`], String(limit));
    rec.stop();
    assert.equal(rec.seen.length, 1, 'the governor answered the second call: nothing more reached the upstream');
  });

  it('keeps a sync by two worker processes to its share of each window while an API process forwards an application at 10% of the allowance', async () => {
    const { accountId, accountToken } = await h.link('crmcloud', 'shared');
    // A first pass teaches the governor the account's window (its length takes two resets to see).
    assert.deepEqual((await (await h.sync.start({ accountId, mode: 'full' })).result()).failed, []);
    // A second worker process and an API process of their own: three governors sharing Postgres.
    const second = createServices(h.services.config, { name: 'second-worker' });
    extra.push({ services: second, worker: await startWorker(second, { publicBaseUrl: h.apiUrl }) });
    const apiServices = createServices(h.services.config, { name: 'api' });
    const api = await buildApp({
      pool: apiServices.pool,
      prisma: apiServices.prisma,
      accounts: apiServices.accounts,
      logger: apiServices.logger,
      upstream: { client: apiServices.upstream, target: upstreamTarget(apiServices.config) },
      hashKey: apiServices.keys.signingKey,
    });
    extra.push({ services: apiServices, app: api });

    const rec = record(h, accountToken);
    const sync = (await h.sync.start({ accountId, mode: 'full' })).result();
    // The application: one pass-through call per window (10% of 10), until the sync is done.
    let done = false;
    const app: { status: number; ms: number }[] = [];
    const application = (async () => {
      while (!done) {
        const started = Date.now();
        const res = await passthrough(api, accountToken);
        app.push({ status: res.statusCode, ms: Date.now() - started });
        await new Promise((r) => setTimeout(r, windowMs / (0.1 * limit)));
      }
    })();
    const result = await sync;
    done = true;
    await application;
    rec.stop();
    assert.deepEqual(result.failed, []);

    const windows = new Map<number, { sync: number; app: number; rejected: number; times: string[] }>();
    for (const s of rec.seen) {
      if (s.resetsAt === undefined) continue;
      const w = windows.get(s.resetsAt) ?? { sync: 0, app: 0, rejected: 0, times: [] };
      if (s.status === 429) w.rejected++;
      else if (forwardedPath(s.path)) w.app++;
      else w.sync++;
      w.times.push(`${s.t}${forwardedPath(s.path) ? 'a' : s.status === 429 ? 'x' : 's'}`);
      windows.set(s.resetsAt, w);
    }
    const ordered = [...windows.entries()].sort((a, b) => a[0] - b[0]).map(([, w]) => w);
    // Not the first and last windows, which the pass shares with the time before and after it.
    const steady = ordered.slice(1, -1);
    // Each window's requests in ms from its first (s sync, a application, x refused), to tell where an extra one came from.
    const timeline = ordered
      .map((w) => {
        const first = parseInt(w.times[0]!, 10);
        return w.times.map((t) => `${parseInt(t, 10) - first}${t.slice(-1)}`).join(',');
      })
      .join(' | ');
    const summary = `${ordered.map((w) => `${w.sync}+${w.app}${w.rejected ? `(${w.rejected}x429)` : ''}`).join(' ')} [${timeline}]`;
    console.log(`per window (sync+application): ${summary}; application calls: ${app.map((a) => `${a.status}/${a.ms}ms`).join(' ')}`);
    assert.ok(steady.length >= 3, `the sync spans several windows: ${summary}`);
    for (const w of steady) {
      assert.equal(w.rejected, 0, `no 429 after the first window: ${summary}`);
      assert.ok(w.sync <= 0.5 * limit, `the sync keeps to half of each window: ${summary}`);
    }
    const meanSync = steady.reduce((a, w) => a + w.sync, 0) / steady.length;
    assert.ok(meanSync >= 0.4 * limit, `the sync uses its share: ${summary}`);
    assert.ok(
      app.every((a) => a.status === 200),
      `the application's calls all answered: ${app.map((a) => a.status).join(' ')}`,
    );
    // Held at most about a spacing of the window (510 ms) beside the upstream's own time; never to the bound.
    assert.ok(
      app.every((a) => a.ms < 2_000),
      `the application's calls were not held long: ${app.map((a) => a.ms).join(' ')}`,
    );

    // Visible: /metrics and the status page split the API process's use by class, with what was waited.
    const metrics = await api.inject({ method: 'GET', url: '/metrics', headers: h.clientHeaders });
    const sent = Number(/^mirror_upstream_requests_by_class_total\{class="application",process="api"\} (\d+)$/m.exec(metrics.body)?.[1]);
    assert.ok(sent >= app.length, `application requests counted in /metrics: ${sent}`);
    assert.match(metrics.body, /^mirror_governor_wait_seconds_total\{class="application",reason="rate",process="api"\} [\d.e-]+$/m);
    assert.match(metrics.body, /^mirror_governor_refused_total\{class="application",process="api"\} 0$/m);
    assert.match(
      metrics.body,
      new RegExp(
        `^mirror_governor_budget_total\\{budget="source:${accountId}:crmcloud\\|background",kind="source_system",account="${accountId}",source_system="crmcloud",lane="sync"`,
        'm',
      ),
    );
    const status = JSON.parse((await api.inject({ method: 'GET', url: '/status.json', headers: h.clientHeaders })).body) as {
      upstreamClasses: { class: string; granted: number }[];
      budgets: { accountId: string | null; lane: string; sourceSystem: string | null }[];
    };
    assert.ok(status.upstreamClasses.find((c) => c.class === 'application')!.granted >= app.length);
    assert.ok(
      status.budgets.some((b) => b.accountId === accountId && b.lane === 'sync' && b.sourceSystem === 'crmcloud'),
      'the sync lane of the budget is listed',
    );
  });
});
