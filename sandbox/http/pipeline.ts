// The request pipeline shared by every route, in the order upstream applies it: debug id, auth,
// injected faults, rate limits and queues; then (preHandler) async capture; then the handler.
import type { FastifyInstance } from 'fastify';
import { authenticate } from '../auth-and-link/authenticate.ts';
import type { SandboxContext } from '../context.ts';
import { applyBodyFaults, applyExchangeFaults } from '../faults/apply.ts';
import { passGate } from '../rate-limits/gate.ts';
import { newRequestState } from './request-state.ts';

export function installPipeline(app: FastifyInstance, ctx: SandboxContext, internalNonce: string): void {
  app.decorateRequest('svc', null as never);

  app.addHook('onRequest', async (request, reply) => {
    request.svc = newRequestState();
    void reply.header(ctx.headers.debugId, request.id);
    const kind = request.routeOptions.config?.kind ?? 'public';
    // Per-route counts name the resource (`GET /:resource` -> `GET /customers`) but not object ids.
    const params = (request.params ?? {}) as Record<string, string | undefined>;
    const route = (request.routeOptions.url ?? request.url.split('?')[0] ?? '')
      .replace(':resource', params.resource ?? ':resource')
      .replace(':sub', params.sub ?? ':sub');
    if (!authenticate(ctx, kind, request, reply)) {
      // A token the source system took once and refuses now still counts under its account: a client
      // that keeps trying it (or probes it) shows in the account's stats.
      const token = request.headers['account-token'];
      const refused = typeof token === 'string' ? ctx.accounts.refusedAccountOf(token) : undefined;
      if (refused) {
        const label = { id: refused.id, referenceId: refused.referenceId, slug: refused.profile.slug };
        ctx.stats.started(label, `${request.method} ${route}`);
        ctx.stats.finished(label, 401);
      }
      return reply;
    }
    const account = request.svc.account;
    const label = account ? { id: account.id, referenceId: account.referenceId, slug: account.profile.slug } : undefined;
    ctx.stats.started(label, `${request.method} ${route}`);
    if (account) {
      // Billing headers: tied to the linked company; sandbox accounts never count as production.
      void reply.header(ctx.headers.billingId, account.companies[0]!.id);
      void reply.header(ctx.headers.billingEnabled, 'false');
    }
    reply.raw.once('close', () => ctx.stats.finished(label, reply.raw.headersSent ? reply.raw.statusCode : 0));
    if (kind === 'admin') return;
    request.svc.internal = request.headers['x-sandbox-internal'] === internalNonce;
    if (!request.svc.internal) {
      const fired = ctx.faults.take(request.method, request.url, account?.profile.slug);
      if (fired.length > 0 && !(await applyExchangeFaults(ctx, fired, request, reply))) return reply;
    }
    if (kind === 'account' && !(await passGate(ctx, request, reply))) return reply;
    return;
  });

  app.addHook('onSend', async (request, _reply, payload) => (request.svc ? applyBodyFaults(request, payload) : payload));
}
