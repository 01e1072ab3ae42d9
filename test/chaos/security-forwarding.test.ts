// Chaos (security): nothing a caller sends through a route that forwards reaches further than its own
// account. Every forwarding route (link calls, link sessions, writes, reads of scopes never synced,
// pass-through) is sent a table of hostile path values over real HTTP (the hole was in the HTTP
// client's URL normalisation, which inject() never exercises), as an account and as a file-picker
// link session. Always: the sandbox's `/_admin/*` and `/admin/*` are never reached, a value the path
// rule refuses never reaches the upstream at all, never a 5xx, a 4xx says what is wrong, and a second
// listener on another loopback port, named by hostile values, is never contacted. Also: an async
// request to a forwarded route runs as its account (it used to lose the account token).
import assert from 'node:assert/strict';
import { createServer, type IncomingMessage, type Server } from 'node:http';
import { after, before, describe, it } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { Client as HttpClient } from 'undici';
import { freePort } from '../../bin/test-runner.ts';
import { startHarness, type Harness } from '../helpers/harness.ts';
import { printOwnRows, scaled, scenario } from './report.ts';

const file = import.meta.filename;
const group = 'security';

interface Seen {
  method: string;
  url: string;
}

/** A hostile value for one path segment; `refused`: the path rule must stop it before the upstream. */
interface Hostile {
  value: string;
  refused: boolean;
}

/** The path a request's target names once an HTTP client has normalised it (`\` to `/`, dot segments resolved). */
function normalised(url: string): string {
  try {
    return decodeURIComponent(new URL(url, 'http://sandbox.invalid').pathname).toLowerCase();
  } catch {
    return url.toLowerCase();
  }
}

/** A request of the upstream's admin APIs (the real service's `/admin/*`, the sandbox's `/_admin/*`). */
const isAdmin = (url: string) => /^\/_?admin(\/|$|\?)/.test(normalised(url)) || /^\/_?admin(\/|$|\?)/i.test(url);

