// The client takes no more of an answer than it can use: a body over the cap,
// announced or not, stops being read at the cap and closes its connection; a gzip body is inflated to
// the cap at most; an answer that trickles in is cut at the attempt's deadline although it is never
// idle for long. Against a local HTTP server that counts what it managed to send.
import assert from 'node:assert/strict';
import { createServer, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { once } from 'node:events';
import { createGzip, gzipSync } from 'node:zlib';
import { after, before, describe, it } from 'node:test';
import { UpstreamClient } from '../../../connectors/upstream-client.ts';

const cap = 1024 * 1024;
const page = (n: number) =>
  Buffer.from(
    JSON.stringify({
      data: Array.from({ length: n }, (_, i) => ({ id: `c-${i}`, name: 'x'.repeat(100) })),
      meta: { current_page: 1, has_more_results: false },
    }),
  );
const blanks = Buffer.alloc(64 * 1024, 0x20);

/** The gzip of `bytes` blanks, made a chunk at a time (the test never holds them inflated). */
async function gzipOfBlanks(bytes: number): Promise<Buffer> {
  const gzip = createGzip({ level: 9 });
  const out: Buffer[] = [];
  gzip.on('data', (c: Buffer) => out.push(c));
  const ended = once(gzip, 'end');
  for (let left = bytes; left > 0; left -= blanks.length) if (!gzip.write(blanks)) await once(gzip, 'drain');
  gzip.end();
  await ended;
  return Buffer.concat(out);
}

describe('upstream body limits', () => {
  let server: Server;
  let client: UpstreamClient;
  /** Bytes each streamed answer had written when its connection closed. */
  const written: number[] = [];

  /** `{"data":[` then blanks, as fast as the client reads, until `total` bytes or the client hangs up. */
  function stream(res: ServerResponse, total: number, headers: Record<string, string> = {}): void {
    res.writeHead(200, { 'content-type': 'application/json', ...headers });
    let sent = 0;
    let closed = false;
    res.on('close', () => {
      closed = true;
      written.push(sent);
    });
    const pump = (): void => {
      while (!closed && sent < total) {
        sent += blanks.length;
        if (!res.write(blanks)) return void res.once('drain', pump);
      }
      if (!closed) res.end('],"meta":{}}');
    };
    res.write('{"data":[');
    pump();
  }

  before(async () => {
    const bomb = await gzipOfBlanks(200 * cap);
    server = createServer((req, res) => {
      const path = new URL(req.url!, 'http://x').pathname;
      if (path === '/fits') {
        const body = page(6000);
        assert.ok(body.length < cap);
        res.writeHead(200, { 'content-type': 'application/json' });
        for (let at = 0; at < body.length; at += 16_384) res.write(body.subarray(at, at + 16_384));
        res.end();
      } else if (path === '/announced') {
        stream(res, 50 * cap, { 'content-length': String(50 * cap + 21) });
      } else if (path === '/chunked') {
        stream(res, 50 * cap);
      } else if (path === '/bomb') {
        res.writeHead(200, { 'content-type': 'application/json', 'content-encoding': 'gzip', 'content-length': String(bomb.length) }).end(bomb);
      } else if (path === '/gzip') {
        const body = gzipSync(page(3000));
        res.writeHead(200, { 'content-type': 'application/json', 'content-encoding': 'gzip' }).end(body);
      } else if (path === '/trickle') {
        res.writeHead(200, { 'content-type': 'application/json' });
        res.write('{"data":[');
        const timer = setInterval(() => res.write(' '), 100);
        res.on('close', () => clearInterval(timer));
      }
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    client = new UpstreamClient({
      baseUrl: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
      clientId: 'c',
      clientSecret: 's',
      maxAttempts: 1,
      timeoutMs: 500,
      totalTimeoutMs: 1500,
      maxBodyBytes: cap,
    });
  });
  after(async () => {
    server.closeAllConnections();
    await new Promise((resolve) => server.close(resolve));
  });

  const tooLarge = (pattern: RegExp) => (error: unknown) => {
    assert.equal((error as { code?: string }).code, 'upstream_body_too_large', String(error));
    assert.match((error as Error).message, pattern);
    assert.match((error as Error).message, /UPSTREAM_MAX_BODY_BYTES/);
    assert.equal((error as { retryable?: boolean }).retryable, false, 'not retried: the same request brings the same body');
    return true;
  };

  it('reads a body up to the cap', async () => {
    const res = await client.request({ method: 'GET', path: '/gzip', what: 'customers page 1' });
    assert.equal((res.body as { data: unknown[] }).data.length, 3000);
    const fits = await client.request({ method: 'GET', path: '/fits' });
    assert.equal((fits.body as { data: unknown[] }).data.length, 6000);
  });

  it('refuses a body announced over the cap without reading it', async () => {
    written.length = 0;
    await assert.rejects(client.request({ method: 'GET', path: '/announced', what: 'customers page 1' }), tooLarge(/customers page 1/));
    await waitUntil(() => written.length === 1);
    assert.ok(written[0]! < 10 * cap, `the server wrote ${written[0]} bytes before the connection closed`);
  });

  it('stops reading a chunked body at the cap and closes the connection', async () => {
    written.length = 0;
    await assert.rejects(client.request({ method: 'GET', path: '/chunked', what: 'customers page 2' }), tooLarge(/customers page 2 is over/));
    await waitUntil(() => written.length === 1);
    assert.ok(written[0]! < 10 * cap, `the server wrote ${written[0]} bytes before the connection closed`);
  });

  it('inflates a gzip bomb to the cap at most', async () => {
    const before = process.memoryUsage().arrayBuffers;
    await assert.rejects(client.request({ method: 'GET', path: '/bomb', what: 'customers page 3' }), tooLarge(/inflates to over/));
    assert.ok(process.memoryUsage().arrayBuffers - before < 100 * cap, 'the bomb was not inflated whole');
  });

  it('cuts an answer that trickles in at the deadline', { timeout: 10_000 }, async () => {
    const started = Date.now();
    await assert.rejects(client.request({ method: 'GET', path: '/trickle', what: 'customers page 4' }), (error: unknown) => {
      assert.equal((error as { code?: string }).code, 'upstream_timeout', String(error));
      assert.match((error as Error).message, /customers page 4.*UPSTREAM_TOTAL_TIMEOUT_MS/);
      assert.equal((error as { retryable?: boolean }).retryable, true);
      return true;
    });
    const took = Date.now() - started;
    assert.ok(took >= 1400 && took < 5000, `cut after ${took} ms`);
  });

  it('still hands a cancellation back as it was', { timeout: 10_000 }, async () => {
    const controller = new AbortController();
    setTimeout(() => controller.abort(), 200);
    await assert.rejects(
      client.request({ method: 'GET', path: '/trickle', signal: controller.signal }),
      (error: unknown) => (error as Error).name === 'AbortError',
    );
  });
});

async function waitUntil(condition: () => boolean, timeoutMs = 5000): Promise<void> {
  const until = Date.now() + timeoutMs;
  while (!condition()) {
    if (Date.now() > until) throw new Error('timed out waiting');
    await new Promise((r) => setTimeout(r, 20));
  }
}
