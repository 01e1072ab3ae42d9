// Forwarding to the upstream what the mirror cannot answer itself (link calls, pass-through, writes):
// the caller's contract headers are kept, the caller's credential is swapped for the one the upstream
// takes for it, and bodies stream both ways without being buffered whole. The upstream URL is built
// only from the path the forwarder's path rule (lib/upstream-surface.ts) rebuilt from the request's
// validated segments, for what the caller's credential may reach; never from the raw request URL.
// This file is the HTTP-facing half (reading the Fastify request, relaying the answer); the sending is
// the upstream client's stream mode (connectors/upstream-client.ts), through the governor.
import type { IncomingHttpHeaders } from 'node:http';
import { Readable } from 'node:stream';
import type { FastifyReply, FastifyRequest } from 'fastify';
import type { AccountCredentials } from '../connectors/credentials.ts';
import { GovernorWaitTooLongError } from '../connectors/governor.ts';
import { upstreamUrl, type UpstreamClient, type UpstreamStream, type UpstreamStreamCall } from '../connectors/upstream-client.ts';
import { BadRequestError, ForbiddenError, MirrorError, NotFoundError } from '../lib/errors.ts';
import type { Logger } from '../lib/logger.ts';
import { parseTarget, upstreamPath, type UpstreamCredential, type UpstreamPathRefusal } from '../lib/upstream-surface.ts';
import type { AccountStore } from '../mirror/control/accounts.ts';
import { findLinkSession } from '../mirror/control/link-sessions.ts';
import type { PrismaClient } from '../mirror/db/prisma.ts';
import { internalHeader } from './auth.ts';
import { sessionSecretHash } from './sessions.ts';

// The URL rule lives with the client that sends; re-exported for the forwarder's callers and tests.
export { upstreamUrl };

export interface UpstreamTarget {
  baseUrl: string;
  clientId: string;
  clientSecret: string;
  apiVersion: string;
  headerPrefix: string;
  /**
   * The one upstream client, whose stream mode sends what is forwarded (its governor, deadline and
   * error mapping). Without it nothing is forwarded.
   */
  client?: UpstreamClient;
  /**
   * What a forward needs beyond the request's own headers (see forwardCredentials): without it, a
   * request the worker runs as its account and a link session's request are refused, never sent
   * with another credential.
   */
  credentials?: ForwardCredentials;
}

interface ForwardCredentials {
  /** The account's stored upstream token (a request the worker runs as the account carries none). */
  accountToken(accountId: string): Promise<string>;
  /** The scopes of the link session with this secret, if it is one of this account's. */
  sessionScopes(accountId: string, secret: string): Promise<readonly string[] | undefined>;
  /**
   * The upstream answered a forward sent with the caller's account token 401: the mirror checks once
   * whether the upstream refuses that token itself and, if so, refuses it too from then on.
   */
  refused?(accountId: string, accountToken: string): void;
}

/** The credential sources of an API: the account store, and the link sessions the mirror recorded. */
export function forwardCredentials(deps: {
  accounts: AccountStore;
  prisma: PrismaClient;
  sessionKey?: Buffer | undefined;
  check?: AccountCredentials | undefined;
  logger?: Logger | undefined;
}): ForwardCredentials {
  return {
    accountToken: (accountId) => deps.accounts.token(accountId),
    ...(deps.check
      ? {
          refused(accountId: string, accountToken: string) {
            deps.check!.confirm(accountId, accountToken).catch((error: unknown) => {
              deps.logger?.warn({ account: accountId, err: error }, 'could not check whether the upstream still takes an account token');
            });
          },
        }
      : {}),
    async sessionScopes(accountId, secret) {
      if (!deps.sessionKey) return undefined;
      const row = await findLinkSession(deps.prisma, sessionSecretHash(deps.sessionKey, secret));
      return row && row.accountId === accountId ? row.scopes : undefined;
    },
  };
}

