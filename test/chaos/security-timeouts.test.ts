// Security: the API process must not let a caller hold a connection (and a body
// buffer) by sending slowly or not at all. Against the real `mirror api` process on its port, with
// short timeouts configured: a silent connection, headers trickled a byte at a time (slowloris), a
// body announced and never sent, a body dripped under the idle timeout, an idle kept-alive
// connection: each is closed within its timeout. A pass-through upload that keeps moving for longer
// than the request timeout still succeeds.
import assert from 'node:assert/strict';
import { createHash, randomBytes } from 'node:crypto';
import { type ClientRequest, request as httpRequest } from 'node:http';
import { connect, type Socket } from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';
import { after, before, describe, it } from 'node:test';
import { startChaosMirror, type ChaosMirror, type LinkedTestAccount } from './env.ts';
import { printOwnRows, scenario } from './report.ts';

const file = import.meta.filename;
const group = 'security';

const headersMs = 1000;
// Twice the pauses a busy two-core machine was seen to put between the chunks of a moving upload
// (the test, the API and the sandbox share it): a moving body must never look stalled here.
const bodyIdleMs = 2000;
const requestMs = 3000;
const keepAliveMs = 1000;
/** A connection still open this many times past its timeout has not been cut by it. */
const slack = 3;

interface Outcome {
  /** ms from the first byte sent until the server closed the connection; undefined if it did not. */
  closedAfterMs: number | undefined;
  /** What the server sent back. */
  answer: string;
}

