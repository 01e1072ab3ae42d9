// The HTTP client for the upstream contract: its headers, timeouts, connection reuse, the retry
// policy, rate-limit reporting to the governor, and error mapping. Every call the mirror makes to the
// upstream goes through it: `request` for the mirror's own calls (parsed, validated), `stream` for what
// the mirror forwards (bodies streamed both ways, the answer relayed as it came). It takes no more of
// an answer than it can use: a body over the cap (as received, or once inflated) is not read further,
// and every attempt has a deadline.
import { createHash } from 'node:crypto';
import type { Readable } from 'node:stream';
import { setTimeout as sleep } from 'node:timers/promises';
import { gunzipSync, inflateSync } from 'node:zlib';
import { Agent, request as undiciRequest, type Dispatcher } from 'undici';
import { z } from 'zod';
import { MalformedResponseError, MirrorError, UpstreamError } from '../lib/errors.ts';
import type { Logger } from '../lib/logger.ts';
import { unlimitedGovernor, type ClassUsage, type Governor, type GovernorKeys, type Priority } from './governor.ts';
import { readRateLimits, resetAtOf, type RateLimitReport } from './rate-limit-headers.ts';
import { errorForResponse } from './response-errors.ts';
import { retryDecision, type RetryDecision } from './retry-policy.ts';

interface UpstreamClientOptions {
  baseUrl: string;
  clientId: string;
  clientSecret: string;
  apiVersion?: string;
  /** Brand prefix of the upstream's headers; `Svc` in the contract. */
  headerPrefix?: string;
  /** Idle timeouts of an attempt: waiting for the answer's headers, and between two chunks of its body. */
  timeoutMs?: number;
  /**
   * Deadline of an attempt, headers and body together (the idle timeouts never end a body that
   * trickles in a byte at a time). Default 120 s.
   */
  totalTimeoutMs?: number;
  /** Most bytes of a body taken in, as received and once inflated (gzip, deflate). Default 64 MB. */
  maxBodyBytes?: number;
  dispatcher?: Dispatcher;
  governor?: Governor;
  logger?: Logger;
  maxAttempts?: number;
  /** Told about every attempt's outcome (metrics); see `observe` to add one later. */
  onResponse?: UpstreamObserver;
}

/** One attempt of an upstream call, as metrics see it. */
interface UpstreamObservation {
  method: UpstreamCall['method'];
  /** Path without its query string. */
  path: string;
  sourceSystem: string | undefined;
  /** The upstream's HTTP status; undefined when no answer came (timeout, reset, refused). */
  status: number | undefined;
  durationMs: number;
  attempt: number;
  /** The request's class in the governor (see {@link Priority}). */
  priority: Priority;
}

type UpstreamObserver = (observation: UpstreamObservation) => void;

export interface UpstreamCall {
  method: 'GET' | 'POST' | 'PUT' | 'PATCH' | 'DELETE';
  /** Path relative to the base URL, with its query string. */
  path: string;
  accountToken?: string;
  projectId?: string;
  companyId?: string;
  /** Extra request headers (e.g. Include-Source-Data). */
  headers?: Record<string, string>;
  body?: unknown;
  /** Governor keys beyond the client: which account and source system this spends. */
  budget?: Omit<GovernorKeys, 'client' | 'priority'>;
  /** Who waits for the answer (see {@link Priority}); the mirror's own calls are background unless said. */
  priority?: Priority;
  /** What the call is about, for error messages ("projects page 3"). */
  what?: string;
  signal?: AbortSignal;
  /**
   * Async requests: `send` asks for one (`Async-Request: true`) and `accept` takes one the upstream
   * chose to make; both hand back a 202 with its handle instead of a body. `poll` reads
   * `/async-requests/{id}`: a pending request, an expired one (410) or a stored answer (whatever its
   * status) comes back as an {@link AsyncAnswer} instead of being thrown.
   */
  async?: 'send' | 'accept' | 'poll';
  /**
   * Digest the body (SHA-256 of the bytes as sent, after any content encoding is undone) into the
   * answer's `digest`. When a successful body's digest equals `unless`, the body is neither parsed
   * nor validated: an {@link UnchangedAnswer} comes back instead (a page the mirror already holds).
   */
  digest?: { unless?: string };
  /**
   * A successful, complete body (2xx, not an async answer) comes back as its bytes (a Buffer, after
   * any content encoding is undone), neither parsed nor validated: the caller reads it. Any other
   * answer is parsed and mapped as usual.
   */
  bytes?: boolean;
}

