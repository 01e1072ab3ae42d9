// Async requests served by the mirror: any JSON request with `Async-Request: true` is stored
// (without credentials) and answered 202 with the `{Prefix}-Async-Request-*` headers; a workflow
// runs it; `GET /async-requests/{id}` reports the state and, once executed, the stored response.
import { randomUUID } from 'node:crypto';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { NotFoundError, PayloadTooLargeError, UpstreamUnavailableError } from '../lib/errors.ts';
import { asyncRequestWorkflowId } from '../lib/workflow-ids.ts';
import type { AsyncRequestStore } from '../mirror/async-requests.ts';
import type { Authenticator } from './auth.ts';
import type { SyncControl } from './sync-control.ts';

export const maxAsyncResultBytes = 2 * 1024 * 1024;

/** Request headers kept with a stored request: the contract's, without any credential. */
const keptHeaders = ['project-id', 'company-id', 'include-source-data', 'include-source-data-path', 'exclude-source-data', 'ignore-prohibited-fields', 'content-type', 'accept'];

export interface AsyncDeps {
  auth: Authenticator;
  store: AsyncRequestStore;
  sync: SyncControl;
  headerPrefix: string;
  ttlMs?: number;
}

function stateHeaders(reply: FastifyReply, prefix: string, row: { id: string; state: string; startedAt: Date | null; finishedAt: Date | null; expiresAt: Date }): void {
  void reply.header(`${prefix}-Async-Request-Id`, row.id);
  void reply.header(`${prefix}-Async-Request-State`, row.state);
  void reply.header(`${prefix}-Async-Request-Started-At`, row.startedAt?.toISOString() ?? '');
  void reply.header(`${prefix}-Async-Request-Finished-At`, row.finishedAt?.toISOString() ?? '');
  void reply.header(`${prefix}-Async-Request-Expires-At`, row.expiresAt.toISOString());
}

export function registerAsync(app: FastifyInstance, deps: AsyncDeps): void {
  const { headerPrefix: prefix } = deps;

  // A plain callback: every request passes here, and most are not async.
  app.addHook('preHandler', (request, reply, done) => {
    const flag = request.headers['async-request'];
    if (typeof flag !== 'string' || flag.toLowerCase() !== 'true') return done();
    const path = request.url.split('?')[0] ?? '';
    // Binary and streamed routes cannot be async (as upstream); nor can the async endpoints themselves.
    if (path.startsWith('/async-requests') || path.startsWith('/passthrough') || path.startsWith('/webhooks/inbound') || path.startsWith('/storage')) return done();
    // Answered here (202): the route's handler does not run.
    accept(request, reply).catch(done);
  });

  async function accept(request: FastifyRequest, reply: FastifyReply): Promise<void> {
    const account = await deps.auth.account(request);
    const headers: Record<string, string> = {};
    for (const h of keptHeaders) {
      const v = request.headers[h];
      if (typeof v === 'string') headers[h] = v;
    }
    const id = randomUUID();
    const body = request.body === undefined || request.body === null ? null : Buffer.from(typeof request.body === 'string' ? request.body : JSON.stringify(request.body));
    const expiresAt = new Date(Date.now() + (deps.ttlMs ?? 60 * 60_000));
    await deps.store.create({ id, accountId: account.id, method: request.method, path: request.url, headers, body }, expiresAt);
    try {
      await deps.sync.client.workflow.start('asyncRequestWorkflow', { taskQueue: deps.sync.taskQueue, workflowId: asyncRequestWorkflowId(id), args: [{ id }] });
    } catch (error) {
      await deps.store.fail(id, 'could not be scheduled');
      throw new UpstreamUnavailableError('The async request could not be scheduled; try again.', undefined, { cause: error });
    }
    stateHeaders(reply, prefix, { id, state: 'pending', startedAt: null, finishedAt: null, expiresAt });
    void reply.status(202).send();
  }

  app.get<{ Params: { id: string } }>('/async-requests/:id', async (request, reply) => {
    const account = await deps.auth.account(request);
    const id = request.params.id;
    const row = /^[0-9a-f-]{36}$/i.test(id) ? await deps.store.get(id) : null;
    if (!row || row.accountId !== account.id) throw new NotFoundError(`No async request ${id}.`);
    if (row.expiresAt.getTime() < Date.now()) throw new NotFoundError(`Async request ${id} expired at ${row.expiresAt.toISOString()}; its results are no longer available.`);
    stateHeaders(reply, prefix, row);
    if (row.state === 'failure' && row.status === null) {
      return reply.status(200).send({ message: row.error ?? 'The request failed.', code: 'async_request_failed', details: [] });
    }
    if (row.state !== 'executed' && row.state !== 'failure') return reply.status(200).send();
    const body = Buffer.from(row.responseBody ?? new Uint8Array());
    if (body.length > maxAsyncResultBytes) throw new PayloadTooLargeError(`The result of async request ${id} is ${body.length} bytes, over the 2 MB limit of async results; run the request synchronously.`);
    const headers = (row.responseHeaders ?? {}) as Record<string, string>;
    if (headers['content-type']) void reply.header('content-type', headers['content-type']);
    return reply.status(row.status ?? 200).send(body);
  });
}