/**
 * The credential sent upstream, by how the caller authenticated:
 * - `client`: the upstream client credentials alone (the link-token calls);
 * - `account`: the client credentials and an account token: the one the caller sent, or, for a
 *   request the worker runs as its account (the internal credential), the account's stored token;
 * - `session`: the link session alone, as the upstream takes it from a front end: never the
 *   operator's client secret (with it, the upstream's admin API answers whatever the session's
 *   path names) nor the account token (which would widen a scoped, expiring credential to the whole
 *   account, and hide from the upstream that the session ended).
 */
type UpstreamAuth = { kind: 'client' } | { kind: 'account'; accountToken: string } | { kind: 'session'; session: string };

/**
 * Request headers never sent upstream from the caller's request: credentials (the upstream gets the
 * one the forwarder chooses, see UpstreamAuth), the mirror's own internal credential, hop-by-hop and
 * transport headers of the caller's connection to the mirror (RFC 9110 7.6.1), and what describes
 * that connection (Host, Forwarded, X-Forwarded-*): the upstream is a different hop. Every other
 * header is passed on as it came, known or not: the mirror never drops what it does not understand
 * (`Return-Source-Id`, a source system's `*-Expand`, headers the contract adds later).
 */
const neverPassed = new Set([
  'account-token',
  'session',
  'client-id',
  'client-secret',
  'authorization',
  'proxy-authorization',
  'cookie',
  internalHeader,
  'host',
  'connection',
  'keep-alive',
  'proxy-connection',
  'te',
  'trailer',
  'transfer-encoding',
  'upgrade',
  'expect',
  'http2-settings',
  'forwarded',
  'x-real-ip',
  'via',
  // The answer is relayed as the bytes came; a compressed one would need its Content-Encoding kept
  // consistent through every relay path, so the mirror asks for identity.
  'accept-encoding',
]);
const neverPassedPrefixes = ['x-forwarded-', 'x-mirror-', 'proxy-'];

/** Whether a request header is passed upstream (not a credential, not hop-by-hop, not the mirror's). */
export function passedUpstream(name: string, connectionTokens: ReadonlySet<string> = new Set()): boolean {
  const lower = name.toLowerCase();
  return !neverPassed.has(lower) && !neverPassedPrefixes.some((p) => lower.startsWith(p)) && !connectionTokens.has(lower) && !lower.startsWith(':');
}

/**
 * Response headers never relayed: hop-by-hop ones, cookies (they would be set for the mirror's
 * origin) and Alt-Svc (it names the upstream's endpoints to the caller). The upstream's debug id is
 * replaced by the mirror's own.
 */
const neverRelayed = new Set([
  'connection',
  'keep-alive',
  'proxy-connection',
  'te',
  'trailer',
  'transfer-encoding',
  'upgrade',
  'set-cookie',
  'alt-svc',
  'strict-transport-security',
]);

/** Header names listed in a Connection header: hop-by-hop for this connection only. */
function connectionTokensOf(value: string | string[] | undefined): Set<string> {
  return new Set(
    [value ?? []]
      .flat()
      .flatMap((v) => v.split(','))
      .map((t) => t.trim().toLowerCase())
      .filter(Boolean),
  );
}

/**
 * The headers of a forwarded request, in the order they are sent: the API version and the credential
 * the forwarder chose first, then the caller's own headers as they came. An HTTP server reads a
 * bounded number of headers (Node's reads the first thousand and ignores the rest), so a request
 * with many headers must not push the credential past that bound. A Map keeps that order for every
 * name (an object would put names that look like integers first).
 */
export function forwardHeaders(incoming: IncomingHttpHeaders, target: UpstreamTarget, auth: UpstreamAuth): Map<string, string> {
  const out = new Map<string, string>([['api-version', target.apiVersion]]);
  if (auth.kind === 'session') {
    out.set('session', auth.session);
  } else {
    out.set('client-id', target.clientId);
    out.set('client-secret', target.clientSecret);
    if (auth.kind === 'account') out.set('account-token', auth.accountToken);
  }
  const hopByHop = connectionTokensOf(incoming.connection);
  for (const [name, value] of Object.entries(incoming)) {
    const lower = name.toLowerCase();
    if (value === undefined || lower === 'api-version' || !passedUpstream(lower, hopByHop)) continue;
    out.set(lower, Array.isArray(value) ? value.join(', ') : value);
  }
  return out;
}