/** A successful answer whose body digest matched the one the caller already holds; not parsed. */
interface UnchangedAnswer {
  status: number;
  unchanged: true;
  digest: string;
  headers: Record<string, string | string[] | undefined>;
  rateLimits: RateLimitReport;
  retrievedAt: Date;
}

type AsyncRequestState = 'pending' | 'running' | 'executed' | 'failure';

/** What the upstream's `-Async-Request-*` headers say of one async request. */
export interface AsyncRequestHandle {
  id: string;
  state: AsyncRequestState;
  /** Epoch ms after which its results are gone; null when the upstream did not say. */
  expiresAt: number | null;
}

/** An answer about an async request rather than the resource asked for; `body` is not validated. */
interface AsyncAnswer {
  status: number;
  handle: AsyncRequestHandle;
  body: unknown;
  headers: Record<string, string | string[] | undefined>;
  rateLimits: RateLimitReport;
  retrievedAt: Date;
}

export interface UpstreamResponse<T = unknown> {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  body: T;
  rateLimits: RateLimitReport;
  /** When the upstream fetched the data from the source system (its Data-Retrieved-At), else now. */
  retrievedAt: Date;
  /** SHA-256 of the body as received, when the call asked for it (`digest`). */
  digest?: string;
  unchanged?: undefined;
}

/**
 * A call forwarded as it came (see `UpstreamClient.stream`): the headers are sent as given (the
 * forwarder chose the credential), the body streams, and the answer comes back unread.
 */
export interface UpstreamStreamCall {
  method: string;
  /**
   * Path relative to the base URL, with its query string (the forwarder's path rule rebuilt it); the
   * URL it makes must stay on the base URL's origin and path, else nothing is sent.
   */
  path?: string;
  /**
   * An absolute URL on another origin, checked by the caller (a file in the upstream's storage). Sent
   * with the given headers only; its budget is the storage's (`budget.origin`).
   */
  url?: string;
  /**
   * Every request header, as sent and in this order (a Map keeps the order of every name): stream
   * mode adds none (no client credentials either).
   */
  headers: Record<string, string> | ReadonlyMap<string, string>;
  /** A stream is sent once (never retried: it cannot be replayed); a buffer or string may be resent. */
  body?: Readable | Buffer | string;
  budget?: Omit<GovernorKeys, 'client' | 'priority'>;
  /** Default `interactive`: a forwarded call has someone waiting on the other end. */
  priority?: Priority;
  what?: string;
  signal?: AbortSignal;
  /** Idle timeout between two chunks of the body (default the client's `timeoutMs`): large files may pause longer. */
  bodyTimeoutMs?: number;
}

/** A forwarded call's answer: its body is a stream the caller relays, reads or discards. */
export interface UpstreamStream {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  rateLimits: RateLimitReport;
  /**
   * The body as it comes (still content-encoded). The governor's slot and the deadline are held
   * until it ends or is destroyed: relay it, read it, or `discard()` it.
   */
  body: Readable;
  /** Reads and drops the body (frees the connection and the governor's slot). */
  discard(): Promise<void>;
  /** Reads the whole body, up to `maxBytes` (over it: the body is destroyed and this throws). */
  readAll(maxBytes: number): Promise<Buffer>;
}

const idempotentMethods = new Set(['GET', 'PUT', 'DELETE']);

/** Defaults of the body cap and the deadline: far above the largest real page (about 4 MB with source data) and its time. */
const defaultMaxBodyBytes = 64 * 1024 * 1024;
const defaultTotalTimeoutMs = 120_000;

/**
 * An answer whose body is over the client's cap, as received or once inflated (a page far over any
 * real one, a gzip bomb). Not retried: the same request brings the same body.
 */
class UpstreamBodyTooLargeError extends UpstreamError {
  override readonly code = 'upstream_body_too_large';
  override get retryable(): boolean {
    return false;
  }
}

/** An attempt that outlived its deadline (a slow answer, a body that trickles); worth another try. */
class UpstreamTimeoutError extends UpstreamError {
  override readonly statusCode = 504;
  override readonly code = 'upstream_timeout';
}

