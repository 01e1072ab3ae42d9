// The upstream client's stream mode (the forwarder is a streaming mode of the one client):
// a forwarded call goes through the governor as an interactive request (a slot before, the answer's
// rate-limit headers after, the slot held until the body is done), keeps to the base URL, has the
// same total deadline, is never resent with a body stream, and streams its answer unread. Against a
// local HTTP server, with a governor that records what it is asked.
import assert from 'node:assert/strict';
import { createServer, type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Readable } from 'node:stream';
import { after, before, beforeEach, describe, it } from 'node:test';
import type { Governor, GovernorKeys } from '../../../connectors/governor.ts';
import type { RateLimitReport } from '../../../connectors/rate-limit-headers.ts';
import { UpstreamClient } from '../../../connectors/upstream-client.ts';

interface Recorded {
  acquired: GovernorKeys[];
  reported: { keys: GovernorKeys; report: RateLimitReport; status: number }[];
  held: number;
}

function recordingGovernor(): Governor & Recorded {
  const g: Governor & Recorded = {
    acquired: [],
    reported: [],
    held: 0,
    acquire(keys) {
      g.acquired.push(keys);
      g.held++;
      let released = false;
      return Promise.resolve(() => {
        if (!released) g.held--;
        released = true;
      });
    },
    report(keys, report, status) {
      g.reported.push({ keys, report, status });
    },
  };
  return g;
}

async function bodyOf(req: IncomingMessage): Promise<string> {
  let s = '';
  for await (const c of req) s += String(c);
  return s;
}

describe('upstream client: stream mode', () => {
  let server: Server;
  let base: string;
  let governor: Governor & Recorded;
  let client: UpstreamClient;
  const seen: { path: string; headers: IncomingMessage['headers']; body: string }[] = [];
  let resets = 0;

  before(async () => {
    server = createServer((req, res) => {
      const path = req.url!;
      void bodyOf(req).then((body) => {
        seen.push({ path, headers: req.headers, body });
        if (path.startsWith('/api/passthrough')) {
          res.writeHead(429, {
            'content-type': 'application/json',
            'svc-ratelimit-total': '10',
            'svc-ratelimit-remaining': '0',
            'svc-ratelimit-resetsattimestamp': String(Math.ceil(Date.now() / 1000) + 5),
          });
          res.end(JSON.stringify({ message: 'rate limited' }));
        } else if (path.startsWith('/api/big')) {
          res.writeHead(200, { 'content-type': 'application/octet-stream' });
          res.end(Buffer.alloc(300_000, 1));
        } else if (path.startsWith('/api/trickle')) {
          res.writeHead(200, { 'content-type': 'application/octet-stream' });
          const timer = setInterval(() => res.write('x'), 100);
          res.on('close', () => clearInterval(timer));
        } else if (path.startsWith('/api/reset')) {
          resets++;
          req.socket.destroy();
        } else {
          res.writeHead(201, { 'content-type': 'application/json', 'svc-ratelimit-total': '10', 'svc-ratelimit-remaining': '7' });
          res.end(JSON.stringify({ echo: body }));
        }
      });
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  beforeEach(() => {
    seen.length = 0;
    resets = 0;
    governor = recordingGovernor();
    client = new UpstreamClient({ baseUrl: `${base}/api`, clientId: 'client-1', clientSecret: 'secret-1', governor, timeoutMs: 500, totalTimeoutMs: 1_500 });
  });
  after(async () => {
    server.closeAllConnections();
    await new Promise((resolve) => server.close(resolve));
  });

  it('sends through the governor as an interactive call, with the given headers only, and reports the answer', async () => {
    const res = await client.stream({
      method: 'POST',
      path: '/things?x=1',
      headers: { 'content-type': 'text/plain', session: 's-1' },
      body: Readable.from(['a', 'b']),
      budget: { account: 'acc-1', sourceSystem: 'sys' },
    });
    assert.equal(res.status, 201);
    assert.deepEqual(governor.acquired, [{ client: 'client-1', account: 'acc-1', sourceSystem: 'sys', priority: 'interactive' }]);
    assert.equal(governor.reported.length, 1);
    assert.equal(governor.reported[0]!.status, 201);
    assert.equal(governor.reported[0]!.report.service?.remaining, 7);
    assert.equal(governor.held, 1, 'the slot is held while the body is unread');
    assert.deepEqual(JSON.parse((await res.readAll(1_000)).toString()), { echo: 'ab' });
    await waitUntil(() => governor.held === 0);
    assert.equal(seen[0]!.path, '/api/things?x=1');
    assert.equal(seen[0]!.headers.session, 's-1');
    assert.equal(seen[0]!.headers['client-secret'], undefined, 'stream mode adds no credential');
  });

  it('relays a 429 as an answer and reports it to the governor', async () => {
    const res = await client.stream({ method: 'POST', path: '/passthrough', headers: {}, body: 'x', budget: { account: 'acc-1' } });
    assert.equal(res.status, 429);
    assert.equal(res.headers['svc-ratelimit-remaining'], '0');
    assert.equal(governor.reported[0]!.status, 429);
    assert.equal(governor.reported[0]!.report.service?.remaining, 0);
    await res.discard();
    assert.equal(governor.held, 0);
  });

  it('refuses a path that leaves the base URL without sending it', async () => {
    await assert.rejects(client.stream({ method: 'GET', path: '/../other/x', headers: {} }), /left the upstream's base URL/);
    assert.equal(seen.length, 0);
    assert.equal(governor.acquired.length, 0);
  });

  it('caps a body read whole', async () => {
    const res = await client.stream({ method: 'GET', path: '/big', headers: {} });
    await assert.rejects(res.readAll(100_000), /exceeds 100000 bytes/);
    await waitUntil(() => governor.held === 0);
  });

  it('cuts a streamed answer at the total deadline (UPSTREAM_TOTAL_TIMEOUT_MS)', { timeout: 10_000 }, async () => {
    const res = await client.stream({ method: 'GET', path: '/trickle', headers: {} });
    await assert.rejects(res.readAll(1_000_000), (error: unknown) => {
      assert.equal((error as { code?: string }).code, 'upstream_timeout', String(error));
      return true;
    });
    await waitUntil(() => governor.held === 0);
  });

  it('never resends a body stream; resends a GET that got no answer', async () => {
    await assert.rejects(client.stream({ method: 'POST', path: '/reset', headers: {}, body: Readable.from(['once']) }), /could not be reached/);
    assert.equal(resets, 1);
    await assert.rejects(client.stream({ method: 'GET', path: '/reset', headers: {} }), /could not be reached/);
    assert.equal(resets, 4, 'a GET is tried up to the client maxAttempts (3)');
    assert.equal(governor.held, 0);
  });
});

async function waitUntil(check: () => boolean, ms = 3_000): Promise<void> {
  const end = Date.now() + ms;
  while (!check()) {
    if (Date.now() > end) throw new Error('timed out waiting');
    await new Promise((r) => setTimeout(r, 10));
  }
}
