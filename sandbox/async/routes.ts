// `Async-Request: true`: answer 202 at once, run the request in the background (replayed through
// the app with an internal marker, so it is not counted twice), keep the answer for polling.
import type { FastifyInstance } from 'fastify';
import { BadRequestError, NotFoundError } from '../../lib/errors.ts';
import type { SandboxContext } from '../context.ts';
import { accountOf } from '../http/request-state.ts';
import { headerValue } from '../http/validate.ts';
import { MAX_ASYNC_RESULT_BYTES, type AsyncRequest } from './async-requests.ts';

/** Response headers worth keeping with a stored answer. */
const keptHeaders = /^(content-type|retry-after)$|-ratelimit-|-data-retrieved-at$|-warnings$/i;

export function registerAsyncRoutes(app: FastifyInstance, ctx: SandboxContext, internalNonce: string): void {
  const h = ctx.headers;

  function stateHeaders(r: AsyncRequest): Record<string, string> {
    return {
      [h.asyncId]: r.id,
      [h.asyncState]: r.state,
      [h.asyncStartedAt]: r.startedAt ?? '',
      [h.asyncFinishedAt]: r.finishedAt ?? '',
      [h.asyncExpiresAt]: new Date(r.expiresAt).toISOString(),
    };
  }

  async function execute(r: AsyncRequest, method: string, url: string, headers: Record<string, string | string[] | undefined>, body: unknown): Promise<void> {
    r.state = 'running';
    r.startedAt = new Date().toISOString();
    const forwarded: Record<string, string> = {};
    for (const [k, v] of Object.entries(headers)) {
      if (v === undefined || k === 'async-request' || k === 'content-length' || k === 'host' || k === 'connection') continue;
      forwarded[k] = Array.isArray(v) ? v.join(', ') : v;
    }
    forwarded['x-sandbox-internal'] = internalNonce;
    try {
      const payload = body === undefined ? undefined : typeof body === 'string' || Buffer.isBuffer(body) ? body : JSON.stringify(body);
      const res = await app.inject({ method: method as 'GET', url, headers: forwarded, ...(payload !== undefined ? { payload } : {}) });
      const kept: Record<string, string> = {};
      for (const [k, v] of Object.entries(res.headers)) if (keptHeaders.test(k) && v !== undefined) kept[k] = String(v);
      r.result = { status: res.statusCode, headers: kept, body: res.body };
      r.state = res.statusCode < 400 ? 'executed' : 'failure';
    } catch (error) {
      r.result = { status: 500, headers: { 'content-type': 'application/json; charset=utf-8' }, body: JSON.stringify({ message: 'The request failed' }) };
      r.state = 'failure';
      ctx.logger?.warn({ err: (error as Error).message }, 'async request failed');
    }
    r.finishedAt = new Date().toISOString();
  }

  app.addHook('preHandler', async (request, reply) => {
    if (request.svc.internal || request.routeOptions.config?.kind !== 'account') return;
    if (headerValue(request.headers, 'async-request')?.toLowerCase() !== 'true') return;
    const path = request.url.split('?')[0] ?? '';
    if (path.startsWith('/async-requests')) return;
    if (path === '/passthrough-download') throw new BadRequestError('Async requests are only available for JSON responses');
    const r = ctx.asyncRequests.create(accountOf(request.svc).id);
    // Started on the next turn, so a poll right away may still see `pending`.
    const { method, url, headers, body } = request;
    setTimeout(() => void execute(r, method, url, headers, body), 10).unref();
    return reply.code(202).headers(stateHeaders(r)).send();
  });

  app.get('/async-requests/:id', { config: { kind: 'account' as const } }, async (request, reply) => {
    const { id } = request.params as { id: string };
    const r = ctx.asyncRequests.get(id);
    if (!r || r.accountId !== accountOf(request.svc).id) throw new NotFoundError(`Async request ${id} not found`);
    void reply.headers(stateHeaders(r));
    if (r.expiresAt <= Date.now()) {
      return reply.code(410).send({ message: `The results of async request ${id} expired at ${new Date(r.expiresAt).toISOString()}` });
    }
    if (!r.result) return reply.code(202).send();
    if (Buffer.byteLength(r.result.body) > MAX_ASYNC_RESULT_BYTES) {
      return reply.code(413).send({ message: 'The async result is larger than 2 MB; request fewer records per page' });
    }
    for (const [k, v] of Object.entries(r.result.headers)) if (!/-ratelimit-/i.test(k)) void reply.header(k, v);
    return reply.code(r.result.status).send(r.result.body);
  });
}