/**
 * The URL of a path relative to a base URL; it must stay on the base URL's origin and path (a path
 * that left it is refused, never sent).
 */
export function upstreamUrl(baseUrl: string, path: string): string {
  const base = baseUrl.replace(/\/+$/, '');
  const url = `${base}${path}`;
  const parsed = new URL(url);
  const expected = new URL(`${base}/`);
  if (parsed.origin !== expected.origin || !`${parsed.pathname}/`.startsWith(expected.pathname)) {
    throw new MirrorError(`The forwarded path left the upstream's base URL (${parsed.origin}).`);
  }
  return url;
}

export class UpstreamClient {
  readonly baseUrl: string;
  readonly headerPrefix: string;
  private readonly options: UpstreamClientOptions;
  private readonly dispatcher: Dispatcher;
  private readonly governor: Governor;
  private readonly observers = new Set<UpstreamObserver>();

  constructor(options: UpstreamClientOptions) {
    this.options = options;
    this.baseUrl = options.baseUrl.replace(/\/+$/, '');
    this.headerPrefix = options.headerPrefix ?? 'Svc';
    this.dispatcher = options.dispatcher ?? new Agent({ keepAliveTimeout: 30_000, connections: 64, pipelining: 1 });
    this.governor = options.governor ?? unlimitedGovernor;
    if (options.onResponse) this.observers.add(options.onResponse);
  }

  /** Adds an observer of every attempt (metrics); returns its removal. */
  observe(observer: UpstreamObserver): () => void {
    this.observers.add(observer);
    return () => this.observers.delete(observer);
  }

  private notify(observation: UpstreamObservation): void {
    for (const observer of this.observers) {
      try {
        observer(observation);
      } catch {
        // An observer's failure must never fail the call it watches.
      }
    }
  }

  /**
   * This client, sending every `request` with this priority unless the call names one: the API's own
   * calls (a link exchange, a write's read-back, a project lookup) have an application waiting.
   */
  withPriority(priority: Priority): UpstreamClient {
    const view = Object.create(this) as UpstreamClient;
    const request = this.request.bind(this) as (call: UpstreamCall, schema?: z.ZodType) => Promise<unknown>;
    view.request = ((call: UpstreamCall, schema?: z.ZodType) => request({ priority, ...call }, schema)) as UpstreamClient['request'];
    return view;
  }

  /** What this process's governor let through and made wait, per class (when it keeps count). */
  usage(): Record<Priority, ClassUsage> | undefined {
    return this.governor.usage?.();
  }

  /** The client id, used as the governor's client key. */
  get clientId(): string {
    return this.options.clientId;
  }

  async close(): Promise<void> {
    if (!this.options.dispatcher) await this.dispatcher.close();
  }

  private headersFor(call: UpstreamCall): Record<string, string> {
    const h: Record<string, string> = {
      'api-version': this.options.apiVersion ?? '2021-11-21',
      'client-id': this.options.clientId,
      'client-secret': this.options.clientSecret,
      accept: 'application/json',
      'accept-encoding': 'gzip, deflate',
    };
    if (call.accountToken) h['account-token'] = call.accountToken;
    if (call.projectId) h['project-id'] = call.projectId;
    if (call.companyId) h['company-id'] = call.companyId;
    if (call.body !== undefined) h['content-type'] = 'application/json';
    if (call.async === 'send') h['async-request'] = 'true';
    return { ...h, ...call.headers };
  }

