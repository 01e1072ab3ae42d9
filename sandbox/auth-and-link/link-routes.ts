// Link endpoints: link token, token exchange, the linked account, its companies, link sessions.
import type { FastifyInstance } from 'fastify';
import { z } from 'zod';
import { NotFoundError } from '../../lib/errors.ts';
import type { SandboxContext } from '../context.ts';
import { accountOf } from '../http/request-state.ts';
import { parseInput } from '../http/validate.ts';
import { profileOf } from '../source-systems/profiles.ts';
import { linkedAccountView } from './accounts.ts';
import { createSessionSchema, extendSessionSchema, sessionView } from './link-sessions.ts';

const createLinkTokenSchema = z.object({ reference_id: z.string().min(1).max(255) });

const exchangeSchema = z.object({ public_token: z.string().min(1) });

export function registerLinkRoutes(app: FastifyInstance, ctx: SandboxContext): void {
  const linkToken = { config: { kind: 'link-token' as const } };
  const account = { config: { kind: 'account' as const } };

  app.post('/link/token/create', linkToken, async (request) => {
    const body = parseInput(createLinkTokenSchema, request.body);
    return { link_token: ctx.accounts.createLinkToken(body.reference_id) };
  });

  app.post('/link/token/exchange', linkToken, async (request) => {
    const body = parseInput(exchangeSchema, request.body);
    const linked = ctx.accounts.exchange(body.public_token, profileOf);
    ctx.logger?.info({ account: linked.id, source_system: linked.profile.slug }, 'account linked');
    return linkedAccountView(linked);
  });

  // A credentials check: the client's id and secret (an account token, when sent, is not needed).
  app.get('/ping', linkToken, async () => ({ status: 'ok' }));

  app.get('/link/account', account, async (request) => {
    const view = linkedAccountView(accountOf(request.svc));
    // The permanent token is only handed out once, at exchange.
    const { account_token: _secret, ...rest } = view;
    return rest;
  });

  app.get('/link/companies', account, async (request, reply) => {
    void reply.header(ctx.headers.dataRetrievedAt, new Date().toISOString());
    const companies = accountOf(request.svc).companies;
    return { data: companies, meta: { current_page: 1, has_more_results: false } };
  });

  app.post('/link/sessions', account, async (request, reply) => {
    const body = parseInput(createSessionSchema, request.body);
    const session = ctx.sessions.create(accountOf(request.svc).id, body);
    return reply.code(201).send(sessionView(session, true));
  });

  app.get('/link/sessions', account, async (request) => {
    const sessions = ctx.sessions.list(accountOf(request.svc).id).filter((s) => s.expiresAt > Date.now());
    return { data: sessions.map((s) => sessionView(s, false)), meta: { current_page: 1, has_more_results: false } };
  });

  app.get('/link/sessions/:id', account, async (request) => {
    const { id } = request.params as { id: string };
    const s = ctx.sessions.get(accountOf(request.svc).id, id);
    if (!s) throw new NotFoundError(`Link session ${id} not found`);
    return sessionView(s, false);
  });

  app.post('/link/sessions/:id/extend', account, async (request) => {
    const { id } = request.params as { id: string };
    const s = ctx.sessions.get(accountOf(request.svc).id, id);
    if (!s) throw new NotFoundError(`Link session ${id} not found`);
    const body = parseInput(extendSessionSchema, request.body);
    ctx.sessions.extend(s, Number(body.ttl));
    return sessionView(s, false);
  });

  app.post('/link/sessions/:id/expire', account, async (request) => {
    const { id } = request.params as { id: string };
    const s = ctx.sessions.get(accountOf(request.svc).id, id);
    if (!s) throw new NotFoundError(`Link session ${id} not found`);
    ctx.sessions.expire(s);
    return sessionView(s, false);
  });
}
