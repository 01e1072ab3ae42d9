// Chaos: hostile input on every route of the real API process. Fuzzed headers, paths, query strings
// and bodies (property-based, fast-check), oversized bodies, wrong content types, SQL metacharacters
// in every filter field and value, path traversal, forged and replayed webhook signatures and internal
// credentials, expired and out-of-scope link sessions, malformed HTTP. Always: no 5xx, a 4xx carries a
// clear message, no answer holds another account's data, and the database is unchanged.
import assert from 'node:assert/strict';
import { setTimeout as sleep } from 'node:timers/promises';
import { randomBytes, randomUUID } from 'node:crypto';
import { connect } from 'node:net';
import { after, before, describe, it } from 'node:test';
import fc from 'fast-check';
import { Client as HttpClient } from 'undici';
import { buildApp } from '../../api/app.ts';
import { decryptSecret } from '../../lib/crypto.ts';
import { contractResourceNames, resourceDef, resources } from '../../lib/resources.ts';
import { createLogger } from '../../lib/logger.ts';
import { waitFor } from '../helpers/processes.ts';
import { startChaosMirror, type ChaosMirror, type LinkedTestAccount } from './env.ts';
import { printOwnRows, scaled, scenario } from './report.ts';

const file = import.meta.filename;
const group = 'hostile input';
const seed = Number(process.env.CHAOS_SEED ?? 20_240_601);

interface Route {
  method: string;
  /** Fastify pattern, e.g. `/projects/:id`. */
  path: string;
}

/** Routes out of Fastify's route tree (`printRoutes({ commonPrefix: false })`). */
export function parseRoutes(tree: string): Route[] {
  const out: Route[] = [];
  const stack: string[] = [];
  for (const line of tree.split('\n')) {
    const at = line.indexOf('── ');
    if (at < 0) continue;
    const depth = Math.round(at / 4);
    const m = /^(\S+)(?: \(([^)]*)\))?/.exec(line.slice(at + 3));
    if (!m) continue;
    // `/:id|:parentId`: one node for two parameter names.
    stack[depth] = m[1]!.replace(/:([A-Za-z]+)\|:[A-Za-z|:]+/g, ':$1');
    stack.length = depth + 1;
    for (const method of (m[2] ?? '')
      .split(',')
      .map((s) => s.trim())
      .filter((s) => s && s !== 'HEAD'))
      out.push({ method, path: stack.join('') });
  }
  return out;
}

const sqlPayloads = [
  "' OR '1'='1",
  "'; DROP TABLE records; --",
  '" OR ""="',
  "') OR ('1'='1",
  '1; DELETE FROM linked_accounts',
  "' UNION SELECT token_ciphertext::text FROM linked_accounts --",
  '\\',
  '%_%',
  '$1',
  "E'\\x00'",
  '\u0000',
  "'||pg_sleep(5)||'",
];

const traversal = [
  '../../../../etc/passwd',
  '..%2f..%2f..%2fetc%2fpasswd',
  '%2e%2e%2f%2e%2e%2fetc%2fpasswd',
  '..\\..\\windows\\win.ini',
  '%252e%252e%252f',
  '....//....//etc/passwd',
  '%00',
  '%c0%ae%c0%ae/',
  'a'.repeat(5000),
];