interface ForwardOptions {
  /**
   * The account the request authenticated as (what `auth.account` answered); absent only for a call
   * authenticated by client credentials alone, which then reaches only the link-token calls. Its
   * source system names the budget the call spends beside the account's.
   */
  account?: { id: string; sourceSystem?: string };
  method?: string;
  /** The target to forward instead of the request's own (it passes the same path rule). */
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

function first(request: FastifyRequest, name: string): string | undefined {
  const v = request.headers[name];
  return Array.isArray(v) ? v[0] : v;
}

/**
 * The body Fastify left unread: it parses none on a GET (and a route may take none on a DELETE), but
 * the real service's clients send list filters as a JSON body on a GET, so it is forwarded as it came.
 * A route that reads such a body itself sets `request.body` to what it read.
 */
function unparsedBody(request: FastifyRequest): Readable | undefined {
  const h = request.headers;
  const announced = (h['content-length'] !== undefined && h['content-length'] !== '0') || h['transfer-encoding'] !== undefined;
  return announced && !request.raw.readableEnded ? request.raw : undefined;
}

/** The refusal of the path rule as the error the API answers. */
function refusal(r: UpstreamPathRefusal): MirrorError {
  if (r.status === 403) return new ForbiddenError(r.reason);
  if (r.status === 404) return new NotFoundError(r.reason);
  return new BadRequestError(r.reason);
}

/**
 * Refuses a request target no forward would send (dot segments, backslashes, encoded separators,
 * double encoding, control characters, overlong or absolute targets), before a route does anything
 * else for it: a Fastify hook of the routes that forward.
 */
export function refuseHostileTarget(request: FastifyRequest, _reply: FastifyReply, done: (error?: Error) => void): void {
  const r = parseTarget(request.url);
  done(r.ok ? undefined : refusal(r));
}

/**
 * How the caller authenticated, read once `auth` has accepted the request: the internal credential
 * is checked first there (a bad one is refused), and a Session is taken only alone.
 */
async function callerOf(
  request: FastifyRequest,
  target: UpstreamTarget,
  account: { id: string } | undefined,
): Promise<{ credential: UpstreamCredential; auth: () => Promise<UpstreamAuth> }> {
  if (!account) return { credential: { kind: 'client' }, auth: async () => ({ kind: 'client' }) };
  const storedToken = async (): Promise<UpstreamAuth> => {
    if (!target.credentials) throw new MirrorError('The forwarder has no account token source: a request run as its account cannot be forwarded.');
    return { kind: 'account', accountToken: await target.credentials.accountToken(account.id) };
  };
  if (first(request, internalHeader) !== undefined) return { credential: { kind: 'account' }, auth: storedToken };
  const token = first(request, 'account-token');
  const session = first(request, 'session');
  if (token === undefined && session !== undefined) {
    const scopes = (await target.credentials?.sessionScopes(account.id, session)) ?? [];
    return { credential: { kind: 'session', scopes }, auth: async () => ({ kind: 'session', session }) };
  }
  if (token === undefined) return { credential: { kind: 'account' }, auth: storedToken };
  return { credential: { kind: 'account' }, auth: async () => ({ kind: 'account', accountToken: token }) };
}

async function checked(
  request: FastifyRequest,
  target: UpstreamTarget,
  options: ForwardOptions,
): Promise<{ caller: Awaited<ReturnType<typeof callerOf>>; path: string }> {
  const caller = await callerOf(request, target, options.account);
  const rule = upstreamPath({ method: (options.method ?? request.method).toUpperCase(), rawUrl: options.path ?? request.url, credential: caller.credential });
  if (!rule.ok) throw refusal(rule);
  return { caller, path: rule.path };
}

/**
 * What a forward of this request would send: the path the path rule rebuilt and the credential
 * chosen for the caller (a refusal is the caller's 4xx, before any upstream contact). A read the
 * mirror asks of the upstream in its own words sends the same path with the same credential.
 */
export async function forwardPlan(
  request: FastifyRequest,
  target: UpstreamTarget,
  options: Pick<ForwardOptions, 'account' | 'method' | 'path'> = {},
): Promise<{ path: string; auth: UpstreamAuth }> {
  const { caller, path } = await checked(request, target, options);
  return { path, auth: await caller.auth() };
}

/** Throws the 4xx forward() would answer for this request, so a route can refuse it before doing anything for it. */
export async function assertForwardable(
  request: FastifyRequest,
  target: UpstreamTarget,
  options: Pick<ForwardOptions, 'account' | 'method' | 'path'> = {},
): Promise<void> {
  await checked(request, target, options);
}

/**
 * Forwards one request and streams the upstream's answer back as it is. The request's path must pass
 * the path rule for its credential; a refusal is the caller's 4xx, before any upstream contact.
 */
export async function forward(request: FastifyRequest, reply: FastifyReply, target: UpstreamTarget, options: ForwardOptions = {}): Promise<FastifyReply> {
  const method = (options.method ?? request.method).toUpperCase();
  const { caller, path } = await checked(request, target, options);
  upstreamUrl(target.baseUrl, path);
  if (!target.client) throw new MirrorError('The forwarder has no upstream client: nothing can be forwarded.');
  const headers = forwardHeaders(request.headers, target, await caller.auth());
  let body: UpstreamStreamCall['body'];
  if (options.json !== undefined) {
    body = JSON.stringify(options.json);
    headers.set('content-type', 'application/json');
    headers.delete('content-length');
  } else if (method !== 'HEAD') {
    const raw = request.body ?? unparsedBody(request);
    if (raw instanceof Readable) body = raw;
    else if (Buffer.isBuffer(raw)) body = raw;
    else if (typeof raw === 'string') {
      // A parsed text body is re-encoded (bytes that were not UTF-8 change length): let undici count it.
      body = raw;
      headers.delete('content-length');
    } else if (raw !== undefined && raw !== null) {
      body = JSON.stringify(raw);
      headers.delete('content-length');
    }
  }
  const account = options.account;
  let res: UpstreamStream;
  try {
    res = await target.client.stream({
      method,
      path,
      headers,
      ...(body !== undefined ? { body } : {}),
      ...(account ? { budget: { account: account.id, ...(account.sourceSystem ? { sourceSystem: account.sourceSystem } : {}) } } : {}),
      priority: 'interactive',
    });
  } catch (error) {
    // Refused by the governor (the account's window is spent for longer than a call is held): the
    // caller gets the 429 the upstream would have given, with its rate-limit headers as known.
    if (error instanceof GovernorWaitTooLongError) {
      if (body instanceof Readable) body.resume();
      for (const w of error.windows) {
        const name = w.name === 'service' ? target.headerPrefix : w.name;
        if (w.total !== undefined) void reply.header(`${name}-RateLimit-Total`, String(w.total));
        if (w.remaining !== undefined) void reply.header(`${name}-RateLimit-Remaining`, String(Math.max(0, w.remaining)));
        if (w.resetsAt !== undefined) void reply.header(`${name}-RateLimit-ResetsAtTimestamp`, String(Math.ceil(w.resetsAt / 1000)));
      }
    }
    throw error;
  }
  const debugId = `${target.headerPrefix.toLowerCase()}-debug-id`;
  const hopByHop = connectionTokensOf(res.headers.connection);
  for (const [name, value] of Object.entries(res.headers)) {
    if (value === undefined || neverRelayed.has(name) || hopByHop.has(name) || name === debugId) continue;
    // The mirror's own warning (why the answer came from the upstream) goes beside the upstream's.
    const mine = name === `${target.headerPrefix.toLowerCase()}-warnings` ? reply.getHeader(name) : undefined;
    void reply.header(name, mine === undefined ? value : [mine, value].flat().map(String));
  }
  const sent = headers.get('account-token');
  if (res.status === 401 && account && typeof sent === 'string') target.credentials?.refused?.(account.id, sent);
  if (!options.capture) return reply.status(res.status).send(res.body);
  const answer = await res.readAll(options.capture.maxBytes);
  await options.capture.onAnswer(res.status, answer);
  return reply.status(res.status).send(answer);
}
