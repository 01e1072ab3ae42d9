// The drop-in rule for what the mirror does not hold: every path of the upstream's surface that no
// route of the mirror serves (resources it does not mirror, methods it does not apply, link calls,
// /ping) is forwarded as it came (headers the mirror does not know, a JSON body on a GET, a
// trailing slash) and the answer relayed with a warning; a path off the surface stays a 404 that
// contacts nobody. A recording proxy between the mirror and the sandbox shows what reached the
// upstream.
import assert from 'node:assert/strict';
import { createServer, type IncomingHttpHeaders, type Server } from 'node:http';
import { connect, type AddressInfo } from 'node:net';
import { after, before, describe, it } from 'node:test';
import { request } from 'undici';
import { linkAndSync, startHarness, type Harness } from '../helpers/harness.ts';

interface Seen {
  method: string;
  url: string;
  headers: IncomingHttpHeaders;
  body: string;
}

/** An HTTP proxy to `target()` that records every request it relays. */
async function recordingProxy(target: () => string): Promise<{ url: string; seen: Seen[]; close(): Promise<void> }> {
  const seen: Seen[] = [];
  const server: Server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const body = Buffer.concat(chunks);
      seen.push({ method: req.method!, url: req.url!, headers: req.headers, body: body.toString('utf8') });
      const headers = Object.fromEntries(
        Object.entries(req.headers)
          .filter(([k]) => !['host', 'connection', 'content-length', 'transfer-encoding'].includes(k))
          .map(([k, v]) => [k, String(v)]),
      );
      fetch(`${target()}${req.url}`, { method: req.method, headers, ...(body.length && req.method !== 'GET' && req.method !== 'HEAD' ? { body } : {}) })
        .then(async (up) => {
          const out = Buffer.from(await up.arrayBuffer());
          const relayed = Object.fromEntries(
            [...up.headers].filter(([k]) => !['content-encoding', 'content-length', 'transfer-encoding', 'connection'].includes(k)),
          );
          res.writeHead(up.status, relayed).end(out);
        })
        .catch((error: unknown) => res.writeHead(502).end(String(error)));
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, seen, close: () => new Promise((resolve) => server.close(() => resolve())) };
}

/** An HTTP/1.0 GET with exactly these header lines (and Host), read to the end of the connection. */
async function rawGet(base: string, path: string, lines: string[]): Promise<{ status: number; body: string }> {
  const url = new URL(base);
  const socket = connect(Number(url.port), url.hostname);
  socket.write(`GET ${path} HTTP/1.0\r\nhost: ${url.host}\r\n${lines.map((l) => `${l}\r\n`).join('')}\r\n`);
  const chunks: Buffer[] = [];
  for await (const chunk of socket) chunks.push(chunk as Buffer);
  const text = Buffer.concat(chunks).toString('utf8');
  const split = text.indexOf('\r\n\r\n');
  return { status: Number(/^HTTP\/1\.[01] (\d{3})/.exec(text)?.[1]), body: text.slice(split + 4) };
}