  /** Sends one call with the retry policy and governor; returns the parsed JSON body or throws a mapped error. */
  request<T = unknown>(call: UpstreamCall & { async?: undefined; digest?: undefined }, schema?: z.ZodType<T>): Promise<UpstreamResponse<T>>;
  request<T = unknown>(call: UpstreamCall & { digest?: undefined }, schema?: z.ZodType<T>): Promise<UpstreamResponse<T> | AsyncAnswer>;
  request<T = unknown>(call: UpstreamCall, schema?: z.ZodType<T>): Promise<UpstreamResponse<T> | AsyncAnswer | UnchangedAnswer>;
  async request<T = unknown>(call: UpstreamCall, schema?: z.ZodType<T>): Promise<UpstreamResponse<T> | AsyncAnswer | UnchangedAnswer> {
    const what = call.what ?? `${call.method} ${call.path.split('?')[0]}`;
    const idempotent = idempotentMethods.has(call.method) || (call.method === 'POST' && isReadPost(call.path));
    return this.attempts({
      keys: { client: this.options.clientId, ...call.budget, ...(call.priority ? { priority: call.priority } : {}) },
      what,
      method: call.method,
      path: call.path.split('?')[0] ?? call.path,
      sourceSystem: call.budget?.sourceSystem,
      signal: call.signal,
      retryLog: 'retrying upstream call',
      send: (attempt) => this.sendBuffered(call, schema, what, attempt),
      // A malformed body is a failure to get an answer, whatever its status said.
      decide: (attempt, failure) =>
        retryDecision({
          attempt: attempt.number,
          status: failure instanceof MalformedResponseError ? undefined : attempt.status,
          idempotent,
          maxAttempts: this.options.maxAttempts,
          ...(attempt.retryAfterSeconds !== undefined && Number.isFinite(attempt.retryAfterSeconds) ? { retryAfterSeconds: attempt.retryAfterSeconds } : {}),
        }),
    });
  }

  /** One attempt of `request`: the answer read whole (to the cap), digested, parsed and checked. */
  private async sendBuffered<T>(call: UpstreamCall, schema: z.ZodType<T> | undefined, what: string, attempt: Attempt) {
    const res = await undiciRequest(`${this.baseUrl}${call.path}`, {
      method: call.method,
      headers: this.headersFor(call),
      body: call.body === undefined ? undefined : JSON.stringify(call.body),
      dispatcher: this.dispatcher,
      headersTimeout: this.options.timeoutMs ?? 30_000,
      bodyTimeout: this.options.timeoutMs ?? 30_000,
      signal: attempt.signal,
    });
    const status = (attempt.status = res.statusCode);
    const rateLimits = readRateLimits(res.headers, this.headerPrefix);
    const handle = call.async ? asyncHandleOf(res.headers, this.headerPrefix) : undefined;
    const asyncAnswer = handle !== undefined && isAsyncAnswer(call.async!, status, handle);
    // A polled answer's status is the stored request's (a stored 429 is not this poll's).
    this.governor.report(attempt.keys, rateLimits, asyncAnswer ? 200 : status, attempt.sentAt);
    const chunks = await readBody(res, this.options.maxBodyBytes ?? defaultMaxBodyBytes, what);
    const digest = call.digest ? digestOf(chunks) : undefined;
    const retrievedHeader = res.headers[`${this.headerPrefix.toLowerCase()}-data-retrieved-at`];
    const retrievedAt = typeof retrievedHeader === 'string' && !Number.isNaN(Date.parse(retrievedHeader)) ? new Date(retrievedHeader) : new Date();
    const ok = status >= 200 && status < 300 && !asyncAnswer;
    if (ok && digest !== undefined && digest === call.digest?.unless) {
      return { status, unchanged: true as const, digest, headers: res.headers, rateLimits, retrievedAt };
    }
    // Joined only now: a body found unchanged (most pages of a resync) never is.
    const raw = joinChunks(chunks);
    if (ok && call.bytes) return { status, headers: res.headers, body: raw as T, rateLimits, retrievedAt, ...(digest !== undefined ? { digest } : {}) };
    const body = parseJsonBody(raw, what, status);
    if (asyncAnswer) return { status, handle, body, headers: res.headers, rateLimits, retrievedAt: new Date() };
    if (status >= 400) {
      const ra = res.headers['retry-after'];
      attempt.retryAfterSeconds = ra === undefined ? undefined : Number(Array.isArray(ra) ? ra[0] : ra);
      throw errorForResponse({ status, body, what, resetAt: resetAtOf(rateLimits, Date.now()) });
    }
    const parsed: T = schema ? validBody(body, schema, what, status) : (body as T);
    return { status, headers: res.headers, body: parsed, rateLimits, retrievedAt, ...(digest !== undefined ? { digest } : {}) };
  }

