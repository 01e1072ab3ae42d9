// Routes the mirror forwards to the upstream: link calls (an exchange also registers the account and
// starts its first sync), pass-through in every variant (streamed both ways), and adoption of
// accounts linked before the mirror.
import type { FastifyInstance, FastifyReply, FastifyRequest, FastifySchema } from 'fastify';
import { z } from 'zod';
import { linkedAccountSchema } from '../../connectors/schemas.ts';
import type { UpstreamClient } from '../../connectors/upstream-client.ts';
import type { AccountStore } from '../../mirror/control/accounts.ts';
import { credentialsFirst, type Authenticator } from '../auth.ts';
import { forward, jsonOf, refuseHostileTarget, type UpstreamTarget } from '../forward.ts';
import { notFound } from '../errors.ts';
import { upstreamPath } from '../../lib/upstream-surface.ts';
import { adoptAccountToken, linkWithPublicToken } from '../link-service.ts';
import type { SyncControl } from '../sync-control.ts';
import type { PrismaClient } from '../../mirror/db/prisma.ts';
import { recordSession, updateSessionExpiry } from '../sessions.ts';
import { answer, forwardedSchema, json, pathParams, readAsItCame, typedRoutes, type RouteApp } from '../route-schema.ts';

interface ForwardedRouteDeps {
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

const exchangeSchema = z.object({ public_token: z.string({ message: 'public_token is required' }).min(1, 'public_token is required') });
const adoptSchema = z.object({ account_token: z.string({ message: 'account_token is required' }).min(1, 'account_token is required') });

/** The linked account the exchange answers: the upstream's object, as the connector checked it. */
const linkedAccountAnswer = linkedAccountSchema.meta({ id: 'LinkedAccount' });

/** A link call forwarded as it came: its body is the upstream's to judge. */
const forwardedBody = (shape: Record<string, z.ZodType>) => readAsItCame(z.looseObject(shape));
const forwardedAnswer = (description = 'Forwarded.') => ({ 200: json(description, forwardedSchema) });
const linkRoute = (summary: string, extra: FastifySchema = {}): FastifySchema => ({
  summary,
  tags: ['link'],
  access: 'account',
  response: forwardedAnswer(),
  ...extra,
});
const sessionId = pathParams('id');

const passThrough: Record<string, FastifySchema> = {
  '/passthrough': { summary: 'Pass-through request to the source system (forwarded, streamed)', consumes: ['*/*'], response: forwardedAnswer() },
  '/passthrough-download': {
    summary: 'Pass-through download (forwarded, streamed)',
    consumes: ['*/*'],
    response: { 200: answer('The bytes.', 'application/octet-stream') },
  },
  '/passthrough-multipart': { summary: 'Pass-through multipart upload (forwarded, streamed)', consumes: ['multipart/form-data'], response: forwardedAnswer() },
  '/passthrough-upload': { summary: 'Pass-through binary upload (forwarded, streamed)', consumes: ['application/octet-stream'], response: forwardedAnswer() },
};

/** Client credentials alone (no Account-Token, no Session) on a path that takes them without an account. */
function clientOnly(request: FastifyRequest, path: string): boolean {
  return clientPaths.has(path.replace(/\/$/, '')) && request.headers['account-token'] === undefined && request.headers.session === undefined;
}

const clientPaths: ReadonlySet<string> = new Set(['/ping']);

// Every route here that forwards refuses a hostile target (dot segments, backslashes, encoded
// separators, ...) before anything else, async or not; forward() applies the whole path rule.
const guarded = { onRequest: refuseHostileTarget };

const tokenCreate = {
  summary: 'Create a link token (forwarded upstream)',
  tags: ['link'],
  access: 'client',
  body: forwardedBody({ reference_id: z.string().min(1).max(255) }),
  response: { 200: json('The link token for the Link page.', z.looseObject({ link_token: z.string() })) },
} satisfies FastifySchema;

const exchange = {
  summary: 'Exchange a public token for an account token',
  description: 'Forwarded upstream; the mirror registers the account (token encrypted at rest), starts its first full sync and its periodic schedules.',
  tags: ['link'],
  access: 'client',
  body: exchangeSchema,
  response: { 200: json('The linked account.', linkedAccountAnswer) },
} satisfies FastifySchema;

const adopt = {
  summary: 'Adopt an account linked before the mirror, by its account token',
  tags: ['link'],
  access: 'client',
  body: adoptSchema,
  response: {
    201: json('Registered; its first sync started.', z.object({ id: z.string(), reference_id: z.string(), source_system: z.string(), status: z.string() })),
  },
} satisfies FastifySchema;

/** Link tokens: created (forwarded), exchanged for an account the mirror registers, or an existing account adopted. */
function registerLinkTokenRoutes(app: RouteApp, deps: ForwardedRouteDeps): void {
  const { auth, target } = deps;
  app.post('/link/token/create', { ...guarded, schema: tokenCreate }, async (request, reply) => {
    await auth.client(request);
    return forward(request, reply, target);
  });

  // The account is registered for the client that links (or adopts) it, and answers only to that client.
  app.post('/link/token/exchange', { preValidation: credentialsFirst(auth, 'client'), schema: exchange }, async (request) => {
    const clientId = await auth.client(request);
    const { public_token } = request.body;
    const { linked } = await linkWithPublicToken({ upstream: deps.upstream, accounts: deps.accounts, sync: deps.sync, clientId }, public_token);
    return linked;
  });

  /** Adopts an account linked before the mirror, by its existing account token. */
  app.post('/mirror/accounts', { preValidation: credentialsFirst(auth, 'client'), schema: adopt }, async (request, reply) => {
    const clientId = await auth.client(request);
    const { account_token } = request.body;
    const account = await adoptAccountToken({ upstream: deps.upstream, accounts: deps.accounts, sync: deps.sync, clientId }, account_token);
    return reply.status(201).send({ id: account.id, reference_id: account.referenceId, source_system: account.sourceSystem, status: account.status });
  });
}

const sessionCreate = linkRoute('Create a link session (forwarded; the mirror then accepts its Session header alone)', {
  description:
    'Body as upstream: `name`, `ttl` (seconds, as a string), and a `mode` (`file-picker`, `construction-file-picker`) or explicit `scopes`. A request with only `API-Version` and `Session` then reads the mirror within the scopes until the session expires.',
  body: forwardedBody({ name: z.string(), ttl: z.string(), mode: z.string().optional(), scopes: z.array(z.string()).optional() }),
  response: { 201: json('The session, with its secret (`session`), shown once.', forwardedSchema) },
});
const sessionActions = {
  extend: {
    ...linkRoute('Extend a link session (forwarded; the mirror follows the new expiry)', { body: forwardedBody({ ttl: z.string() }) }),
    params: sessionId,
  },
  expire: { ...linkRoute('Expire a link session now (forwarded; the mirror refuses it from then on)'), params: sessionId },
};

/** Forwards an account's request as it came. */
function forwardAsAccount(deps: ForwardedRouteDeps) {
  return async (request: FastifyRequest, reply: FastifyReply) => {
    const account = await deps.auth.account(request);
    return forward(request, reply, deps.target, { account });
  };
}

/** Link sessions: forwarded; the mirror records what it needs to accept the session itself. */
function registerSessionRoutes(app: RouteApp, deps: ForwardedRouteDeps): void {
  const { auth, target } = deps;
  const key = deps.sessionKey;
  app.post('/link/sessions', { ...guarded, schema: sessionCreate }, async (request, reply) => {
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
  app.get('/link/sessions', { ...guarded, schema: linkRoute("The account's live link sessions (forwarded)") }, forwardAsAccount(deps));
  app.get('/link/sessions/:id', { ...guarded, schema: linkRoute('One link session (forwarded)', { params: sessionId }) }, forwardAsAccount(deps));
  for (const action of ['extend', 'expire'] as const) {
    app.post(`/link/sessions/:id/${action}`, { ...guarded, schema: sessionActions[action] }, async (request, reply) => {
      const account = await auth.account(request);
      return forward(request, reply, target, {
        account,
        capture: {
          maxBytes: 1024 * 1024,
          async onAnswer(status, body) {
            if (status >= 200 && status < 300 && deps.prisma)
              await updateSessionExpiry(deps.prisma, account.id, request.params.id, jsonOf(body), action === 'expire');
          },
        },
      });
    });
  }
}

/**
 * Pass-through bodies (JSON, XML, multipart, octet-stream) are streamed, never parsed; so is the body
 * of everything else of the upstream's surface, forwarded by the catch-all.
 */
function registerStreamedRoutes(app: FastifyInstance, deps: ForwardedRouteDeps): void {
  app.register(async (scope) => {
    scope.removeAllContentTypeParsers();
    scope.addContentTypeParser('*', (_request, payload, done) => done(null, payload));
    for (const [path, schema] of Object.entries(passThrough)) {
      scope.post(
        path,
        { ...guarded, schema: { tags: ['pass-through'], access: 'account', body: readAsItCame(z.unknown()), ...schema } },
        forwardAsAccount(deps),
      );
    }

    // Everything else of the upstream's surface that no route of the mirror serves (resources the
    // mirror does not hold, methods it does not apply, link calls, /ping): forwarded as it came, with
    // its body streamed, and the answer relayed with a warning that says so. A path off the surface
    // is the 404 it always was, before anything is authenticated or sent.
    scope.route({ method: ['GET', 'POST', 'PUT', 'PATCH', 'DELETE'], url: '/*', onRequest: refuseHostileTarget, handler: forwardRest(deps) });
  });
}

function forwardRest(deps: ForwardedRouteDeps) {
  return async (request: FastifyRequest, reply: FastifyReply) => {
    const rule = upstreamPath({ method: request.method, rawUrl: request.url, credential: { kind: 'account' } });
    if (!rule.ok && rule.status === 404) return notFound(request, reply);
    const path = request.url.split('?')[0]!;
    // `/ping` answers client credentials alone, as the link-token calls do.
    const account = clientOnly(request, path) ? undefined : await deps.auth.account(request);
    if (!account) await deps.auth.client(request);
    void reply.header(`${deps.headerPrefix}-Warnings`, `Answered by the upstream: ${request.method} ${path.slice(0, 200)} is not served from the mirror.`);
    return forward(request, reply, deps.target, account ? { account } : {});
  };
}

export function registerForwardedRoutes(fastify: FastifyInstance, deps: ForwardedRouteDeps): void {
  const app = typedRoutes(fastify);
  registerLinkTokenRoutes(app, deps);
  registerSessionRoutes(app, deps);
  app.get('/link/account', { ...guarded, schema: linkRoute('The linked account (forwarded)') }, forwardAsAccount(deps));
  app.get('/link/companies', { ...guarded, schema: linkRoute("The linked account's companies (forwarded)") }, forwardAsAccount(deps));
  registerStreamedRoutes(fastify, deps);
}
