// Link sessions on the mirror's API. A session created through the mirror (forwarded upstream) is
// recorded here by a keyed hash of its secret, with its account, scopes and expiry, so a front end
// can then read the mirror with the `Session` header alone: within the session's scopes (the
// upstream's rule: `<area>:read` for a GET of `/<area>...`, `:write` otherwise, with or without the
// `construction.` prefix) and until it expires or is expired by a call. A session ends with its
// account (an unlink deletes its sessions; an unlinked account's session is refused) and with the
// upstream: the mirror asks the upstream about a session it accepts, at most once per `sessionCheckMs`.
import type { FastifyRequest } from 'fastify';
import { z } from 'zod';
import type { UpstreamClient } from '../connectors/upstream-client.ts';
import { domainHash } from '../lib/crypto.ts';
import { requiredScope, sessionAllows } from '../lib/session-scopes.ts';
import { ForbiddenError, UnauthorizedError, UpstreamAuthError, UpstreamNotFoundError } from '../lib/errors.ts';
import type { AccountStore, AccountSummary } from '../mirror/control/accounts.ts';
import { findLinkSession, saveLinkSession, setLinkSessionExpiry } from '../mirror/control/link-sessions.ts';
import type { PrismaClient } from '../mirror/db/prisma.ts';

export function sessionSecretHash(key: Buffer, secret: string): string {
  return domainHash(key, 'session', secret);
}

// The scope rule lives in lib/ (the forwarder's path rule uses it too); re-exported for callers here.

/**
 * How long what the upstream said about a session is believed: a session expired or deleted at the
 * upstream (not through the mirror) is refused within this time, and at its first use through the
 * mirror. One upstream request per session (and API process) per period at most.
 */
const sessionCheckMs = 60_000;

/** Whether the upstream still holds a session valid (it may also move the session's recorded expiry). */
type SessionChecker = (session: { id: string; accountId: string; expiresAt: Date }, account: AccountSummary) => Promise<boolean>;

/** The link session object of `GET /link/sessions/{id}` (contract 2.3): only its expiry matters here. */
const sessionAnswerSchema = z.looseObject({ expires_at: z.string().optional() });

export function createSessionChecker(deps: { prisma: PrismaClient; accounts: AccountStore; upstream: UpstreamClient; everyMs?: number }): SessionChecker {
  const everyMs = deps.everyMs ?? sessionCheckMs;
  // By session and recorded expiry: an extend or expire through the mirror is a new question.
  const checked = new Map<string, { until: number; alive: Promise<boolean> }>();

  async function ask(session: { id: string; expiresAt: Date }, account: AccountSummary): Promise<boolean> {
    let expiresAt: Date;
    try {
      const res = await deps.upstream.request(
        {
          method: 'GET',
          path: `/link/sessions/${encodeURIComponent(session.id)}`,
          accountToken: await deps.accounts.token(account.id),
          budget: { account: account.id, sourceSystem: account.sourceSystem },
          what: 'link session',
          signal: AbortSignal.timeout(5_000),
        },
        sessionAnswerSchema,
      );
      const at = res.body.expires_at === undefined ? undefined : new Date(res.body.expires_at);
      if (!at || Number.isNaN(at.getTime())) return true;
      expiresAt = at;
    } catch (error) {
      // Gone upstream (404), or its account token no longer accepted there (401/403): ended.
      if (error instanceof UpstreamNotFoundError || error instanceof UpstreamAuthError) expiresAt = new Date(Date.now() - 1);
      // The upstream could not say (down, slow, rate-limited): the mirror keeps serving on its own
      // record, as it does for every read, and asks again after the period.
      else return true;
    }
    if (expiresAt.getTime() !== session.expiresAt.getTime()) {
      await setLinkSessionExpiry(deps.prisma, { id: session.id, accountId: account.id, expiresAt });
    }
    return expiresAt.getTime() > Date.now();
  }

  return async (session, account) => {
    const key = `${session.id}|${session.expiresAt.getTime()}`;
    const now = Date.now();
    const hit = checked.get(key);
    if (hit && hit.until > now) return hit.alive;
    if (checked.size >= 10_000) checked.clear();
    const alive = ask(session, account);
    checked.set(key, { until: now + everyMs, alive });
    // A failure of the mirror's own (its database) is not an answer to keep.
    alive.catch(() => checked.delete(key));
    return alive;
  };
}

/** The account a `Session` header stands for, or a 401/403 that says why not. */
export async function accountOfSession(
  deps: { prisma: PrismaClient; accounts: AccountStore; key: Buffer; check?: SessionChecker | undefined },
  request: FastifyRequest,
  secret: string,
): Promise<AccountSummary> {
  const row = await findLinkSession(deps.prisma, sessionSecretHash(deps.key, secret));
  if (!row) throw new UnauthorizedError('Invalid Session: create link sessions through the mirror (POST /link/sessions) to read it with them.');
  if (row.expiresAt.getTime() <= Date.now()) throw new UnauthorizedError('Session expired: create a new one or extend it before it expires.');
  const scope = requiredScope(request.method, request.url);
  if (!sessionAllows(row.scopes, scope)) throw new ForbiddenError(`Session lacks the scope ${scope} (it has ${row.scopes.join(', ')}).`);
  let account: AccountSummary;
  try {
    account = await deps.accounts.get(row.accountId);
  } catch {
    throw new UnauthorizedError('Invalid Session: its linked account is no longer linked.');
  }
  // `get` answers unlinked accounts too: a session never outlives its account.
  if (account.status !== 'linked') throw new UnauthorizedError('Invalid Session: its linked account is no longer linked.');
  if (deps.check && !(await deps.check(row, account))) throw new UnauthorizedError('Session expired: the upstream ended it. Create a new one.');
  return account;
}

/** Records a session the upstream created (its answer to POST /link/sessions). */
export async function recordSession(prisma: PrismaClient, key: Buffer, accountId: string, answer: unknown): Promise<void> {
  const s = answer as { id?: unknown; session?: unknown; name?: unknown; scopes?: unknown; expires_at?: unknown };
  if (typeof s.id !== 'string' || typeof s.session !== 'string' || typeof s.expires_at !== 'string') return;
  const scopes = Array.isArray(s.scopes) ? s.scopes.filter((x): x is string => typeof x === 'string') : [];
  await saveLinkSession(prisma, {
    id: s.id,
    accountId,
    secretHash: sessionSecretHash(key, s.session),
    name: typeof s.name === 'string' ? s.name : '',
    scopes,
    expiresAt: new Date(s.expires_at),
  });
}

/** Follows an extend or expire the upstream answered with the session (its new `expires_at`). */
export async function updateSessionExpiry(prisma: PrismaClient, accountId: string, id: string, answer: unknown, expiredNow: boolean): Promise<void> {
  const s = answer as { expires_at?: unknown };
  const expiresAt = expiredNow ? new Date(Date.now() - 1) : typeof s.expires_at === 'string' ? new Date(s.expires_at) : undefined;
  if (!expiresAt || Number.isNaN(expiresAt.getTime())) return;
  await setLinkSessionExpiry(prisma, { id, accountId, expiresAt });
}