  /**
   * Sends one forwarded call and hands back its answer unread: through the same governor (a slot
   * before, the answer's rate-limit headers after), deadline and error mapping as `request`. An
   * answer of any status is the caller's to relay; only a failure to get one throws. Retried only
   * when no answer came and the request can be sent again (an idempotent method, a body that is not
   * a stream).
   */
  async stream(call: UpstreamStreamCall): Promise<UpstreamStream> {
    const method = call.method.toUpperCase();
    const url = call.url ?? upstreamUrl(this.baseUrl, call.path ?? '/');
    const path = call.url ? new URL(call.url).pathname : (call.path ?? '/').split('?')[0]!;
    const what = call.what ?? `${method} ${path}`;
    // A body stream is spent by the first attempt, and a method that is not idempotent may have been
    // applied although no answer came: neither is sent again.
    const replayable = call.body === undefined || typeof call.body === 'string' || Buffer.isBuffer(call.body);
    const resendable = replayable && (idempotentMethods.has(method) || method === 'HEAD');
    return this.attempts({
      keys: { client: this.options.clientId, ...call.budget, priority: call.priority ?? 'interactive' },
      what,
      method: method as UpstreamCall['method'],
      path,
      sourceSystem: call.budget?.sourceSystem,
      signal: call.signal,
      retryLog: 'retrying forwarded upstream call',
      send: (attempt) => this.sendStreamed(call, method, url, what, attempt),
      decide: (attempt) =>
        resendable && !call.signal?.aborted
          ? retryDecision({ attempt: attempt.number, idempotent: true, maxAttempts: this.options.maxAttempts })
          : { retry: false, reason: 'not-idempotent' },
    });
  }

  /** One attempt of `stream`: the answer handed back once its headers came, the attempt held until its body ends. */
  private async sendStreamed(call: UpstreamStreamCall, method: string, url: string, what: string, attempt: Attempt): Promise<UpstreamStream> {
    const idleMs = this.options.timeoutMs ?? 30_000;
    const res = await undiciRequest(url, {
      method: method as UpstreamCall['method'],
      headers: call.headers,
      body: call.body,
      dispatcher: this.dispatcher,
      headersTimeout: idleMs,
      bodyTimeout: call.bodyTimeoutMs ?? idleMs,
      signal: attempt.signal,
    });
    const status = (attempt.status = res.statusCode);
    const rateLimits = readRateLimits(res.headers, this.headerPrefix);
    this.governor.report(attempt.keys, rateLimits, status, attempt.sentAt);
    const body = res.body;
    attempt.holdUntilClosed(body);
    return {
      status,
      headers: res.headers,
      rateLimits,
      body,
      discard: async () => {
        await body.dump().catch(() => undefined);
        attempt.finish();
      },
      readAll: (maxBytes) => readAllCapped(body, maxBytes, what, status),
    };
  }

  /**
   * The one attempt loop under both transports: a governor slot, then an attempt with its deadline
   * and the caller's cancellation, told to the observers; after a failure, the transport's retry
   * decision, a pause, and another attempt, or the failure mapped to an upstream error.
   */
  private async attempts<R>(plan: AttemptPlan<R>): Promise<R> {
    const totalMs = this.options.totalTimeoutMs ?? defaultTotalTimeoutMs;
    for (let number = 1; ; number++) {
      const release = await this.governor.acquire(plan.keys, plan.signal);
      const attempt = new Attempt(number, plan, release, totalMs);
      let failure: unknown;
      try {
        return await plan.send(attempt);
      } catch (error) {
        failure = attempt.timedOut ? timeoutError(totalMs, plan.what, attempt.status, error) : error;
      } finally {
        attempt.answered();
        if (this.observers.size > 0) {
          this.notify({
            method: plan.method,
            path: plan.path,
            sourceSystem: plan.sourceSystem,
            status: attempt.status,
            durationMs: attempt.elapsedMs(),
            attempt: number,
            priority: plan.keys.priority ?? 'background',
          });
        }
      }
      const decision = plan.decide(attempt, failure);
      if (!decision.retry) throw asUpstreamError(failure, plan.what);
      this.options.logger?.debug({ what: plan.what, attempt: number, delayMs: decision.delayMs, err: String(failure) }, plan.retryLog);
      await sleep(decision.delayMs, undefined, { signal: plan.signal });
    }
  }
}

