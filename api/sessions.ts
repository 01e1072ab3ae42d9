// Link sessions on the mirror's API. A session created through the mirror (forwarded upstream) is
// recorded here by a keyed hash of its secret, with its account, scopes and expiry, so a front end
// can then read the mirror with the `Session` header alone: within the session's scopes (the
// upstream's rule: `<area>:read` for a GET of `/<area>...`, `:write` otherwise, with or without the
// `construction.` prefix) and until it expires or is expired by a call.
import type { FastifyRequest } from 'fastify';
import { keyedHash } from '../lib/crypto.ts';
import { ForbiddenError, UnauthorizedError } from '../lib/errors.ts';
import type { AccountStore, AccountSummary } from '../mirror/accounts.ts';
import type { PrismaClient } from '../mirror/prisma.ts';

export function sessionSecretHash(key: Buffer, secret: string): string {
  return keyedHash(key, `session:${secret}`);
}

/** The scope a request needs: `<area>:read` for GET and HEAD, `<area>:write` otherwise. */
export function requiredScope(method: string, url: string): string {
  const area = url.split('?')[0]!.split('/').filter(Boolean)[0] ?? '';
  return `${area}:${method === 'GET' || method === 'HEAD' ? 'read' : 'write'}`;
}

export function sessionAllows(scopes: readonly string[], scope: string): boolean {
  return scopes.includes(scope) || scopes.includes(`construction.${scope}`);
}

/** The account a `Session` header stands for, or a 401/403 that says why not. */
export async function accountOfSession(
  deps: { prisma: PrismaClient; accounts: AccountStore; key: Buffer },
  request: FastifyRequest,
  secret: string,
): Promise<AccountSummary> {
  const row = await deps.prisma.linkSession.findUnique({ where: { secretHash: sessionSecretHash(deps.key, secret) } });
  if (!row) throw new UnauthorizedError('Invalid Session: create link sessions through the mirror (POST /link/sessions) to read it with them.');
  if (row.expiresAt.getTime() <= Date.now()) throw new UnauthorizedError('Session expired: create a new one or extend it before it expires.');
  const scope = requiredScope(request.method, request.url);
  if (!sessionAllows(row.scopes, scope)) throw new ForbiddenError(`Session lacks the scope ${scope} (it has ${row.scopes.join(', ')}).`);
  try {
    return await deps.accounts.get(row.accountId);
  } catch {
    throw new UnauthorizedError('Invalid Session: its linked account is no longer linked.');
  }
}

/** Records a session the upstream created (its answer to POST /link/sessions). */
export async function recordSession(prisma: PrismaClient, key: Buffer, accountId: string, answer: unknown): Promise<void> {
  const s = answer as { id?: unknown; session?: unknown; name?: unknown; scopes?: unknown; expires_at?: unknown };
  if (typeof s.id !== 'string' || typeof s.session !== 'string' || typeof s.expires_at !== 'string') return;
  const scopes = Array.isArray(s.scopes) ? s.scopes.filter((x): x is string => typeof x === 'string') : [];
  const data = { accountId, secretHash: sessionSecretHash(key, s.session), name: typeof s.name === 'string' ? s.name : '', scopes, expiresAt: new Date(s.expires_at) };
  await prisma.linkSession.upsert({ where: { id: s.id }, create: { id: s.id, ...data }, update: data });
}

/** Follows an extend or expire the upstream answered with the session (its new `expires_at`). */
export async function updateSessionExpiry(prisma: PrismaClient, accountId: string, id: string, answer: unknown, expiredNow: boolean): Promise<void> {
  const s = answer as { expires_at?: unknown };
  const expiresAt = expiredNow ? new Date(Date.now() - 1) : typeof s.expires_at === 'string' ? new Date(s.expires_at) : undefined;
  if (!expiresAt || Number.isNaN(expiresAt.getTime())) return;
  await prisma.linkSession.updateMany({ where: { id, accountId }, data: { expiresAt } });
}
