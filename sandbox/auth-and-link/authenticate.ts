// Authentication of every request: API version, client credentials, then the account token or a
// link session. Answers as the upstream does (its one `{"error"}` variant included).
import { createHash, timingSafeEqual } from 'node:crypto';
import type { FastifyReply, FastifyRequest } from 'fastify';
import type { SandboxContext } from '../context.ts';
import type { RouteKind } from '../http/request-state.ts';
import { API_VERSION } from '../options.ts';
import { refusalMessages } from './accounts.ts';
import { requiredScope, sessionAllows } from './link-sessions.ts';

function safeEqual(a: string, b: string): boolean {
  const da = createHash('sha256').update(a).digest();
  const db = createHash('sha256').update(b).digest();
  return timingSafeEqual(da, db);
}

function header(request: FastifyRequest, name: string): string | undefined {
  const v = request.headers[name];
  return Array.isArray(v) ? v[0] : v;
}

function clientCredentialsValid(ctx: SandboxContext, request: FastifyRequest): boolean {
  const id = header(request, 'client-id');
  const secret = header(request, 'client-secret');
  return id !== undefined && secret !== undefined && safeEqual(id, ctx.options.clientId) && safeEqual(secret, ctx.options.clientSecret);
}

/** Returns true when the request may go on; otherwise it has been answered. */
export function authenticate(ctx: SandboxContext, kind: RouteKind, request: FastifyRequest, reply: FastifyReply): boolean {
  if (kind === 'public') return true;
  if (kind === 'admin') {
    if (clientCredentialsValid(ctx, request)) return true;
    void reply.code(401).send({ message: 'Invalid Client-Id or Client-Secret' });
    return false;
  }
  if (header(request, 'api-version') !== API_VERSION) {
    void reply.code(401).send({ error: 'Invalid API-Version header' });
    return false;
  }
  const sessionSecret = header(request, 'session');
  if (kind === 'account' && sessionSecret !== undefined) {
    const session = ctx.sessions.bySessionSecret(sessionSecret);
    if (!session) {
      void reply.code(401).send({ message: 'Invalid Session' });
      return false;
    }
    if (session.expiresAt <= Date.now()) {
      void reply.code(401).send({ message: 'Session expired' });
      return false;
    }
    const scope = requiredScope(request.method, request.url);
    if (!sessionAllows(session, scope)) {
      void reply.code(403).send({ message: `Session lacks the scope ${scope}` });
      return false;
    }
    const account = ctx.accounts.byAccountId(session.accountId);
    if (!account) {
      void reply.code(401).send({ message: 'Invalid Session' });
      return false;
    }
    request.svc.session = session;
    request.svc.account = account;
    return resolveCompany(ctx, request, reply);
  }
  if (!clientCredentialsValid(ctx, request)) {
    void reply.code(401).send({ message: 'Invalid Client-Id or Client-Secret' });
    return false;
  }
  if (kind === 'link-token') return true;
  const token = header(request, 'account-token');
  if (!token) {
    void reply.code(401).send({ message: 'Missing Account-Token header' });
    return false;
  }
  const account = ctx.accounts.byAccountToken(token);
  if (!account) {
    const refusal = ctx.accounts.refusalOf(token);
    void reply.code(401).send({ message: refusal ? refusalMessages[refusal] : 'Invalid Account-Token' });
    return false;
  }
  request.svc.account = account;
  return resolveCompany(ctx, request, reply);
}

/** `Company-Id` selects one of the companies the user granted (cross-company systems). */
function resolveCompany(ctx: SandboxContext, request: FastifyRequest, reply: FastifyReply): boolean {
  const account = request.svc.account!;
  const raw = header(request, 'company-id');
  if (raw === undefined || raw === '') return true;
  const at = account.companies.findIndex((c) => c.id === raw || `source_id:${c.source_id}` === raw);
  if (at < 0) {
    void reply.code(403).send({ message: `Company ${raw} is not accessible to this linked account` });
    return false;
  }
  request.svc.company = at;
  return true;
}
