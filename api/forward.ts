// Forwarding to the upstream what the mirror cannot answer itself (link calls, pass-through, writes):
// the caller's contract headers are kept, the mirror's client credentials are swapped for the
// upstream's, and bodies stream both ways without being buffered whole.
import type { IncomingHttpHeaders } from 'node:http';
import { Readable } from 'node:stream';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { request as undiciRequest, type Dispatcher } from 'undici';
import { UpstreamError } from '../lib/errors.ts';

export interface UpstreamTarget {
  baseUrl: string;
  clientId: string;
  clientSecret: string;
  apiVersion: string;
  headerPrefix: string;
  dispatcher?: Dispatcher;
  timeoutMs?: number;
}

/** Request headers passed through as they came (the contract's, plus content negotiation). */
const passRequest = new Set([
  'account-token', 'project-id', 'company-id', 'include-source-data', 'include-source-data-path', 'exclude-source-data',
  'async-request', 'ignore-prohibited-fields', 'passthrough-method', 'passthrough-path', 'content-type', 'content-length',
  'accept', 'range', 'if-none-match', 'session',
]);

/** Response headers relayed back (the upstream's own `{Prefix}-*` headers are relayed by prefix). */
const passResponse = new Set(['content-type', 'content-length', 'content-disposition', 'etag', 'accept-ranges', 'content-range', 'last-modified', 'cache-control']);

export function forwardHeaders(incoming: IncomingHttpHeaders, target: UpstreamTarget): Record<string, string> {
  const out: Record<string, string> = {
    'api-version': target.apiVersion,
    'client-id': target.clientId,
    'client-secret': target.clientSecret,
  };
  for (const [name, value] of Object.entries(incoming)) {
    const lower = name.toLowerCase();
    if (value === undefined) continue;
    if (passRequest.has(lower) || lower.endsWith('-expand')) out[lower] = Array.isArray(value) ? value.join(', ') : value;
  }
  return out;
}

export interface ForwardOptions {
  method?: string;
  path?: string;
  /** A JSON body to send instead of the request's own stream. */
  json?: unknown;
  /**
   * Reads the upstream's answer whole (up to `maxBytes`) and hands it to this callback before it is
   * relayed, so the mirror can apply what a write returned. Only for answers known to be small (a
   * write's object), never for pass-through.
   */
  capture?: { maxBytes: number; onAnswer(status: number, body: Buffer): Promise<void> };
}

/** A captured answer's JSON, or undefined when it is not JSON. */
export function jsonOf(body: Buffer): unknown {
  try {
    return JSON.parse(body.toString('utf8')) as unknown;
  } catch {
    return undefined;
  }
}

/** Forwards one request and streams the upstream's answer back as it is. */
export async function forward(request: FastifyRequest, reply: FastifyReply, target: UpstreamTarget, options: ForwardOptions = {}): Promise<FastifyReply> {
  const method = (options.method ?? request.method);
  const path = options.path ?? request.url;
  const headers = forwardHeaders(request.headers, target);
  let body: Dispatcher.DispatchOptions['body'];
  if (options.json !== undefined) {
    body = JSON.stringify(options.json);
    headers['content-type'] = 'application/json';
    delete headers['content-length'];
  } else if (method !== 'GET' && method !== 'HEAD') {
    const raw = request.body;
    if (raw instanceof Readable) body = raw;
    else if (Buffer.isBuffer(raw)) body = raw;
    else if (typeof raw === 'string') {
      // A parsed text body is re-encoded (bytes that were not UTF-8 change length): let undici count it.
      body = raw;
      delete headers['content-length'];
    }
    else if (raw !== undefined && raw !== null) {
      body = JSON.stringify(raw);
      delete headers['content-length'];
    }
  }
  let res: Dispatcher.ResponseData;
  try {
    res = await undiciRequest(`${target.baseUrl.replace(/\/+$/, '')}${path}`, {
      method,
      headers,
      body,
      dispatcher: target.dispatcher,
      headersTimeout: target.timeoutMs ?? 60_000,
      bodyTimeout: target.timeoutMs ?? 60_000,
    });
  } catch (error) {
    throw new UpstreamError(`The upstream could not be reached (${(error as Error).message}).`, undefined, { cause: error });
  }
  const prefix = `${target.headerPrefix.toLowerCase()}-`;
  for (const [name, value] of Object.entries(res.headers)) {
    if (value === undefined) continue;
    if (passResponse.has(name) || (name.startsWith(prefix) && name !== `${prefix}debug-id`) || name.includes('-ratelimit-')) void reply.header(name, value);
  }
  if (!options.capture) return reply.status(res.statusCode).send(res.body);
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of res.body) {
    const b = chunk as Buffer;
    size += b.length;
    if (size > options.capture.maxBytes) {
      res.body.destroy();
      throw new UpstreamError(`The upstream's answer to ${method} ${path.split('?')[0]} exceeds ${options.capture.maxBytes} bytes.`);
    }
    chunks.push(b);
  }
  const answer = Buffer.concat(chunks);
  await options.capture.onAnswer(res.statusCode, answer);
  return reply.status(res.statusCode).send(answer);
}
