// Routes the mirror forwards to the upstream: link calls (an exchange also registers the account and
// starts its first sync), pass-through in every variant (streamed both ways), and adoption of
// accounts linked before the mirror.
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { z } from 'zod';
import type { UpstreamClient } from '../../connectors/upstream-client.ts';
import { BadRequestError } from '../../lib/errors.ts';
import type { AccountStore } from '../../mirror/accounts.ts';
import type { Authenticator } from '../auth.ts';
import { forward, jsonOf, refuseHostileTarget, type UpstreamTarget } from '../forward.ts';
import { notFound } from '../errors.ts';
import { upstreamPath } from '../../lib/upstream-surface.ts';
import { adoptAccountToken, linkWithPublicToken } from '../link-service.ts';
import type { SyncControl } from '../sync-control.ts';
import type { PrismaClient } from '../../mirror/prisma.ts';
import { recordSession, updateSessionExpiry } from '../sessions.ts';

export interface ForwardedRouteDeps {
  /** The contract's header prefix (`{Prefix}-Warnings` on what the mirror forwards on its own account). */
  headerPrefix: string;
  prisma?: PrismaClient;
  /** Key of the sessions' keyed hashes; without it sessions are forwarded but not recorded. */
  sessionKey?: Buffer;
  auth: Authenticator;
  target: UpstreamTarget;
  upstream: UpstreamClient;
  accounts: AccountStore;
  sync?: SyncControl;
}

const exchangeSchema = z.object({ public_token: z.string().min(1, 'public_token is required') });
const adoptSchema = z.object({ account_token: z.string().min(1, 'account_token is required') });

function parseBody<T>(schema: z.ZodType<T>, body: unknown): T {
  const r = schema.safeParse(body ?? {});
  if (r.success) return r.data;
  const details = r.error.issues.map((i) => ({ path: i.path.join('.'), message: i.message }));
  throw new BadRequestError(`Invalid body: ${details.map((d) => d.message).join('; ')}`, { details });
}

/** Client credentials alone (no Account-Token, no Session) on a path that takes them without an account. */
function clientOnly(request: FastifyRequest, path: string): boolean {
  return clientPaths.has(path.replace(/\/$/, '')) && request.headers['account-token'] === undefined && request.headers.session === undefined;
}

const clientPaths: ReadonlySet<string> = new Set(['/ping']);

export function registerForwardedRoutes(app: FastifyInstance, deps: ForwardedRouteDeps): void {
  const { auth, target } = deps;
  // Every route here that forwards refuses a hostile target (dot segments, backslashes, encoded
  // separators, ...) before anything else, async or not; forward() applies the whole path rule.
  const guarded = { onRequest: refuseHostileTarget };

  app.post('/link/token/create', guarded, async (request, reply) => {
    await auth.client(request);
    return forward(request, reply, target);
  });

  // The account is registered for the client that links (or adopts) it, and answers only to that client.
  app.post('/link/token/exchange', async (request) => {
    const clientId = await auth.client(request);
    const { public_token } = parseBody(exchangeSchema, request.body);
    const { linked } = await linkWithPublicToken({ upstream: deps.upstream, accounts: deps.accounts, sync: deps.sync, clientId }, public_token);
    return linked;
  });

  /** Adopts an account linked before the mirror, by its existing account token. */
  app.post('/mirror/accounts', async (request, reply) => {
    const clientId = await auth.client(request);
    const { account_token } = parseBody(adoptSchema, request.body);
    const account = await adoptAccountToken({ upstream: deps.upstream, accounts: deps.accounts, sync: deps.sync, clientId }, account_token);
    return reply.status(201).send({ id: account.id, reference_id: account.referenceId, source_system: account.sourceSystem, status: account.status });
  });

  // Link sessions: forwarded; the mirror records what it needs to accept the session itself.
  const key = deps.sessionKey;
  app.post('/link/sessions', guarded, async (request, reply) => {
    const account = await auth.account(request);
    return forward(request, reply, target, {
      account,
      capture: {
        maxBytes: 1024 * 1024,
        async onAnswer(status, body) {
          if (status >= 200 && status < 300 && key) await recordSession(deps.prisma!, key, account.id, jsonOf(body));
        },
      },
    });
  });
  for (const path of ['/link/sessions', '/link/sessions/:id']) {
    app.get(path, guarded, async (request, reply) => {
      const account = await auth.account(request);
      return forward(request, reply, target, { account });
    });
  }
  for (const action of ['extend', 'expire'] as const) {
    app.post<{ Params: { id: string } }>(`/link/sessions/:id/${action}`, guarded, async (request, reply) => {
      const account = await auth.account(request);
      return forward(request, reply, target, {
        account,
        capture: {
          maxBytes: 1024 * 1024,
          async onAnswer(status, body) {
            if (status >= 200 && status < 300 && deps.prisma) await updateSessionExpiry(deps.prisma, account.id, request.params.id, jsonOf(body), action === 'expire');
          },
        },
      });
    });
  }

  for (const path of ['/link/account', '/link/companies']) {
    app.get(path, guarded, async (request, reply) => {
      const account = await auth.account(request);
      return forward(request, reply, target, { account });
    });
  }

  // Pass-through bodies (JSON, XML, multipart, octet-stream) are streamed, never parsed.
  app.register(async (scope) => {
    scope.removeAllContentTypeParsers();
    scope.addContentTypeParser('*', (_request, payload, done) => done(null, payload));
    for (const path of ['/passthrough', '/passthrough-download', '/passthrough-multipart', '/passthrough-upload']) {
      scope.post(path, guarded, async (request, reply) => {
        const account = await auth.account(request);
        return forward(request, reply, target, { account });
      });
    }

    // Everything else of the upstream's surface that no route of the mirror serves (resources the
    // mirror does not hold, methods it does not apply, link calls, /ping): forwarded as it came, with
    // its body streamed, and the answer relayed with a warning that says so. A path off the surface
    // is the 404 it always was, before anything is authenticated or sent.
    scope.route({
      method: ['GET', 'POST', 'PUT', 'PATCH', 'DELETE'],
      url: '/*',
      onRequest: refuseHostileTarget,
      handler: async (request, reply) => {
        const rule = upstreamPath({ method: request.method, rawUrl: request.url, credential: { kind: 'account' } });
        if (!rule.ok && rule.status === 404) return notFound(request, reply);
        const path = request.url.split('?')[0]!;
        // `/ping` answers client credentials alone, as the link-token calls do.
        const account = clientOnly(request, path) ? undefined : await auth.account(request);
        if (!account) await auth.client(request);
        void reply.header(`${deps.headerPrefix}-Warnings`, `Answered by the upstream: ${request.method} ${path.slice(0, 200)} is not served from the mirror.`);
        return forward(request, reply, target, account ? { account } : {});
      },
    });
  });
}