/** What the attempt loop needs of a call, and how its transport sends one attempt and judges a failure. */
interface AttemptPlan<R> {
  keys: GovernorKeys;
  /** What the call is about, for error messages. */
  what: string;
  /** For the observers: the method, the path without its query, the source system. */
  method: UpstreamCall['method'];
  path: string;
  sourceSystem: string | undefined;
  signal: AbortSignal | undefined;
  /** The debug line written before another attempt. */
  retryLog: string;
  /** Sends one attempt; sets the attempt's status once an answer came. */
  send(attempt: Attempt): Promise<R>;
  decide(attempt: Attempt, failure: unknown): RetryDecision;
}

/**
 * One attempt of a call: its governor slot, its deadline (from the time the governor let it go) and
 * the caller's cancellation, all let go once, when the answer is handed back, or when the body an
 * answer streams ends.
 */
class Attempt {
  readonly sentAt = Date.now();
  /** The upstream's status, once an answer came. */
  status: number | undefined;
  /** Seconds of the answer's `Retry-After`, when it failed with one. */
  retryAfterSeconds: number | undefined;
  timedOut = false;
  private readonly started = performance.now();
  private readonly controller = new AbortController();
  private readonly deadline: NodeJS.Timeout;
  private held: Readable | undefined;
  private done = false;

  constructor(
    readonly number: number,
    private readonly plan: AttemptPlan<unknown>,
    private readonly release: () => void,
    totalMs: number,
  ) {
    this.deadline = setTimeout(() => this.expire(totalMs), totalMs);
    const signal = plan.signal;
    if (signal?.aborted) this.cancel();
    else signal?.addEventListener('abort', this.cancel, { once: true });
  }

  get keys(): GovernorKeys {
    return this.plan.keys;
  }

  /** Aborted by the deadline or the caller's cancellation. */
  get signal(): AbortSignal {
    return this.controller.signal;
  }

  elapsedMs(): number {
    return performance.now() - this.started;
  }

  /** The answer's body streams on: the attempt lets go when it ends (or the deadline cuts it). */
  holdUntilClosed(body: Readable): void {
    this.held = body;
    body.once('close', this.finish);
    if (body.destroyed) this.finish();
  }

  /** The attempt is over for the loop: let go unless a streamed body holds it. */
  answered(): void {
    if (!this.held) this.finish();
  }

  /** Lets go of the slot, the deadline and the listener, once. */
  readonly finish = (): void => {
    if (this.done) return;
    this.done = true;
    clearTimeout(this.deadline);
    this.plan.signal?.removeEventListener('abort', this.cancel);
    this.release();
  };

  private readonly cancel = (): void => this.controller.abort(this.plan.signal?.reason);

  private expire(totalMs: number): void {
    this.timedOut = true;
    const error = timeoutError(totalMs, this.plan.what, this.status);
    if (this.held) this.held.destroy(error);
    else this.controller.abort(error);
  }
}

/** An attempt cut at its deadline. */
function timeoutError(totalMs: number, what: string, status: number | undefined, cause?: unknown): UpstreamTimeoutError {
  return new UpstreamTimeoutError(
    `Upstream took longer than ${totalMs} ms to answer ${what} (UPSTREAM_TOTAL_TIMEOUT_MS); the request was cut`,
    status,
    cause === undefined ? undefined : { cause },
  );
}

/** SHA-256 of a body's chunks: 2.5x faster than MD5 here (the CPU's SHA extensions), 0.7 ms for a 1.2 MB page. */
function digestOf(chunks: Buffer[]): string {
  const hash = createHash('sha256');
  for (const chunk of chunks) hash.update(chunk);
  return hash.digest('hex');
}

/** A streamed body read whole, up to `max` bytes (as received): past it the body is destroyed and this throws. */
async function readAllCapped(body: Readable, max: number, what: string, status: number): Promise<Buffer> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of body) {
    const b = chunk as Buffer;
    size += b.length;
    if (size > max) {
      body.destroy();
      throw new UpstreamBodyTooLargeError(`The upstream's answer to ${what} exceeds ${max} bytes.`, status);
    }
    chunks.push(b);
  }
  return Buffer.concat(chunks, size);
}

