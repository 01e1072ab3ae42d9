// Async requests served by the mirror: any JSON request with `Async-Request: true` is stored
// (without credentials) and answered 202 with the `{Prefix}-Async-Request-*` headers; a workflow
// runs it; `GET /async-requests/{id}` reports the state and, once executed, the stored response.
import { randomUUID } from 'node:crypto';
import { Readable } from 'node:stream';
import type { FastifyInstance, FastifyReply, FastifyRequest, FastifySchema } from 'fastify';
import { answer, errorAnswer, pathParams, typedRoutes } from './route-schema.ts';
import { NotFoundError, PayloadTooLargeError, UpstreamUnavailableError } from '../lib/errors.ts';
import { asyncRequestWorkflowId } from '../lib/workflow-ids.ts';
import type { AsyncRequestStore } from '../mirror/control/async-requests.ts';
import { workPriority } from '../lib/work-priority.ts';
import type { Authenticator } from './auth.ts';
import type { SyncControl } from './sync-control.ts';
import { passedUpstream } from './forward.ts';

const maxAsyncResultBytes = 2 * 1024 * 1024;

/** `Async-Request: true` or `1` (the real service's own collection sends both). */
function asksAsync(value: string | string[] | undefined): boolean {
  const v = (Array.isArray(value) ? value[0] : value)?.trim().toLowerCase();
  return v === 'true' || v === '1';
}

/** Request headers not kept with a stored request: the flag itself, and the length of a body re-encoded when it runs. */
const notKept = new Set(['async-request', 'content-length']);

interface AsyncDeps {
  auth: Authenticator;
  store: AsyncRequestStore;
  sync: SyncControl;
  headerPrefix: string;
  ttlMs?: number;
}

function stateHeaders(
  reply: FastifyReply,
  prefix: string,
  row: { id: string; state: string; startedAt: Date | null; finishedAt: Date | null; expiresAt: Date },
): void {
  void reply.header(`${prefix}-Async-Request-Id`, row.id);
  void reply.header(`${prefix}-Async-Request-State`, row.state);
  void reply.header(`${prefix}-Async-Request-Started-At`, row.startedAt?.toISOString() ?? '');
  void reply.header(`${prefix}-Async-Request-Finished-At`, row.finishedAt?.toISOString() ?? '');
  void reply.header(`${prefix}-Async-Request-Expires-At`, row.expiresAt.toISOString());
}

/** Largest body kept with a stored request (the API's own body limit). */
const maxStoredBodyBytes = 10 * 1024 * 1024;

/** The request's body as stored: parsed JSON re-encoded, text and bytes as they came, a stream (a forwarded route's) read whole. */
async function storedBody(request: FastifyRequest): Promise<Buffer | null> {
  const b = request.body;
  if (b === undefined || b === null) return null;
  if (Buffer.isBuffer(b)) return b;
  if (typeof b === 'string') return Buffer.from(b);
  if (b instanceof Readable) {
    const chunks: Buffer[] = [];
    let size = 0;
    for await (const chunk of b) {
      size += (chunk as Buffer).length;
      if (size > maxStoredBodyBytes)
        throw new PayloadTooLargeError(`An async request's body may be at most ${maxStoredBodyBytes} bytes; send this one synchronously.`);
      chunks.push(chunk as Buffer);
    }
    return Buffer.concat(chunks);
  }
  return Buffer.from(JSON.stringify(b));
}

export function registerAsync(fastify: FastifyInstance, deps: AsyncDeps): void {
  const app = typedRoutes(fastify);
  const { headerPrefix: prefix } = deps;

  // A plain callback: every request passes here, and most are not async.
  app.addHook('preHandler', (request, reply, done) => {
    if (!asksAsync(request.headers['async-request'])) return done();
    const path = request.url.split('?')[0] ?? '';
    // Binary and streamed routes cannot be async (as upstream); nor can the async endpoints themselves.
    if (path.startsWith('/async-requests') || path.startsWith('/passthrough') || path.startsWith('/webhooks/inbound') || path.startsWith('/storage'))
      return done();
    // Answered here (202): the route's handler does not run.
    accept(request, reply).catch(done);
  });

  async function accept(request: FastifyRequest, reply: FastifyReply): Promise<void> {
    const account = await deps.auth.account(request);
    // Every header the request would have sent upstream (never a credential: see passedUpstream),
    // so the stored request runs as it was asked, headers the mirror does not know included.
    const headers: Record<string, string> = {};
    for (const [name, v] of Object.entries(request.headers)) {
      if (v === undefined || notKept.has(name) || !passedUpstream(name)) continue;
      headers[name] = Array.isArray(v) ? v.join(', ') : v;
    }
    const id = randomUUID();
    const body = await storedBody(request);
    const expiresAt = new Date(Date.now() + (deps.ttlMs ?? 60 * 60_000));
    await deps.store.create({ id, accountId: account.id, method: request.method, path: request.url, headers, body }, expiresAt);
    try {
      await deps.sync.client.workflow.start('asyncRequestWorkflow', {
        taskQueue: deps.sync.taskQueue,
        workflowId: asyncRequestWorkflowId(id),
        args: [{ id }],
        priority: workPriority(account.id, 'on-demand'),
      });
    } catch (error) {
      await deps.store.fail(id, 'could not be scheduled');
      throw new UpstreamUnavailableError('The async request could not be scheduled; try again.', undefined, { cause: error });
    }
    stateHeaders(reply, prefix, { id, state: 'pending', startedAt: null, finishedAt: null, expiresAt });
    void reply.status(202).send();
  }

  const schema = {
    summary: 'State (and, once executed, the answer) of an async request',
    tags: ['async'],
    access: 'account',
    params: pathParams('id'),
    response: {
      200: answer('The stored answer once executed; empty with the state headers while pending or running.'),
      404: errorAnswer("Unknown or another account's."),
    },
  } satisfies FastifySchema;
  app.get('/async-requests/:id', { schema }, (request, reply) => asyncResult(deps, request, reply, request.params.id));
}

/** An async request's state, and once executed its stored answer (with the status the upstream gave it). */
async function asyncResult(deps: AsyncDeps, request: FastifyRequest, reply: FastifyReply, id: string): Promise<FastifyReply> {
  const prefix = deps.headerPrefix;
  const account = await deps.auth.account(request);
  const row = /^[0-9a-f-]{36}$/i.test(id) ? await deps.store.get(id) : null;
  if (!row || row.accountId !== account.id) throw new NotFoundError(`No async request ${id}.`);
  if (row.expiresAt.getTime() < Date.now())
    throw new NotFoundError(`Async request ${id} expired at ${row.expiresAt.toISOString()}; its results are no longer available.`);
  stateHeaders(reply, prefix, row);
  if (row.state === 'failure' && row.status === null) {
    return reply.status(200).send({ message: row.error ?? 'The request failed.', code: 'async_request_failed', details: [] });
  }
  if (row.state !== 'executed' && row.state !== 'failure') return reply.status(200).send();
  const body = Buffer.from(row.responseBody ?? new Uint8Array());
  if (body.length > maxAsyncResultBytes)
    throw new PayloadTooLargeError(
      `The result of async request ${id} is ${body.length} bytes, over the 2 MB limit of async results; run the request synchronously.`,
    );
  const headers = (row.responseHeaders ?? {}) as Record<string, string>;
  if (headers['content-type']) void reply.header('content-type', headers['content-type']);
  return reply.status(row.status ?? 200).send(body);
}