describe('chaos: hostile input on every API route', { timeout: scaled(300_000, 1_200_000) }, () => {
  let m: ChaosMirror;
  let a: LinkedTestAccount;
  let b: LinkedTestAccount;
  let routes: Route[] = [];
  let http: HttpClient;
  /** Strings only account X's data contains: its record ids and long source ids, its token. */
  const markers = new Map<string, string[]>();
  const fillers = { id: '', parentId: '', projectId: '', registrationId: '', resource: 'customers' };
  let baseHeaders: Record<string, string> = {};
  const runs = scaled(250, 2500);
  /** Requests sent again after a kept-alive connection was reset under them. */
  let socketRetries = 0;
  /** Every answer, for the summary: status -> count. */
  const seen = new Map<number, number>();

  before(async () => {
    m = await startChaosMirror({ name: 'hostile-input', sandbox: { size: 6 }, env: { MIRROR_RESOURCES: '*' } });
    a = await m.link('buildpro');
    b = await m.link('sqlerp');
    const [ra, rb] = await Promise.all([m.runPass(a.accountId, { registerWebhooks: true }), m.runPass(b.accountId)]);
    assert.deepEqual([...ra.failed, ...rb.failed], []);
    // No sync runs while the API is attacked: the database must change only by what the API does.
    await m.worker.stop();
    for (const acct of [a, b]) {
      const { rows } = await m.services.pool.query<{ id: string; source_id: string | null }>(`SELECT id, source_id FROM records WHERE account_id = $1`, [
        acct.accountId,
      ]);
      markers.set(acct.accountId, [acct.accountToken, ...rows.map((r) => r.id), ...rows.map((r) => r.source_id ?? '').filter((s) => s.length >= 10)]);
    }
    const q = async (sql: string) => (await m.services.pool.query<{ v: string }>(sql, [a.accountId])).rows[0]?.v ?? randomUUID();
    fillers.projectId = await q(`SELECT id AS v FROM records WHERE account_id = $1 AND resource = 'projects' ORDER BY ordinal LIMIT 1`);
    fillers.id = await q(`SELECT id AS v FROM records WHERE account_id = $1 AND resource = 'files' ORDER BY ordinal LIMIT 1`);
    fillers.parentId = fillers.id;
    fillers.registrationId = await q(`SELECT id::text AS v FROM webhook_registrations WHERE account_id = $1 LIMIT 1`);
    baseHeaders = { ...m.clientHeaders, 'account-token': a.accountToken, 'project-id': fillers.projectId };
    // The route table of the API the process serves, from the same code.
    const app = await buildApp({
      pool: m.services.pool,
      prisma: m.services.prisma,
      accounts: m.services.accounts,
      logger: createLogger({ level: 'silent' }),
      upstream: {
        client: m.services.upstream,
        target: {
          baseUrl: m.sandbox.url,
          clientId: m.env.UPSTREAM_CLIENT_ID!,
          clientSecret: m.env.UPSTREAM_CLIENT_SECRET!,
          apiVersion: '2021-11-21',
          headerPrefix: 'Svc',
        },
      },
      sync: m.sync,
      hashKey: m.services.keys.signingKey,
      encryptionKey: m.services.keys.encryptionKey,
    });
    routes = parseRoutes(app.printRoutes({ commonPrefix: false }));
    await app.close();
    assert.ok(routes.length >= 40, `found the API's routes (${routes.length})`);
    http = new HttpClient(m.apiUrl, { headersTimeout: 30_000, bodyTimeout: 30_000 });
  });
  after(async () => {
    await http?.close();
    // Syncs started by reads of never-synced scopes wait in Temporal for a worker: end them.
    if (m) {
      for await (const w of m.temporal.workflow.list({ query: `TaskQueue = '${m.env.TEMPORAL_TASK_QUEUE}' AND ExecutionStatus = 'Running'` })) {
        await m.temporal.workflow
          .getHandle(w.workflowId, w.runId)
          .terminate('chaos test over')
          .catch(() => undefined);
      }
    }
    await m?.close();
    printOwnRows();
  });

  function concrete(route: Route, override: Partial<typeof fillers> = {}): string {
    const f = { ...fillers, ...override };
    // The catch-all that forwards what the mirror does not serve: a resource of the upstream's surface it does not hold.
    if (route.path === '*' || route.path === '/*') return '/rfis';
    return route.path.replace(/:([A-Za-z]+)/g, (_, name: string) => encodeURIComponent((f as Record<string, string>)[name] ?? randomUUID()));
  }

  /** The account a request was authenticated as (by its token), if any. */
  function authenticatedAs(headers: Record<string, string>): string | undefined {
    const token = Object.entries(headers).find(([k]) => k.toLowerCase() === 'account-token')?.[1];
    return [a, b].find((x) => x.accountToken === token)?.accountId;
  }

  /**
   * Sends one request and checks the invariants: never a 5xx; a 4xx says what is wrong; no answer
   * carries data of an account other than the one the request authenticated as.
   */
  async function send(
    method: string,
    path: string,
    headers: Record<string, string>,
    body?: string | Buffer,
  ): Promise<{ status: number; text: string } | undefined> {
    let res;
    for (let attempt = 1; ; attempt++) {
      try {
        res = await http.request({ method, path, headers, ...(body === undefined ? {} : { body }) });
        break;
      } catch (error) {
        // Refused by the HTTP client itself (a header or path no HTTP/1.1 request may carry).
        if ((error as { code?: string }).code === 'UND_ERR_INVALID_ARG' || error instanceof TypeError) return undefined;
        // A kept-alive connection the server closed as it was reused: once more, on a fresh one,
        // provided the API is still up (a crash is a failure).
        const reset = ['ECONNRESET', 'UND_ERR_SOCKET', 'EPIPE'].includes(String((error as { code?: string }).code));
        if (reset && attempt === 1 && m.api.running) {
          socketRetries++;
          continue;
        }
        throw new Error(`${method} ${path.slice(0, 200)}: the request failed (${(error as Error).message})`, { cause: error });
      }
    }
    const text = await res.body.text();
    seen.set(res.statusCode, (seen.get(res.statusCode) ?? 0) + 1);
    const shown = Object.fromEntries(
      Object.entries(headers).map(([k, v]) => [k, /secret|token|session|authorization/i.test(k) ? '<redacted>' : v.slice(0, 60)]),
    );
    const where = `${method} ${path.slice(0, 200)} (headers ${JSON.stringify(shown).slice(0, 400)})`;
    assert.ok(res.statusCode < 500, `${where}: answered ${res.statusCode} ${text.slice(0, 300)}`);
    if (res.statusCode >= 400) {
      m.errorBodies.push(text);
      let message: unknown;
      try {
        const j = JSON.parse(text) as { message?: unknown; error?: unknown };
        message = j.message ?? j.error;
      } catch {
        message = undefined;
      }
      assert.ok(typeof message === 'string' && message.length > 0, `${where}: a ${res.statusCode} without a clear message: ${text.slice(0, 200)}`);
    }
    const self = authenticatedAs(headers);
    for (const [owner, list] of markers) {
      if (owner === self) continue;
      const leaked = list.find((x) => text.includes(x));
      assert.equal(leaked, undefined, `${where}: answered data of another account (${leaked?.slice(0, 12)}...)`);
    }
    return { status: res.statusCode, text };
  }

  /** One request over a raw socket: the answer may come (and the socket close) before the body is sent. */
  async function rawSend(method: string, path: string, headers: Record<string, string>, body: Buffer): Promise<{ status: number; text: string }> {
    const port = Number(new URL(m.apiUrl).port);
    const head = [
      `${method} ${path} HTTP/1.1`,
      'Host: 127.0.0.1',
      'Connection: close',
      `Content-Length: ${body.length}`,
      ...Object.entries(headers).map(([k, v]) => `${k}: ${v}`),
      '',
      '',
    ].join('\r\n');
    const raw = await new Promise<string>((resolve) => {
      let data = '';
      // The headers first: an API that judges the declared length answers at once, and the body is
      // sent only if it has not (a server closing on unread data would reset the answer away).
      const socket = connect(port, '127.0.0.1', () => {
        socket.write(head);
        setTimeout(() => {
          if (data === '' && !socket.destroyed) socket.end(body);
        }, 2000).unref();
      });
      socket.on('data', (d: Buffer) => (data += d.toString('utf8')));
      socket.on('close', () => resolve(data));
      // EPIPE / ECONNRESET once the API has answered and closed: the answer is what counts.
      socket.on('error', () => undefined);
      socket.setTimeout(30_000, () => socket.destroy());
    });
    const status = Number(/^HTTP\/1\.1 (\d{3})/.exec(raw)?.[1] ?? 0);
    return { status, text: raw.slice(raw.indexOf('\r\n\r\n') + 4) };
  }

  /** Everything in the database, table by table (rate-limit bookkeeping aside). */
  async function snapshot(): Promise<Map<string, string>> {
    const { rows: tables } = await m.services.pool.query<{ t: string }>(
      `SELECT c.relname AS t FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
        WHERE n.nspname = 'public' AND c.relkind IN ('r', 'p') AND NOT c.relispartition AND c.relname NOT IN ('rate_budgets', 'rate_leases')`,
    );
    const out = new Map<string, string>();
    for (const { t } of tables) {
      // An account's last use is recorded on any authenticated request (it wakes an idle account): not data.
      const row = t === 'linked_accounts' ? `(to_jsonb(x) - 'last_used_at')::text` : 'x::text';
      const { rows } = await m.services.pool.query<{ n: number; h: string }>(
        `SELECT count(*)::int AS n, md5(coalesce(string_agg(${row}, '|' ORDER BY ${row}), '')) AS h FROM "${t}" x`,
      );
      out.set(t, `${rows[0]!.n}:${rows[0]!.h}`);
    }
    return out;
  }

  /**
   * The database once work that earlier scenarios started in the background (refreshes a read's
   * Cache-Control asked for, objects fetched for a miss) has finished: two snapshots a while apart agree.
   */
  async function settled(): Promise<Map<string, string>> {
    let previous = await snapshot();
    for (let i = 0; i < 40; i++) {
      await sleep(1500);
      const next = await snapshot();
      if ([...next.keys()].every((t) => next.get(t) === previous.get(t))) return next;
      previous = next;
    }
    return previous;
  }

  async function unchanged<T>(fn: () => Promise<T>): Promise<T> {
    const before = await settled();
    const r = await fn();
    const after = await snapshot();
    const changed = [...before.keys()].filter((t) => before.get(t) !== after.get(t));
    assert.deepEqual(changed, [], 'the database is unchanged');
    return r;
  }

  /** Writes forwarded upstream (the catalog's resources, under parents too, and the catch-all's): one the upstream accepts changes the mirror, by design. */
  const writeBases = [...resources.map((d) => (d.scope === 'child' ? `${resourceDef(d.parent!)!.path}/:parentId/${d.path}` : d.path)), '/folders/:id/files'];
  // The catch-all forwards what the mirror does not hold, writes included: the upstream may accept a
  // fuzzed body there too (it created an RFI from a form-encoded one), so it is a write route.
  const isWrite = (r: Route) =>
    r.method !== 'GET' &&
    r.method !== 'OPTIONS' &&
    (r.path === '*' || r.path === '/*' || writeBases.some((base) => r.path === base || r.path === `${base}/:id`));
  // Writes the upstream accepts change the mirror by design (a DELETE of a real id deletes it): the
  // scenarios that assert an unchanged database fuzz every other route; writes have their own below.
  const routeArb = () => fc.constantFrom(...routes.filter((r) => !isWrite(r)));
  const headerName = fc
    .stringMatching(/^[A-Za-z][A-Za-z0-9-]{0,30}$/)
    .filter((n) => !['async-request', 'content-length', 'transfer-encoding', 'host', 'connection', 'expect', 'upgrade'].includes(n.toLowerCase()));
  const headerValue = fc.oneof(
    fc.stringMatching(/^[\x20-\x7e]{0,200}$/),
    fc.constantFrom(
      ...sqlPayloads.filter((s) => !s.includes('\u0000')),
      ...traversal.slice(0, 4),
      'true',
      'false',
      '*',
      '0',
      '-1',
      '1e309',
      'source_id:',
      "source_id:' OR 1=1",
      '2021-11-21',
      'x'.repeat(8000),
    ),
  );
  const anyText = fc.oneof(
    fc.string({ maxLength: 80 }),
    fc.constantFrom(...sqlPayloads, ...traversal, '', ' ', 'null', '[]', '{}', '-1', '0', '99999999999999999999', 'NaN', 'true', '\u202e\u0000'),
  );

  it('answers fuzzed headers on every route with no 5xx and no foreign data', async () => {
    await scenario(
      group,
      'fuzzed headers (names and values, with and without valid credentials)',
      async () => {
        let n = 0;
        await unchanged(() =>
          fc.assert(
            fc.asyncProperty(
              routeArb(),
              fc.dictionary(headerName, headerValue, { maxKeys: 8 }),
              fc.boolean(),
              fc.subarray(['api-version', 'client-id', 'client-secret', 'account-token', 'project-id']),
              async (route, extra, withBase, drop) => {
                const headers: Record<string, string> = withBase ? { ...baseHeaders } : {};
                for (const d of drop) delete headers[d];
                Object.assign(headers, extra);
                if (route.method !== 'GET' && route.method !== 'DELETE') headers['content-type'] = 'application/json';
                const r = await send(route.method, concrete(route), headers, route.method === 'GET' || route.method === 'DELETE' ? undefined : '{}');
                if (r) n++;
              },
            ),
            { numRuns: runs, seed, includeErrorInReport: true },
          ),
        );
        return { tries: n, outcome: `${routes.length} routes: no 5xx, every 4xx with a message, no foreign data, database unchanged` };
      },
      file,
    );
  });

  it('answers fuzzed paths, path traversal and SQL in ids with no 5xx', async () => {
    await scenario(
      group,
      'fuzzed path parameters (traversal, SQL, unicode, 5000-char ids) and unknown paths',
      async () => {
        let n = 0;
        await unchanged(async () => {
          await fc.assert(
            fc.asyncProperty(routeArb(), anyText, fc.boolean(), async (route, value, raw) => {
              const v = raw ? value.replace(/[^\x21-\x7e]/g, '') : encodeURIComponent(value);
              const path = route.path.includes(':') ? route.path.replace(/:([A-Za-z]+)/g, () => v || '%20') : `${route.path}/${v}`;
              const r = await send(
                route.method,
                path,
                { ...baseHeaders, ...(route.method === 'POST' ? { 'content-type': 'application/json' } : {}) },
                route.method === 'POST' ? '{}' : undefined,
              );
              if (r) n++;
            }),
            { numRuns: runs, seed, includeErrorInReport: true },
          );
          // Storage-proxy style names and traversal under every prefix the API serves.
          for (const prefix of [
            '/storage/download',
            '/storage/preview',
            '/files',
            '/documents',
            '/passthrough-download',
            '/webhooks/inbound',
            '/mirror/changes',
          ]) {
            for (const t of traversal) {
              if (await send('GET', `${prefix}/${t}`, baseHeaders)) n++;
            }
          }
        });
        return { tries: n, outcome: 'no 5xx, 4xx with messages, no foreign data, database unchanged' };
      },
      file,
    );
  });

  it('answers fuzzed query strings with no 5xx', async () => {
    await scenario(
      group,
      'fuzzed query strings (page, per_page, filters, modified_after, cursor, unknown keys)',
      async () => {
        let n = 0;
        const key = fc.oneof(
          fc.constantFrom(
            'page',
            'per_page',
            'filters',
            'modified_after',
            'include_deleted',
            'cursor',
            'limit',
            'fragment',
            'page[]',
            '__proto__',
            'constructor',
          ),
          fc.stringMatching(/^[a-z_]{1,12}$/),
        );
        const value = fc.oneof(
          anyText,
          fc.json(),
          fc.constantFrom(
            '0',
            '-1',
            '1001',
            '1.5',
            '1e3',
            '9007199254740993',
            '[{"field":"name","operator":"=","value":"x"}]',
            '[{"field":"name","operator":"; DROP","value":1}]',
            '[{"field":"\' OR 1=1","operator":"=","value":1}]',
            '2024-13-45T99:99:99Z',
          ),
        );
        await unchanged(() =>
          fc.assert(
            fc.asyncProperty(
              fc.constantFrom(...routes.filter((r) => r.method === 'GET')),
              fc.array(fc.tuple(key, value), { maxLength: 5 }),
              async (route, pairs) => {
                const qs = pairs.map(([k, v]) => `${encodeURIComponent(k)}=${encodeURIComponent(v)}`).join('&');
                const r = await send('GET', `${concrete(route)}?${qs}`, baseHeaders);
                if (r) n++;
              },
            ),
            { numRuns: runs, seed, includeErrorInReport: true },
          ),
        );
        return { tries: n, outcome: 'no 5xx, 4xx with messages, no foreign data, database unchanged' };
      },
      file,
    );
  });

  it('keeps SQL metacharacters in every filter field and value inert', async () => {
    await scenario(
      group,
      'SQL metacharacters in every filter field and value, every list route',
      async () => {
        let n = 0;
        const operators = scaled(['=', 'LIKE', 'IN', 'BETWEEN'], ['=', '!=', '>', '<=', 'LIKE', 'NOT ILIKE', 'IN', 'NOT IN', 'BETWEEN', 'NOT BETWEEN']);
        const payloads = scaled(sqlPayloads.slice(0, 4), sqlPayloads);
        await unchanged(async () => {
          let i = 0;
          // Every resource at full scale; else the contract's and every eighth of the real catalog's (the
          // same filter compiler serves them all: bench-scale runs keep the file within its timeout).
          const tried = scaled(
            resources.filter((d, k) => contractResourceNames.includes(d.name) || k % 8 === 0),
            resources,
          );
          for (const def of tried) {
            const path = def.scope === 'child' ? `${resourceDef(def.parent!)!.path}/${encodeURIComponent(fillers.id)}/${def.path}` : def.path;
            for (const field of [...def.fields, "name' OR '1'='1", "data->>'id'", 'source_update_time; --']) {
              // Every payload for every field, operators in rotation (all of them at full scale).
              for (const payload of payloads) {
                const operator = operators[i++ % operators.length]!;
                const value = operator.endsWith('IN') ? [payload, payload] : operator.endsWith('BETWEEN') ? [payload, payload] : payload;
                const filters = JSON.stringify([{ field, operator, value }]);
                const r = await send('GET', `${path}?filters=${encodeURIComponent(filters)}&per_page=1000`, baseHeaders);
                if (r) n++;
                if (r?.status === 200) {
                  const { data } = JSON.parse(r.text) as { data: { id: string }[] };
                  const mine = new Set(markers.get(a.accountId));
                  assert.ok(
                    data.every((o) => mine.has(o.id)),
                    `${def.name} filtered by ${field}: only the account's records`,
                  );
                }
              }
            }
          }
        });
        return {
          tries: n,
          outcome: `${scaled(`${contractResourceNames.length} contract resources and every eighth of the rest`, `${resources.length} resources`)} x every field x ${payloads.length} payloads: 200 (inert) or 400, no 5xx, only the account's records, database unchanged`,
        };
      },
      file,
    );
  });

  it('rejects fuzzed, oversized and mistyped bodies with a 4xx', async () => {
    await scenario(
      group,
      'fuzzed bodies and content types on every route; 11 MB bodies',
      async () => {
        let n = 0;
        const contentType = fc.constantFrom(
          'application/json',
          'text/plain',
          'application/xml',
          'text/xml',
          'multipart/form-data; boundary=xyz',
          'application/x-www-form-urlencoded',
          'application/octet-stream',
          'application/json; charset=utf-16',
          'image/png',
          'application/json, text/plain',
        );
        const body = fc.oneof(
          fc.json().map((j) => Buffer.from(j)),
          fc.string({ maxLength: 300 }).map((s) => Buffer.from(s)),
          fc.uint8Array({ maxLength: 300 }).map((u) => Buffer.from(u)),
          fc.constantFrom(
            Buffer.from('{"callback_url":"http://127.0.0.1:1/x","event":"CREATE","type":"\' OR 1=1"}'),
            Buffer.from('{"public_token":"\'; DROP TABLE linked_accounts; --"}'),
            Buffer.from('{"account_token":{"$ne":null}}'),
            Buffer.from('{"__proto__":{"admin":true}}'),
            Buffer.from('[' + '['.repeat(5000) + ']'.repeat(5000) + ']'),
          ),
        );
        await unchanged(async () => {
          await fc.assert(
            fc.asyncProperty(fc.constantFrom(...routes.filter((r) => r.method !== 'GET' && !isWrite(r))), contentType, body, async (route, type, payload) => {
              const r = await send(route.method, concrete(route), { ...baseHeaders, 'content-type': type }, payload);
              if (r) n++;
            }),
            { numRuns: runs, seed, includeErrorInReport: true },
          );
          // Over the 10 MB body limit, on every route that parses a body. The API may answer before it
          // has read the body and close the connection, so this goes over a raw socket.
          const big = Buffer.alloc(11 * 1024 * 1024, 0x61);
          // Forwarded bodies (pass-through, the catch-all's) are streamed upstream, as large as the upstream takes.
          for (const route of routes.filter((r) => r.method !== 'GET' && !r.path.startsWith('/passthrough') && !r.path.endsWith('*'))) {
            const r = await rawSend(route.method, concrete(route), { ...baseHeaders, 'content-type': 'application/json' }, big);
            n++;
            seen.set(r.status, (seen.get(r.status) ?? 0) + 1);
            assert.ok(
              r.status === 413 || r.status === 401 || r.status === 404,
              `${route.method} ${route.path}: an 11 MB body answered ${r.status} ${r.text.slice(0, 200)}`,
            );
            if (r.status >= 400) {
              m.errorBodies.push(r.text);
              assert.ok(typeof (JSON.parse(r.text) as { message?: unknown }).message === 'string', `${route.method} ${route.path}: 413 with a message`);
            }
          }
        });
        return { tries: n, outcome: 'no 5xx, 4xx with messages (413 over the limit), database unchanged' };
      },
      file,
    );
  });

  it('refuses forged and replayed webhook deliveries and forged internal credentials', async () => {
    await scenario(
      group,
      'forged and replayed webhook signatures; forged internal credentials',
      async () => {
        let n = 0;
        // A genuine delivery, captured on its way in.
        await m.api.restarted();
        const captured = await captureDelivery();
        const inbound = `/webhooks/inbound/${captured.registrationId}`;
        const inboxCount = async () => (await m.services.pool.query<{ n: number }>(`SELECT count(*)::int AS n FROM inbox_events`)).rows[0]!.n;
        const before = await inboxCount();
        // Replayed as it was: accepted as a duplicate, stored once.
        const replay = await send('POST', inbound, { 'content-type': 'application/json', authorization: captured.authorization }, captured.body);
        n++;
        assert.equal(replay!.status, 200);
        assert.equal((JSON.parse(replay!.text) as { duplicate?: boolean }).duplicate, true, 'a replay is recognised');
        assert.equal(await inboxCount(), before, 'a replay stores nothing');
        await unchanged(async () => {
          const forged = [
            // (Whitespace around a header value is not part of it in HTTP: no trailing-space variant.)
            '',
            'Bearer x',
            captured.authorization.slice(0, -1),
            `${captured.authorization}x`,
            `x${captured.authorization}`,
            captured.authorization.toUpperCase(),
            randomBytes(24).toString('base64url'),
            `Basic ${Buffer.from('a:b').toString('base64')}`,
            ...sqlPayloads.filter((s) => !s.includes('\u0000')),
          ];
          for (const authorization of forged) {
            const r = await send('POST', inbound, { 'content-type': 'application/json', authorization }, captured.body);
            n++;
            assert.equal(r?.status, 401, `a forged Authorization (${authorization.length} characters) is refused, not ${r?.status}`);
          }
          // The right secret for another registration, or for a registration that does not exist.
          const { rows } = await m.services.pool.query<{ id: string }>(`SELECT id FROM webhook_registrations WHERE id <> $1 LIMIT 3`, [
            captured.registrationId,
          ]);
          for (const id of [...rows.map((r) => r.id), randomUUID(), 'not-a-uuid', "' OR 1=1 --"]) {
            const r = await send(
              'POST',
              `/webhooks/inbound/${encodeURIComponent(id)}`,
              { 'content-type': 'application/json', authorization: captured.authorization },
              captured.body,
            );
            n++;
            assert.ok(r?.status === 401 || r?.status === 404, `the secret of one registration does not open another (${r?.status})`);
          }
          // Internal credentials (the worker's way to run async requests) cannot be forged.
          for (const value of [
            `${b.accountId}.${randomBytes(32).toString('hex')}`,
            `${a.accountId}.`,
            `${b.accountId}`,
            '..',
            `${b.accountId}.${'0'.repeat(64)}`,
          ]) {
            const r = await send('GET', '/projects', { 'x-mirror-internal': value }, undefined);
            n++;
            assert.equal(r?.status, 401, 'a forged internal credential is refused');
            const r2 = await send('GET', '/customers', { ...baseHeaders, 'x-mirror-internal': value }, undefined);
            n++;
            assert.equal(r2?.status, 401, 'a forged internal credential is refused even beside valid ones');
          }
        });
        return { tries: n, outcome: 'replay deduplicated (stored once); every forged signature and internal credential 401; database unchanged' };

        async function captureDelivery(): Promise<{ registrationId: string; authorization: string; body: string }> {
          // Change a record upstream and catch its delivery on the way in (URL, Authorization, body).
          const { rows } = await m.services.pool.query<{ id: string }>(
            `SELECT id FROM records WHERE account_id = $1 AND resource = 'vendors' AND deleted_at IS NULL LIMIT 1`,
            [a.accountId],
          );
          const changedAt = Date.now();
          await m.admin('PATCH', '/_admin/objects', {
            account_token: a.accountToken,
            resource: 'vendors',
            id: rows[0]!.id,
            patch: { name: `hostile ${changedAt}` },
          });
          // Captured once the mirror has taken it: a replay must come after the delivery it repeats.
          const d = await waitFor(
            'a webhook delivery the mirror accepted',
            () => (m.lastDelivery && m.lastDelivery.at >= changedAt && m.lastDelivery.status === 200 ? m.lastDelivery : undefined),
            { timeoutMs: 30_000 },
          );
          const registrationId = /\/webhooks\/inbound\/([^/?]+)/.exec(d.url)![1]!;
          return { registrationId, authorization: d.authorization, body: d.body };
        }
      },
      file,
    );
  });

  it("refuses link sessions (expired, out of scope, or another account's) and never answers with their data", async () => {
    await scenario(
      group,
      'expired, out-of-scope and foreign link sessions',
      async () => {
        let n = 0;
        const session = async (account: LinkedTestAccount, body: unknown) => {
          const res = await fetch(`${m.sandbox.url}/link/sessions`, {
            method: 'POST',
            headers: { ...m.upstreamHeaders, 'account-token': account.accountToken, 'content-type': 'application/json' },
            body: JSON.stringify(body),
          });
          const s = (await res.json()) as { id: string; session: string };
          m.extraSecrets.add(s.session);
          return s;
        };
        // Public and operator pages answer without an account (their answers hold no account's records);
        // storage links carry their own signature (403 for these fillers).
        const notAccountRoutes = ['/healthz', '/openapi.json', '/docs', '/metrics', '/status', '/status.json', '/storage/:resource/:id/:field'];
        const expired = await session(a, { name: 'expired', ttl: '60', mode: 'file-picker' });
        await fetch(`${m.sandbox.url}/link/sessions/${expired.id}/expire`, {
          method: 'POST',
          headers: { ...m.upstreamHeaders, 'account-token': a.accountToken },
        });
        const narrow = await session(a, { name: 'narrow', ttl: '600', scopes: ['vendors:read'] });
        const foreign = await session(b, { name: 'foreign', ttl: '600', scopes: ['link:read', 'passthrough:write', 'customers:read'] });
        await unchanged(async () => {
          const gets = routes.filter((r) => r.method === 'GET');
          for (const s of [expired, narrow, foreign]) {
            for (const route of gets) {
              // The session alone (as the contract allows upstream): the mirror wants its own credentials.
              const alone = await send('GET', concrete(route), { 'api-version': '2021-11-21', session: s.session });
              n++;
              if (alone && !notAccountRoutes.includes(route.path))
                assert.ok(alone.status === 401 || alone.status === 404, `${route.path} with a session alone: ${alone.status}`);
              // Beside the caller's own valid credentials: refused as ambiguous, never answered as the
              // session's account (the upstream would have: B's data, or an expired session's).
              const beside = await send('GET', concrete(route), { ...baseHeaders, session: s.session });
              n++;
              if (beside && !notAccountRoutes.includes(route.path))
                assert.ok(beside.status >= 400, `${route.path} with a session beside credentials: ${beside.status}`);
            }
            const passthrough = await send(
              'POST',
              '/passthrough',
              { ...baseHeaders, session: s.session, 'content-type': 'application/json' },
              JSON.stringify({ method: 'GET', path: '/rest/v1.0/vendors' }),
            );
            n++;
            assert.equal(passthrough?.status, 400, 'pass-through with a session beside credentials is refused');
          }
        });
        return { tries: n, outcome: "sessions alone: 401; beside valid credentials: 400 (ambiguous), never the session's account; database unchanged" };
      },
      file,
    );
  });

  it('answers malformed HTTP with a 4xx and keeps serving', async () => {
    await scenario(
      group,
      'malformed HTTP (bad request line, invalid header bytes, 64 KB header, bad Content-Length, bad chunking)',
      async () => {
        const port = Number(new URL(m.apiUrl).port);
        const cases = [
          'GARBAGE\r\n\r\n',
          'GET /projects HTTP/9.9\r\nHost: x\r\n\r\n',
          'GET /projects HTTP/1.1\r\nHost: x\r\nX-Bad: a\u0000b\r\n\r\n',
          `GET /projects HTTP/1.1\r\nHost: x\r\nX-Big: ${'a'.repeat(65_536)}\r\n\r\n`,
          'POST /webhooks HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: -5\r\n\r\n{}',
          'POST /webhooks HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n{}\r\n0\r\n\r\n',
          'POST /webhooks HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n',
          'GET /../../../etc/passwd HTTP/1.1\r\nHost: x\r\n\r\n',
          'GET http://evil.example/projects HTTP/1.1\r\nHost: evil.example\r\n\r\n',
        ];
        const statuses: number[] = [];
        for (const raw of cases) {
          const status = await new Promise<number>((resolve) => {
            let data = '';
            // Written a few KB at a time, stopping once the API answers: a server that refuses a request
            // and closes with bytes unread resets the connection, which could discard its answer.
            const socket = connect(port, '127.0.0.1', () => {
              void (async () => {
                for (let i = 0; i < raw.length && data === '' && !socket.destroyed; i += 4096) {
                  socket.write(raw.slice(i, i + 4096));
                  await new Promise((r) => setTimeout(r, 5));
                }
                if (!socket.destroyed) socket.end();
              })();
            });
            socket.on('data', (d: Buffer) => (data += d.toString('latin1')));
            socket.on('close', () => resolve(Number(/^HTTP\/1\.1 (\d{3})/.exec(data)?.[1] ?? 0)));
            socket.on('error', () => undefined);
            socket.setTimeout(15_000, () => socket.destroy());
          });
          statuses.push(status);
          assert.ok(status >= 400 && status < 500, `${JSON.stringify(raw.slice(0, 60))}: answered ${status || 'nothing'}`);
        }
        const health = await send('GET', '/healthz', {});
        assert.equal(health?.status, 200, 'the API still serves');
        assert.equal(m.api.crashes.length, 0, 'the API did not crash');
        return { tries: cases.length, outcome: `answered ${statuses.join(', ')}; the API kept serving` };
      },
      file,
    );
  });

  // Last of the scenarios that compare the database: an accepted write changes it (and the
  // upstream's webhooks for it follow), so it runs after them.
  it('answers fuzzed writes with no 5xx: the upstream accepts (2xx) or refuses them with a message', async () => {
    await scenario(
      group,
      'fuzzed bodies and content types on every write route (forwarded upstream)',
      async () => {
        let n = 0;
        const statuses = new Map<number, number>();
        const writeBody = fc.oneof(
          fc.json().map((j) => Buffer.from(j)),
          fc.string({ maxLength: 200 }).map((x) => Buffer.from(x)),
          fc.record({ name: anyText, email: anyText, tax_number: anyText }).map((o) => Buffer.from(JSON.stringify(o))),
        );
        const type = fc.constantFrom('application/json', 'text/plain', 'application/xml', 'application/octet-stream');
        await fc.assert(
          fc.asyncProperty(fc.constantFrom(...routes.filter(isWrite)), type, writeBody, async (route, contentType, payload) => {
            const r = await send(route.method, concrete(route), { ...baseHeaders, 'content-type': contentType }, payload);
            if (!r) return;
            n++;
            statuses.set(r.status, (statuses.get(r.status) ?? 0) + 1);
          }),
          { numRuns: runs, seed, includeErrorInReport: true },
        );
        return { tries: n, outcome: `no 5xx; answers ${JSON.stringify(Object.fromEntries(statuses))}, every 4xx with a message` };
      },
      file,
    );
  });

  it('leaks no secret, and keeps account tokens unreadable in the database without the key', async () => {
    await scenario(
      'secrets',
      'scan of hostile-input logs and error bodies; the database dumped whole',
      async () => {
        const scan = m.scanForSecrets();
        assert.deepEqual(scan.findings, []);
        // Every table as text (bytea as hex): no token, webhook secret or client secret, in any encoding.
        const { rows: tables } = await m.services.pool.query<{ t: string }>(
          `SELECT c.relname AS t FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = 'public' AND c.relkind IN ('r', 'p') AND NOT c.relispartition`,
        );
        let dump = '';
        for (const { t } of tables) dump += (await m.services.pool.query<{ x: string }>(`SELECT x::text AS x FROM "${t}" x`)).rows.map((r) => r.x).join('\n');
        const secrets = m.secrets().filter((s) => !s.name.startsWith('MIRROR_ENCRYPTION') && !s.name.startsWith('MIRROR_SIGNING'));
        const found = secrets.filter((s) =>
          [s.value, Buffer.from(s.value).toString('hex'), Buffer.from(s.value).toString('base64')].some((v) => dump.includes(v)),
        );
        assert.deepEqual(
          found.map((s) => s.name),
          [],
          'no secret is readable in the database',
        );
        // The stored token opens only with the key.
        const { rows } = await m.services.pool.query<{ token_ciphertext: Buffer }>(`SELECT token_ciphertext FROM linked_accounts WHERE id = $1`, [a.accountId]);
        assert.equal(decryptSecret(m.services.keys.encryptionKey, rows[0]!.token_ciphertext), a.accountToken, 'the key opens it');
        assert.throws(() => decryptSecret(randomBytes(32), rows[0]!.token_ciphertext), 'another key does not');
        const statuses = [...seen]
          .sort(([x], [y]) => x - y)
          .map(([s, c]) => `${s}: ${c}`)
          .join(', ');
        return {
          tries: scan.lines + scan.bodies + tables.length,
          outcome: `${scan.lines} log lines, ${scan.bodies} error bodies, ${scan.secrets} secrets: none found; ${tables.length} tables dumped: no token readable, ciphertext opens only with the key; answers seen ${statuses}; ${socketRetries} requests resent after a connection reset`,
        };
      },
      file,
    );
  });
});
