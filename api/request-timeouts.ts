// How long the API waits for what a caller sends: the headers, a body that stops moving, a body it
// buffers whole, and an idle kept-alive connection. Without these a caller could open connections
// that send headers and then nothing, each holding a socket and a body buffer of up to 10 MB.
import type { IncomingMessage, ServerOptions } from 'node:http';
import { Socket } from 'node:net';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';

export interface ApiTimeouts {
  /** The request line and headers, complete, from the connection's first byte (or a kept-alive one's next request). */
  headersMs: number;
  /** A body the API reads whole (JSON writes, webhook deliveries; up to 10 MB), complete, from the request's start. */
  requestMs: number;
  /** Any body, including streamed pass-through uploads: the longest pause between two chunks. */
  bodyIdleMs: number;
  /** A kept-alive connection with no request in progress. */
  keepAliveMs: number;
}

/** The defaults of lib/config.ts (API_*_TIMEOUT_MS), for apps built without a configuration (tests). */
export const defaultApiTimeouts: ApiTimeouts = { headersMs: 10_000, requestMs: 30_000, bodyIdleMs: 10_000, keepAliveMs: 5_000 };

/**
 * The server's own timeouts. Node's `requestTimeout` is left off on purpose: it counts the receipt
 * of the whole request, body included, so any value would cut a large pass-through upload that is
 * still moving. `connectionTimeout` (an idle timer over the whole connection) is off too: a response
 * may rightly wait on the upstream (UPSTREAM_TIMEOUT_MS) or on a slow storage download. Stalled and
 * too-slow bodies are cut by the hooks of {@link registerBodyTimeouts} instead. Node checks the
 * headers timeout on a timer (every 30 s by default); checking every second (or sooner for a short
 * timeout) keeps the cut close to the configured value at the cost of a walk over active connections.
 */
export function serverTimeoutOptions(t: ApiTimeouts): { requestTimeout: number; connectionTimeout: number; keepAliveTimeout: number; http: ServerOptions } {
  return {
    requestTimeout: 0,
    connectionTimeout: 0,
    keepAliveTimeout: t.keepAliveMs,
    http: { headersTimeout: t.headersMs, connectionsCheckingInterval: Math.max(50, Math.min(1000, Math.floor(t.headersMs / 4))) },
  };
}

function expectsBody(raw: IncomingMessage): boolean {
  const length = raw.headers['content-length'];
  return raw.headers['transfer-encoding'] !== undefined || (length !== undefined && length !== '0');
}

/**
 * A request whose body stalls for `bodyIdleMs`, or whose buffered body is not complete within
 * `requestMs`, is answered 408 and its connection closed. A body that is still moving is never cut
 * by the first; a streamed body (a route whose handler starts before the body has arrived: the
 * pass-through uploads) is exempt from the second, so an upload of any size succeeds as long as its
 * bytes keep coming.
 */
export function registerBodyTimeouts(app: FastifyInstance, t: ApiTimeouts, debugIdHeader: string): void {
  const deadlines = new WeakMap<IncomingMessage, NodeJS.Timeout>();

  function abandon(request: FastifyRequest, reply: FastifyReply, message: string): void {
    const socket = request.raw.socket;
    request.log.info({ url: request.url.split('?')[0] }, message);
    // What Node does for its own request timeout: a 408 if nothing was answered yet, then the socket
    // closes (the rest of a stalled body will not come, and nothing else can be read after it).
    if (!reply.raw.headersSent && socket.writable) {
      const body = JSON.stringify({ message, code: 'request_timeout', details: [] });
      socket.write(
        `HTTP/1.1 408 Request Timeout\r\nContent-Type: application/json; charset=utf-8\r\nContent-Length: ${Buffer.byteLength(body)}\r\n` +
          `${debugIdHeader}: ${request.id}\r\nConnection: close\r\n\r\n${body}`,
      );
    }
    socket.destroy();
  }

  app.addHook('onRequest', (request, reply, done) => {
    const raw = request.raw;
    const socket = raw.socket;
    // An injected request (inject(): tests, the worker's async requests) has no connection to protect.
    if (raw.complete || !expectsBody(raw) || !(socket instanceof Socket)) return done();
    const onIdle = () => {
      // A pause the API made is not the caller's: a handler that has not begun to read the body yet
      // (a pass-through upload waiting for its turn in the account's budget) or has paused it (the
      // upstream reads slower than the caller sends) leaves the bytes in the socket's buffers, and
      // the socket idle. The timer starts again; it cuts only a body the API is waiting for.
      if (raw.readableFlowing === null || raw.isPaused() || raw.readableLength >= raw.readableHighWaterMark) {
        socket.setTimeout(t.bodyIdleMs);
        return;
      }
      abandon(request, reply, `The request body stopped arriving for ${t.bodyIdleMs} ms; send it without pauses.`);
    };
    // Node emits the socket's idle timeout on the request while its body is incomplete (and then
    // leaves the socket to the listener).
    raw.on('timeout', onIdle);
    socket.setTimeout(t.bodyIdleMs);
    const deadline = setTimeout(
      () => abandon(request, reply, `The request body did not arrive within ${t.requestMs} ms; send it faster or in smaller requests.`),
      t.requestMs,
    );
    deadline.unref();
    deadlines.set(raw, deadline);
    const disarm = () => {
      clearTimeout(deadline);
      raw.off('timeout', onIdle);
      // Back to the server's own idle timeout (none: see serverTimeoutOptions); a kept-alive
      // connection gets Node's keep-alive timeout once the response is sent.
      if (!socket.destroyed) socket.setTimeout(app.server.timeout);
    };
    raw.once('end', disarm);
    raw.once('close', disarm);
    done();
  });

  // A handler that starts before its body has arrived streams it (pass-through uploads): only the
  // idle timeout applies to it from here on.
  app.addHook('preHandler', (request, _reply, done) => {
    if (!request.raw.complete) {
      const deadline = deadlines.get(request.raw);
      if (deadline) clearTimeout(deadline);
    }
    done();
  });
}