describe('drop-in: what the mirror does not hold is forwarded as it came', { timeout: 240_000 }, () => {
  let h: Harness;
  let proxy: Awaited<ReturnType<typeof recordingProxy>>;
  let token: string;

  before(async () => {
    let sandboxUrl = '';
    proxy = await recordingProxy(() => sandboxUrl);
    // The harness starts the sandbox itself; the mirror is pointed at the proxy, which learns the
    // sandbox's address before any request reaches it.
    h = await startHarness({ sandbox: { size: 4 }, config: { UPSTREAM_BASE_URL: proxy.url, MIRROR_RESOURCES: '*' } });
    sandboxUrl = h.sandbox.url;
    ({ accountToken: token } = await linkAndSync(h, 'graphledger', 'drop-in'));
  });

  after(async () => {
    await h?.close();
    await proxy?.close();
  });

  // undici's request, not fetch: fetch refuses a body on a GET, which the real service's clients send.
  const mirror = async (method: string, url: string, headers: Record<string, string> = {}, body?: string) => {
    const res = await request(`${h.apiUrl}${url}`, {
      method: method as 'GET',
      headers: { ...h.clientHeaders, 'account-token': token, ...headers },
      ...(body === undefined ? {} : { body }),
    });
    const text = await res.body.text();
    return { status: res.statusCode, header: (name: string) => [res.headers[name] ?? []].flat().join(', '), text, json: () => JSON.parse(text) as unknown };
  };
  const lastSeen = (pathStart: string) => proxy.seen.filter((s) => s.url.startsWith(pathStart)).at(-1);

  it('forwards a resource the mirror does not hold, with headers and parameters it does not know', async () => {
    const extra = { 'return-source-id': 'true', 'company-id': 'c-1', 'x-app-trace': 'abc' };
    const res = await mirror('GET', '/rfis?status=open&expand=responses', extra);
    const sent = lastSeen('/rfis');
    assert.ok(sent, 'the request reached the upstream');
    assert.equal(sent.url, '/rfis?status=open&expand=responses');
    assert.equal(sent.headers['return-source-id'], 'true');
    assert.equal(sent.headers['company-id'], 'c-1');
    assert.equal(sent.headers['x-app-trace'], 'abc');
    assert.equal(sent.headers['account-token'], token);
    const direct = await fetch(`${h.sandbox.url}/rfis?status=open&expand=responses`, { headers: { ...h.upstreamHeaders, 'account-token': token, ...extra } });
    assert.equal(res.status, direct.status, `the upstream's status is relayed: ${res.text}`);
    assert.equal(res.text, await direct.text(), 'and its body');
    // RFIs are in the catalog, but GraphLedger serves none: the mirror holds nothing of them for this account.
    assert.match(res.header('svc-warnings'), /^answered by the upstream: GraphLedger does not serve rfis/);
  });

  it('forwards a read with many headers with its credential, and answers as the upstream does', async () => {
    // An HTTP server reads a bounded number of headers (Node, as the sandbox, about the first
    // thousand) and ignores the rest. A read with 1,200 small headers, the credential first as
    // clients send it, is answered by the upstream, directly and through the mirror; one whose
    // credential comes past the bound is refused by both. Sent as HTTP/1.0 without a Connection
    // header (as curl and others send), so that the mirror's own request to the upstream (which adds
    // one) holds one header more than the mirror read.
    const pads = Array.from({ length: 1200 }, (_, i) => `x-pad-${i}: v`);
    const credential = (auth: Record<string, string>) => [...Object.entries(auth), ['account-token', token]].map(([k, v]) => `${k}: ${v}`);
    const direct = await rawGet(h.sandbox.url, '/vendors?per_page=3', [...credential(h.upstreamHeaders), ...pads]);
    assert.equal(direct.status, 200, `the sandbox reads a credential sent first: ${direct.body}`);
    const res = await rawGet(h.apiUrl, '/vendors?per_page=3', [...credential(h.clientHeaders), ...pads]);
    assert.equal(res.status, 200, `the mirror forwards it with its credential: ${res.body}`);
    assert.equal(lastSeen('/vendors?per_page=3')?.headers['account-token'], token);
    assert.deepEqual(JSON.parse(res.body), JSON.parse(direct.body), "the upstream's answer");

    const late = (auth: Record<string, string>) => [...pads, ...credential(auth)];
    assert.equal((await rawGet(h.sandbox.url, '/vendors?per_page=3', late(h.upstreamHeaders))).status, 401, 'the sandbox ignores headers past its bound');
    assert.equal((await rawGet(h.apiUrl, '/vendors?per_page=3', late(h.clientHeaders))).status, 401, 'and so does the mirror');
  });

  it("forwards a JSON body sent on a GET, as the real service's clients send filters", async () => {
    const body = JSON.stringify({ filters: [{ field: 'status', operator: '=', value: 'open' }] });
    await mirror('GET', '/submittals', { 'content-type': 'application/json' }, body);
    const sent = lastSeen('/submittals');
    assert.ok(sent);
    assert.equal(sent.method, 'GET');
    assert.equal(sent.body, body);
  });

  it('forwards a DELETE and writes under a parent the mirror has no route for', async () => {
    await mirror('DELETE', '/rfis/rfi-1');
    assert.equal(lastSeen('/rfis/rfi-1')?.method, 'DELETE');
    await mirror('POST', '/rfis/rfi-1/responses', { 'content-type': 'application/json' }, JSON.stringify({ body: 'answered' }));
    const sent = lastSeen('/rfis/rfi-1/responses');
    assert.equal(sent?.method, 'POST');
    assert.equal(sent?.body, JSON.stringify({ body: 'answered' }));
  });

  it('answers /ping with client credentials alone, from the upstream', async () => {
    const res = await fetch(`${h.apiUrl}/ping`, { headers: h.clientHeaders });
    assert.equal(res.status, 200, await res.clone().text());
    assert.deepEqual(await res.json(), { status: 'ok' });
    assert.equal(lastSeen('/ping')?.headers['account-token'], undefined);
  });

  it("keeps a 404 for a path off the upstream's surface, contacting nobody", async () => {
    const before = proxy.seen.length;
    for (const path of ['/nope', '/mirror/nope', '/vendors/x/y/z']) {
      const res = await mirror('GET', path);
      assert.equal(res.status, 404, path);
      assert.equal((res.json() as { code: string }).code, 'route_not_found', path);
    }
    assert.equal(proxy.seen.length, before);
  });

  it('serves a trailing slash as the path without it', async () => {
    const res = await mirror(
      'POST',
      '/webhooks/',
      { 'content-type': 'application/json' },
      JSON.stringify({ callback_url: 'http://127.0.0.1:9/hook', event: 'CREATE', type: 'vendors' }),
    );
    assert.ok(res.status === 201 || res.status === 200, `${res.status} ${res.text}`);
    const forwarded = await mirror('GET', '/rfis/');
    assert.equal(lastSeen('/rfis/')?.url, '/rfis/');
    assert.ok(forwarded.status < 500);
  });

  it('takes Async-Request: 1 as true', async () => {
    const res = await mirror('POST', '/vendors', { 'content-type': 'application/json', 'async-request': '1' }, JSON.stringify({ name: 'Async Vendor' }));
    assert.equal(res.status, 202, res.text);
    assert.ok(res.header('svc-async-request-id'));
  });
});