describe('chaos: slow and stalled requests on the API process', { timeout: 240_000 }, () => {
  let m: ChaosMirror;
  let a: LinkedTestAccount;
  let host: string;
  let port: number;

  before(async () => {
    m = await startChaosMirror({
      name: 'security-timeouts',
      sandbox: { size: 6 },
      env: {
        API_HEADERS_TIMEOUT_MS: String(headersMs),
        API_BODY_IDLE_TIMEOUT_MS: String(bodyIdleMs),
        API_REQUEST_TIMEOUT_MS: String(requestMs),
        API_KEEPALIVE_TIMEOUT_MS: String(keepAliveMs),
        // An upload may be held by the budget for longer than the idle timeout (a scenario below).
        MIRROR_INTERACTIVE_MAX_WAIT_MS: '10000',
      },
    });
    a = await m.link('buildpro');
    const url = new URL(m.apiUrl);
    host = url.hostname;
    port = Number(url.port);
  });

  after(async () => {
    await m?.close();
    printOwnRows();
  });

  const credentials = () =>
    `Api-Version: 2021-11-21\r\nClient-Id: ${m.clientHeaders['client-id']}\r\nClient-Secret: ${m.clientHeaders['client-secret']}\r\nAccount-Token: ${a.accountToken}\r\n`;

  /** Opens a raw connection, lets `drive` write to it, and watches for the server to close it within `waitMs`. */
  function watch(waitMs: number, drive: (socket: Socket) => void): Promise<Outcome> {
    return new Promise((resolve) => {
      const socket = connect(port, host);
      let answer = '';
      let started = 0;
      let done = false;
      const finish = (o: Outcome) => {
        if (done) return;
        done = true;
        clearTimeout(timer);
        socket.destroy();
        resolve(o);
      };
      const timer = setTimeout(() => finish({ closedAfterMs: undefined, answer }), waitMs);
      socket.on('data', (d: Buffer) => (answer += d.toString('latin1')));
      socket.on('error', () => undefined);
      socket.on('close', () => finish({ closedAfterMs: Date.now() - started, answer }));
      socket.on('connect', () => {
        started = Date.now();
        drive(socket);
      });
    });
  }

  /** Writes `text` a byte every `everyMs` until the socket closes. */
  function trickle(socket: Socket, text: string, everyMs: number): void {
    let i = 0;
    const next = () => {
      if (socket.destroyed || i >= text.length) return;
      socket.write(text[i++]!);
      setTimeout(next, everyMs);
    };
    next();
  }

  /** A pass-through upload of `length` bytes, its body written by `write`; resolves with the answer. */
  function sendUpload(length: number, write: (req: ClientRequest) => unknown): Promise<{ status: number; body: string }> {
    return new Promise((resolve, reject) => {
      const req = httpRequest(
        {
          host,
          port,
          method: 'POST',
          path: '/passthrough-upload',
          headers: {
            ...m.clientHeaders,
            'account-token': a.accountToken,
            'content-type': 'application/octet-stream',
            'content-length': String(length),
            'passthrough-method': 'PUT',
            'passthrough-path': '/rest/v1.0/files/1',
          },
        },
        (res) => {
          let body = '';
          res.on('data', (d: Buffer) => (body += d.toString('utf8')));
          res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
          res.on('error', reject);
        },
      );
      req.on('error', reject);
      void write(req);
    });
  }

  function assertCut(o: Outcome, timeoutMs: number, what: string): void {
    assert.ok(
      o.closedAfterMs !== undefined,
      `${what}: the connection was still open ${slack * timeoutMs} ms later (timeout ${timeoutMs} ms); the server sent ${JSON.stringify(o.answer.slice(0, 120))}`,
    );
    assert.ok(o.closedAfterMs >= timeoutMs * 0.8, `${what}: closed after ${o.closedAfterMs} ms, before its ${timeoutMs} ms timeout`);
    // Nothing but a 408 (or nothing at all) may come back: the request never reached a handler.
    assert.ok(o.answer === '' || o.answer.startsWith('HTTP/1.1 408'), `${what}: answered ${JSON.stringify(o.answer.slice(0, 120))}`);
  }

  it('a connection that sends nothing, and headers trickled a byte at a time, are cut within the headers timeout', async () => {
    await scenario(
      group,
      'slowloris: silent connection and headers trickled a byte every 100 ms',
      async () => {
        const silent = await watch(slack * headersMs, () => undefined);
        assertCut(silent, headersMs, 'silent connection');
        const headers = `GET /projects HTTP/1.1\r\nHost: ${host}\r\n${credentials()}X-Padding: ${'a'.repeat(200)}\r\n\r\n`;
        const slowloris = await watch(slack * headersMs, (s) => trickle(s, headers, 100));
        assertCut(slowloris, headersMs, 'slowloris');
        // The API still answers.
        assert.equal((await m.apiFetch('/healthz')).status, 200);
        return {
          tries: 2,
          outcome: `silent connection closed after ${silent.closedAfterMs} ms, slowloris after ${slowloris.closedAfterMs} ms (headers timeout ${headersMs} ms)`,
        };
      },
      file,
    );
  });

  it('a body announced (Content-Length 1 MB) and never sent is cut within the body idle timeout', async () => {
    await scenario(
      group,
      'stalled body: POST with Content-Length 1 MB, headers only',
      async () => {
        const outcomes: string[] = [];
        for (const [path, auth] of [
          ['/vendors', true],
          ['/webhooks/inbound/00000000-0000-4000-8000-000000000000', false],
          ['/link/token/create', false],
        ] as const) {
          const head = `POST ${path} HTTP/1.1\r\nHost: ${host}\r\n${auth ? credentials() : ''}Content-Type: application/json\r\nContent-Length: ${1024 * 1024}\r\n\r\n{"name":`;
          const o = await watch(slack * bodyIdleMs, (s) => s.write(head));
          assertCut(o, bodyIdleMs, `POST ${path}`);
          outcomes.push(`${path.split('/').slice(0, 3).join('/')}: ${o.answer.slice(0, 12) || 'closed'} after ${o.closedAfterMs} ms`);
        }
        // A streamed pass-through upload that stops after its first 64 KiB, while the API reads it.
        const upload =
          `POST /passthrough-upload HTTP/1.1\r\nHost: ${host}\r\n${credentials()}Content-Type: application/octet-stream\r\n` +
          `Passthrough-Method: PUT\r\nPassthrough-Path: /rest/v1.0/files/1\r\nContent-Length: ${1024 * 1024}\r\n\r\n`;
        const stalled = await watch(slack * bodyIdleMs, (s) => s.write(Buffer.concat([Buffer.from(upload), randomBytes(64 * 1024)])));
        assertCut(stalled, bodyIdleMs, 'POST /passthrough-upload');
        outcomes.push(`/passthrough-upload after 64 KiB: ${stalled.answer.slice(0, 12) || 'closed'} after ${stalled.closedAfterMs} ms`);
        assert.equal((await m.apiFetch('/healthz')).status, 200);
        return { tries: outcomes.length, outcome: `cut within the ${bodyIdleMs} ms idle timeout: ${outcomes.join('; ')}` };
      },
      file,
    );
  });

  it('a body dripped under the idle timeout is cut at the request timeout; a moving pass-through upload is not', async () => {
    await scenario(
      group,
      'slow drip: a byte of a buffered body every 300 ms',
      async () => {
        const head = `POST /vendors HTTP/1.1\r\nHost: ${host}\r\n${credentials()}Content-Type: application/json\r\nContent-Length: 4096\r\n\r\n`;
        const drip = await watch(slack * requestMs, (s) => {
          s.write(head);
          trickle(s, `{"name":"${'x'.repeat(4000)}`, 300);
        });
        assertCut(drip, requestMs, 'dripped body');

        // A streamed upload: 1 MiB in 64 KiB chunks every 250 ms (about 4 s, longer than the request timeout).
        const chunks = Array.from({ length: 16 }, () => randomBytes(64 * 1024));
        const sha256 = createHash('sha256').update(Buffer.concat(chunks)).digest('hex');
        const started = Date.now();
        const upload = await sendUpload(16 * 64 * 1024, async (req) => {
          for (const c of chunks) {
            req.write(c);
            await sleep(250);
          }
          req.end();
        });
        const tookMs = Date.now() - started;
        assert.equal(upload.status, 200, `the moving upload was answered ${upload.status}: ${upload.body.slice(0, 200)}`);
        const got = JSON.parse(upload.body) as { body: { size: number; sha256: string } };
        assert.deepEqual({ size: got.body.size, sha256: got.body.sha256 }, { size: 16 * 64 * 1024, sha256 }, 'the upstream received every byte');
        assert.ok(tookMs > requestMs, `the upload took ${tookMs} ms, longer than the request timeout`);
        return {
          tries: 2,
          outcome: `dripped body cut after ${drip.closedAfterMs} ms (request timeout ${requestMs} ms); a 1 MiB upload moving for ${tookMs} ms answered 200 with every byte`,
        };
      },
      file,
    );
  });

  it('a pass-through upload waiting for its turn in the budget longer than the idle timeout is not cut', async () => {
    await scenario(
      group,
      'upload held by the budget: the account out of requests for 3 s',
      async () => {
        // The upstream answers one request 429 with nothing left for 3 s: the mirror holds the next
        // one until then. The upload below is sent at once; its bytes wait in the socket's buffers
        // while the API waits for the budget, which is the API's pause, not the caller's.
        await m.fault({ match: { path: '/passthrough', method: 'POST' }, kind: 'rate-limit', retry_after: 3, times: 1 });
        const refused = await m.apiFetch('/passthrough', {
          method: 'POST',
          headers: { 'account-token': a.accountToken, 'content-type': 'application/json' },
          body: JSON.stringify({ method: 'GET', path: '/rest/v1.0/projects' }),
        });
        assert.equal(refused.status, 429, `the faulted request was answered ${refused.status}`);
        const body = randomBytes(256 * 1024);
        const started = Date.now();
        const upload = await sendUpload(body.length, (req) => req.end(body));
        const tookMs = Date.now() - started;
        assert.equal(upload.status, 200, `the held upload was answered ${upload.status} after ${tookMs} ms: ${upload.body.slice(0, 200)}`);
        const got = JSON.parse(upload.body) as { body: { size: number; sha256: string } };
        assert.deepEqual(
          { size: got.body.size, sha256: got.body.sha256 },
          { size: body.length, sha256: createHash('sha256').update(body).digest('hex') },
          'the upstream received every byte',
        );
        assert.ok(tookMs > bodyIdleMs, `the upload was held ${tookMs} ms, longer than the idle timeout (${bodyIdleMs} ms)`);
        return { tries: 2, outcome: `held ${tookMs} ms by the budget (idle timeout ${bodyIdleMs} ms), then answered 200 with every byte` };
      },
      file,
    );
  });

  it('an idle kept-alive connection is closed within the keep-alive timeout', async () => {
    await scenario(
      group,
      'idle kept-alive connection after one request',
      async () => {
        const request = `GET /healthz HTTP/1.1\r\nHost: ${host}\r\nConnection: keep-alive\r\n\r\n`;
        const o = await watch(slack * keepAliveMs + 1000, (s) => s.write(request));
        assert.ok(o.answer.startsWith('HTTP/1.1 200'), `the request was answered: ${JSON.stringify(o.answer.slice(0, 80))}`);
        assert.ok(
          o.closedAfterMs !== undefined,
          `the kept-alive connection was still open ${slack * keepAliveMs + 1000} ms later (keep-alive timeout ${keepAliveMs} ms)`,
        );
        return { tries: 1, outcome: `closed ${o.closedAfterMs} ms after the request (keep-alive timeout ${keepAliveMs} ms)` };
      },
      file,
    );
  });
});