/** A body's JSON (undefined for an empty body); a cut-off or garbled one throws (retryable). */
export function parseJsonBody(raw: Buffer, what: string, status: number): unknown {
  // A UTF-8 byte order mark is not JSON (TextDecoder would drop it too).
  const text = raw.toString('utf8', raw[0] === 0xef && raw[1] === 0xbb && raw[2] === 0xbf ? 3 : 0);
  if (text === '') return undefined;
  try {
    return JSON.parse(text);
  } catch (error) {
    // A cut-off or garbled body: worth another try, like a dropped connection.
    throw new MalformedResponseError(`Upstream sent malformed JSON for ${what}`, status, { cause: error });
  }
}

/** A body checked against its schema; one of another shape throws, naming the first few differences. */
export function validBody<T>(body: unknown, schema: z.ZodType<T>, what: string, status: number): T {
  const result = schema.safeParse(body);
  if (result.success) return result.data;
  throw new MalformedResponseError(
    `Upstream answered ${what} with an unexpected shape: ${result.error.issues
      .slice(0, 3)
      .map((i) => `${i.path.join('.') || '(root)'} ${i.message}`)
      .join('; ')}`,
    status,
  );
}

/** The chunks of a body in one buffer (one chunk as it is). */
function joinChunks(chunks: Buffer[]): Buffer {
  return chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks);
}

/**
 * Reads the body's bytes, in the chunks they came in, up to `max` bytes: past it (or when the
 * answer announces more), the body is destroyed, which closes its connection, and nothing more is
 * read. undici hands bodies over decompressed only if asked, so inflate here, to `max` bytes at most
 * (zlib stops a gzip bomb there, without making the rest).
 */
async function readBody(res: Dispatcher.ResponseData, max: number, what: string): Promise<Buffer[]> {
  const tooLarge = (how: string): UpstreamBodyTooLargeError => {
    res.body.destroy();
    return new UpstreamBodyTooLargeError(
      `Upstream's answer to ${what} ${how} over ${max} bytes (UPSTREAM_MAX_BODY_BYTES); the mirror stopped reading it`,
      res.statusCode,
    );
  };
  const declared = Number(res.headers['content-length']);
  if (declared > max) throw tooLarge(`is ${declared} bytes,`);
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of res.body) {
    size += (chunk as Buffer).length;
    if (size > max) throw tooLarge('is');
    chunks.push(chunk as Buffer);
  }
  const encoding = res.headers['content-encoding'];
  if (encoding === 'gzip' || encoding === 'deflate') {
    const raw = chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks, size);
    try {
      return [encoding === 'gzip' ? gunzipSync(raw, { maxOutputLength: max }) : inflateSync(raw, { maxOutputLength: max })];
    } catch (error) {
      if ((error as { code?: string }).code === 'ERR_BUFFER_TOO_LARGE') throw tooLarge('inflates to');
      throw error;
    }
  }
  return chunks;
}

function asyncHandleOf(headers: Record<string, string | string[] | undefined>, prefix: string): AsyncRequestHandle | undefined {
  const one = (name: string): string | undefined => {
    const v = headers[`${prefix.toLowerCase()}-async-request-${name}`];
    return Array.isArray(v) ? v[0] : v;
  };
  const id = one('id');
  const state = one('state');
  if (!id || (state !== 'pending' && state !== 'running' && state !== 'executed' && state !== 'failure')) return undefined;
  const expires = Date.parse(one('expires-at') ?? '');
  return { id, state, expiresAt: Number.isNaN(expires) ? null : expires };
}

/** A 202 for a request sent or accepted as async; for a poll, anything but a failure of the poll itself. */
function isAsyncAnswer(mode: NonNullable<UpstreamCall['async']>, status: number, handle: AsyncRequestHandle): boolean {
  if (mode !== 'poll') return status === 202;
  if (status === 202 || status === 410) return true;
  // A stored answer carries the state of the request it answers; 413 is the poll's own refusal.
  return status !== 413 && (handle.state === 'executed' || handle.state === 'failure');
}

/** Link calls and pass-through reads are POSTs that are safe to repeat. */
function isReadPost(path: string): boolean {
  return path.startsWith('/link/token/create');
}

function asUpstreamError(error: unknown, what: string): Error {
  if (error instanceof UpstreamError) return error;
  if (error instanceof Error && error.name === 'AbortError') return error;
  const message = error instanceof Error ? error.message : String(error);
  return new UpstreamError(`Upstream could not be reached for ${what}: ${message}`, undefined, { cause: error });
}