describe('chaos: forwarded paths cannot be steered', { timeout: scaled(420_000, 900_000) }, () => {
  let h: Harness;
  let http: HttpClient;
  let trap: Server;
  let trapHost = '';
  let accountHeaders: Record<string, string> = {};
  let sessionHeaders: Record<string, string> = {};
  /** The mirror asks the upstream about the session it accepts (GET /link/sessions/{its id}): not a forward. */
  let sessionCheck = '';
  /** Every request the sandbox received, as it received it (its request log). */
  const upstreamLog: Seen[] = [];
  /** Every request the trap listener received: must stay empty. */
  const trapped: string[] = [];
  /** Status -> count, for the summary. */
  const seen = new Map<number, number>();

  before(async () => {
    h = await startHarness({ sandbox: { size: 5 } });
    h.sandbox.app.server.prependListener('request', (req: IncomingMessage) => upstreamLog.push({ method: req.method ?? '', url: req.url ?? '' }));
    trap = createServer((req, res) => {
      trapped.push(`${req.method} ${req.url} (host ${req.headers.host})`);
      res.writeHead(200, { 'content-type': 'application/json' }).end('{"trap":"contacted"}');
    });
    const port = await freePort();
    await new Promise<void>((resolve) => trap.listen(port, '127.0.0.1', resolve));
    trapHost = `127.0.0.1:${port}`;
    const a = await h.link('buildpro', 'security-forwarding');
    accountHeaders = { ...h.clientHeaders, 'account-token': a.accountToken };
    // A file-picker session, made through the mirror as a front end would get one.
    const res = await fetch(`${h.apiUrl}/link/sessions`, {
      method: 'POST',
      headers: { ...accountHeaders, 'content-type': 'application/json' },
      body: JSON.stringify({ name: 'picker', ttl: '1800', mode: 'file-picker' }),
    });
    const created = (await res.json()) as { session?: string; scopes?: string[] };
    assert.equal(res.status, 201, `link session created: ${JSON.stringify(created)}`);
    assert.ok(created.session && created.scopes?.includes('link:read'), `a file-picker session with link:read: ${JSON.stringify(created.scopes)}`);
    sessionHeaders = { 'api-version': '2021-11-21', session: created.session };
    sessionCheck = `/link/sessions/${String((created as { id?: unknown }).id)}`;
    http = new HttpClient(h.apiUrl, { headersTimeout: 30_000, bodyTimeout: 30_000 });
  });

  after(async () => {
    await http?.close();
    await new Promise<void>((resolve) => (trap ? trap.close(() => resolve()) : resolve()));
    // Reads of never-synced scopes started syncs that wait for a worker: end them.
    if (h) {
      for await (const w of h.temporal.workflow.list({ query: `TaskQueue = '${h.taskQueue}' AND ExecutionStatus = 'Running'` })) {
        await h.temporal.workflow
          .getHandle(w.workflowId, w.runId)
          .terminate('security test over')
          .catch(() => undefined);
      }
    }
    await h?.close();
    printOwnRows();
  });

  /** Polls an async request of the mirror until it has finished; returns its state, status and body. */
  async function asyncResult(id: string): Promise<{ state: string; status: number; body: string }> {
    const deadline = Date.now() + 60_000;
    for (;;) {
      const res = await fetch(`${h.apiUrl}/async-requests/${id}`, { headers: accountHeaders });
      const state = res.headers.get('svc-async-request-state') ?? '';
      const body = await res.text();
      if (state === 'executed' || state === 'failure') return { state, status: res.status, body };
      if (Date.now() > deadline) throw new Error(`async request ${id} still ${state} after 60 s`);
      await sleep(200);
    }
  }

  it('runs async requests on forwarded routes as their account (finding 10b)', async () => {
    await scenario(
      group,
      'async request on a forwarded route (never-synced read, link call) runs with the account token',
      async () => {
        const cases: { path: string; upstream: string }[] = [
          { path: '/vendors?per_page=3', upstream: '/vendors?per_page=3' },
          { path: '/link/account', upstream: '/link/account' },
        ];
        for (const c of cases) {
          const accepted = await fetch(`${h.apiUrl}${c.path}`, { headers: { ...accountHeaders, 'async-request': 'true' } });
          assert.equal(accepted.status, 202, `${c.path} accepted as async: ${await accepted.text()}`);
          const id = accepted.headers.get('svc-async-request-id')!;
          const result = await asyncResult(id);
          const truth = await fetch(`${h.sandbox.url}${c.upstream}`, { headers: { ...h.upstreamHeaders, 'account-token': accountHeaders['account-token']! } });
          const expected: unknown = await truth.json();
          assert.equal(result.state, 'executed', `${c.path}: the async request ended ${result.state} (${result.status} ${result.body.slice(0, 300)})`);
          assert.equal(result.status, 200, `${c.path}: the stored answer is the upstream's 200, not ${result.status} ${result.body.slice(0, 300)}`);
          assert.deepEqual(JSON.parse(result.body), expected, `${c.path}: the stored answer is the upstream's`);
        }
        return { tries: cases.length, outcome: "executed with the upstream's answer, sent upstream with the account's stored token" };
      },
      file,
    );
  });

  /** One request over real HTTP with a raw target; checks the invariants and returns what happened. */
  async function send(
    method: string,
    target: string,
    headers: Record<string, string>,
    body?: string,
  ): Promise<{ status: number; text: string; upstream: Seen[] } | undefined> {
    const from = upstreamLog.length;
    let res;
    for (let attempt = 1; ; attempt++) {
      try {
        res = await http.request({
          method,
          path: target,
          headers: body === undefined ? headers : { ...headers, 'content-type': 'application/json' },
          ...(body === undefined ? {} : { body }),
        });
        break;
      } catch (error) {
        // Refused by the HTTP client itself (a target no HTTP/1.1 request may carry): nothing was sent.
        if ((error as { code?: string }).code === 'UND_ERR_INVALID_ARG' || error instanceof TypeError) return undefined;
        // A kept-alive connection the server closed as it was reused: once more, on a fresh one.
        if (attempt === 1 && ['ECONNRESET', 'UND_ERR_SOCKET', 'EPIPE'].includes(String((error as { code?: string }).code))) continue;
        throw new Error(`${method} ${target.slice(0, 200)}: the request failed (${(error as Error).message})`, { cause: error });
      }
    }
    const text = await res.body.text();
    // Give the sandbox's log the last request of a forward that answered early (it is logged on arrival).
    await sleep(0);
    const all = upstreamLog.slice(from);
    const admin = all.find((u) => isAdmin(u.url));
    const upstream = all.filter((u) => u.url !== sessionCheck);
    seen.set(res.statusCode, (seen.get(res.statusCode) ?? 0) + 1);
    const where = `${method} ${target.slice(0, 160)}${target.length > 160 ? '...' : ''} as ${headers.session ? 'a session' : 'an account'}`;
    assert.equal(
      admin,
      undefined,
      `${where}: reached the upstream's admin API (${admin?.method} ${admin?.url.slice(0, 200)}), answered ${res.statusCode} ${text.slice(0, 200)}`,
    );
    assert.deepEqual(trapped, [], `${where}: made the mirror contact another host`);
    assert.ok(res.statusCode < 500, `${where}: answered ${res.statusCode} ${text.slice(0, 300)}`);
    if (res.statusCode >= 400) {
      let message: unknown;
      try {
        const j = JSON.parse(text) as { message?: unknown; error?: unknown };
        message = j.message ?? j.error;
      } catch {
        message = undefined;
      }
      assert.ok(typeof message === 'string' && message.length > 0, `${where}: a ${res.statusCode} without a clear message: ${text.slice(0, 200)}`);
    }
    return { status: res.statusCode, text, upstream };
  }

  /** Hostile values for one id segment of a forwarding route. */
  function hostileSegments(): Hostile[] {
    const refused = (value: string): Hostile => ({ value, refused: true });
    const allowed = (value: string): Hostile => ({ value, refused: false });
    return [
      // The reported trick first: `\` becomes `/` and `..` is resolved by the HTTP client.
      refused('x\\..\\..\\..\\_admin\\accounts'),
      refused('x\\..\\..\\..\\..\\_admin\\stats'),
      refused('..\\..\\..\\admin\\accounts'),
      refused('.'),
      refused('..'),
      refused('%2e%2e'),
      refused('%2E%2E'),
      refused('.%2e'),
      refused('%2e.'),
      refused('...'),
      refused('..%2f..%2f..%2f_admin%2faccounts'),
      refused('%2e%2e%2f%2e%2e%2f%2e%2e%2f_admin%2faccounts'),
      refused('%2E%2E%2F%2E%2E%2F_admin'),
      refused('x%5c..%5c..%5c..%5c_admin%5caccounts'),
      refused('%5C%2E%2E%5C%2E%2E%5C_admin'),
      refused('%252e%252e%252f%252e%252e%252f_admin'),
      refused('%252e%252e'),
      refused('%255c'),
      refused('%252f'),
      refused('%00'),
      refused('x%00y'),
      refused('%0d%0aHost:%20evil'),
      refused('%c0%ae%c0%ae'),
      refused('%e0%80%ae'),
      refused('%'),
      refused('%zz'),
      refused('a'.repeat(300)),
      refused('a'.repeat(5000)),
      refused(`\\\\${trapHost}\\x`),
      refused(`%2f%2f${trapHost}%2fx`),
      refused(`..\\..\\..\\..\\${trapHost}`),
      // Values that are fine as ids: forwarded, encoded, to the upstream's own path for that id.
      allowed(`@${trapHost}`),
      allowed(`x@${trapHost}`),
      allowed(`%40${trapHost}`),
      allowed(trapHost),
      allowed('admin'),
      allowed('_admin'),
      allowed('source_id:12;x'),
    ];
  }

  /** Whole request targets: absolute URLs and paths that name another host or the admin APIs. */
  function hostileTargets(base: string): string[] {
    return [
      `//${trapHost}/x`,
      `//${trapHost}${base}`,
      `http://${trapHost}/`,
      `http://${trapHost}${base}`,
      `/\\${trapHost}/x`,
      `/\\\\${trapHost}\\x`,
      `${base}/..%2f..%2f_admin%2faccounts`,
      `${base}\\..\\..\\_admin\\accounts`,
      `${base};/../../_admin/accounts`,
      `${base}%2f..%2f..%2f_admin%2faccounts`,
      `${base}?x=\\..\\..\\_admin\\accounts`,
      `${base}#/../../_admin/accounts`,
      `${base}/../../_admin/accounts`,
      '/_admin/accounts',
      '/admin/accounts',
      '/_admin/stats',
    ];
  }

  interface RouteCase {
    method: string;
    /** `{x}` is where the hostile segment goes. */
    pattern: string;
    body?: string;
    as: 'account' | 'session';
  }

  const accountRoutes: RouteCase[] = [
    { method: 'GET', pattern: '/link/sessions/{x}', as: 'account' },
    { method: 'POST', pattern: '/link/sessions/{x}/extend', body: '{"ttl":"60"}', as: 'account' },
    { method: 'POST', pattern: '/link/sessions/{x}/expire', body: '{}', as: 'account' },
    // Reads of a scope never synced are answered by the upstream.
    { method: 'GET', pattern: '/vendors/{x}', as: 'account' },
    { method: 'GET', pattern: '/projects/{x}', as: 'account' },
    // Writes.
    { method: 'PUT', pattern: '/vendors/{x}', body: '{"name":"x"}', as: 'account' },
    { method: 'PATCH', pattern: '/vendors/{x}', body: '{"name":"x"}', as: 'account' },
    { method: 'DELETE', pattern: '/vendors/{x}', as: 'account' },
  ];
  const sessionRoutes: RouteCase[] = [
    { method: 'GET', pattern: '/link/sessions/{x}', as: 'session' },
    { method: 'GET', pattern: '/projects/{x}', as: 'session' },
    { method: 'GET', pattern: '/vendors/{x}', as: 'session' },
    { method: 'PUT', pattern: '/vendors/{x}', body: '{"name":"x"}', as: 'session' },
  ];

  it('never lets a hostile id steer a forwarded request (account token and link session)', async () => {
    // No sync may run now: every upstream request the sandbox logs is one a forward made.
    await h.worker.shutdown();
    await scenario(
      group,
      'hostile ids on every forwarding route (backslash, %2e, %2f, %5c, double encoding, NUL, overlong, other hosts)',
      async () => {
        let n = 0;
        const table = hostileSegments();
        for (const route of [...accountRoutes, ...sessionRoutes]) {
          const headers = route.as === 'account' ? accountHeaders : sessionHeaders;
          for (const hv of table) {
            const target = route.pattern.replace('{x}', hv.value);
            const r = await send(route.method, target, headers, route.body);
            if (!r) continue;
            n++;
            const where = `${route.method} ${target.slice(0, 120)} as ${route.as}`;
            if (hv.refused) {
              assert.ok(r.status >= 400 && r.status < 500, `${where}: refused with a 4xx, not ${r.status}`);
              assert.deepEqual(r.upstream, [], `${where}: refused before any upstream request`);
            }
          }
        }
        return {
          tries: n,
          outcome: `${table.length} hostile ids x ${accountRoutes.length + sessionRoutes.length} routes: admin API never reached, refused ids never sent upstream, no 5xx, other host never contacted`,
        };
      },
      file,
    );
  });

  it("forwards a plain id to the upstream's own path for it, encoded once", async () => {
    await scenario(
      group,
      'plain and odd-but-valid ids reach the upstream path for that id',
      async () => {
        let n = 0;
        const cases: [string, string][] = [
          ['plain-id-1', '/link/sessions/plain-id-1'],
          [`@${trapHost}`, `/link/sessions/${encodeURIComponent(`@${trapHost}`)}`],
          ['source_id:12', `/link/sessions/${encodeURIComponent('source_id:12')}`],
        ];
        for (const [value, expected] of cases) {
          for (const headers of [accountHeaders, sessionHeaders]) {
            const r = await send('GET', `/link/sessions/${value}`, headers);
            n++;
            assert.ok(r, 'sent');
            assert.deepEqual(
              r.upstream.map((u) => u.url),
              [expected],
              `GET /link/sessions/${value} as ${headers.session ? 'a session' : 'an account'}: forwarded to exactly ${expected}`,
            );
          }
        }
        return { tries: n, outcome: 'each forwarded once, to the path rebuilt from its decoded, re-encoded segments' };
      },
      file,
    );
  });

  it('never lets a request target, a Host header or a pass-through field make the mirror contact another host', async () => {
    await scenario(
      group,
      'absolute URLs, //host, Host and pass-through fields naming another listener',
      async () => {
        let n = 0;
        const bases: { method: string; base: string; body?: string; as: 'account' | 'session' }[] = [
          { method: 'GET', base: '/link/account', as: 'account' },
          { method: 'GET', base: '/link/account', as: 'session' },
          { method: 'GET', base: '/link/sessions', as: 'account' },
          { method: 'GET', base: '/vendors', as: 'account' },
          { method: 'GET', base: '/projects', as: 'session' },
          { method: 'POST', base: '/vendors', body: '{}', as: 'account' },
          { method: 'POST', base: '/passthrough', body: JSON.stringify({ method: 'GET', path: '/projects' }), as: 'account' },
          { method: 'POST', base: '/passthrough-download', body: JSON.stringify({ method: 'GET', path: '/projects' }), as: 'account' },
          { method: 'POST', base: '/link/token/create', body: JSON.stringify({ reference_id: 'x' }), as: 'account' },
        ];
        for (const b of bases) {
          const headers = b.as === 'account' ? accountHeaders : sessionHeaders;
          for (const target of hostileTargets(b.base)) {
            const r = await send(b.method, target, headers, b.body);
            if (!r) continue;
            n++;
            const path = target.split('?')[0]!;
            if (
              path.includes('_admin') ||
              path.includes('/admin/') ||
              path.includes('\\') ||
              path.includes('%2f') ||
              path.includes('/..') ||
              path.includes('#')
            ) {
              assert.ok(r.status >= 400, `${b.method} ${target} as ${b.as}: refused, not ${r.status}`);
            }
          }
        }
        // Headers and pass-through fields that name the other host: relayed only to the configured upstream.
        const named = [`http://${trapHost}/`, `//${trapHost}/x`, trapHost];
        for (const value of named) {
          for (const [method, target, extra, body] of [
            ['GET', '/link/account', { host: trapHost }, undefined],
            ['GET', '/link/account', { 'x-forwarded-host': trapHost, forwarded: `host=${trapHost}` }, undefined],
            ['POST', '/passthrough', {}, JSON.stringify({ method: 'GET', path: value })],
            ['POST', '/passthrough-upload', { 'passthrough-method': 'POST', 'passthrough-path': value }, '{}'],
          ] as const) {
            const r = await send(method, target, { ...accountHeaders, ...extra }, body);
            if (r) n++;
          }
        }
        assert.deepEqual(trapped, [], 'the other listener was never contacted');
        return { tries: n, outcome: `the listener on ${trapHost} was never contacted; admin APIs never reached; no 5xx` };
      },
      file,
    );
    const summary = [...seen.entries()]
      .sort((x, y) => x[0] - y[0])
      .map(([s, c]) => `${s}x${c}`)
      .join(' ');
    console.log(`security forwarding: answers by status ${summary}`);
  });
});
