// Authentication of the mirror's API: the contract's headers. Client credentials are checked against
// stored SHA-256 digests in constant time; `Account-Token` selects the linked account by keyed hash.
import type { FastifyRequest } from 'fastify';
import { keyedHash, safeEqual, sha256Hex } from '../lib/crypto.ts';
import { BadRequestError, UnauthorizedError } from '../lib/errors.ts';
import type { AccountStore, AccountSummary } from '../mirror/accounts.ts';
import type { PrismaClient } from '../mirror/prisma.ts';
import { accountOfSession } from './sessions.ts';

export const apiVersion = '2021-11-21';

export interface Authenticator {
  /** Checks API-Version and the client credentials. */
  client(request: FastifyRequest): Promise<void>;
  /** Checks everything, then resolves the linked account of `Account-Token`. */
  account(request: FastifyRequest): Promise<AccountSummary>;
}

/** A request header's value (the first, if sent more than once). */
export function header(request: FastifyRequest, name: string): string | undefined {
  const v = request.headers[name];
  return Array.isArray(v) ? v[0] : v;
}

/** Header by which the worker runs a stored async request as its account (never accepted from outside: see internalToken). */
export const internalHeader = 'x-mirror-internal';

const clientHeaders = ['client-id', 'client-secret'];

/** The internal credential for an account: an HMAC only holders of the signing key can make. */
export function internalToken(key: Buffer, accountId: string): string {
  return `${accountId}.${keyedHash(key, `internal:${accountId}`)}`;
}

export function createAuthenticator(deps: { prisma: PrismaClient; accounts: AccountStore; cacheMs?: number; internalKey?: Buffer }): Authenticator {
  const cacheMs = deps.cacheMs ?? 10_000;
  const clients = new Map<string, { secretHash: string | null; until: number }>();
  const tokens = new Map<string, { account: AccountSummary | undefined; until: number }>();

  async function clientSecretHash(clientId: string): Promise<string | null> {
    const now = Date.now();
    const hit = clients.get(clientId);
    if (hit && hit.until > now) return hit.secretHash;
    const row = await deps.prisma.apiClient.findUnique({ where: { clientId } });
    const secretHash = row?.secretHash ?? null;
    clients.set(clientId, { secretHash, until: now + cacheMs });
    return secretHash;
  }

  async function client(request: FastifyRequest): Promise<void> {
    const version = header(request, 'api-version');
    if (version === undefined) throw new UnauthorizedError('Missing API-Version header: send API-Version: 2021-11-21.');
    if (version !== apiVersion) throw new UnauthorizedError(`Unsupported API-Version "${version.slice(0, 40)}": send API-Version: ${apiVersion}.`);
    const clientId = header(request, 'client-id');
    const secret = header(request, 'client-secret');
    if (!clientId || !secret) throw new UnauthorizedError('Missing Client-Id or Client-Secret header.');
    const expected = clientId.length === 36 ? await clientSecretHash(clientId) : null;
    // Compare even for unknown clients, so timing does not reveal which ids exist.
    const ok = safeEqual(sha256Hex(secret), expected ?? '0'.repeat(64));
    if (!ok || expected === null) throw new UnauthorizedError('Invalid Client-Id or Client-Secret.');
  }

  async function account(request: FastifyRequest): Promise<AccountSummary> {
    const internal = header(request, internalHeader);
    if (internal !== undefined && deps.internalKey) {
      const accountId = internal.split('.')[0] ?? '';
      if (/^[0-9a-f-]{36}$/.test(accountId) && safeEqual(internal, internalToken(deps.internalKey, accountId))) return deps.accounts.get(accountId);
      throw new UnauthorizedError('Invalid internal credential.');
    }
    // Upstream, a Session replaces the client credentials and the account token: alone, it is the
    // credential (a session created through the mirror, see api/sessions.ts).
    const session = header(request, 'session');
    if (session !== undefined && deps.internalKey && [...clientHeaders, 'account-token'].every((h) => header(request, h) === undefined)) {
      const version = header(request, 'api-version');
      if (version !== apiVersion) throw new UnauthorizedError(`${version === undefined ? 'Missing API-Version header' : 'Unsupported API-Version'}: send API-Version: ${apiVersion}.`);
      return accountOfSession({ prisma: deps.prisma, accounts: deps.accounts, key: deps.internalKey }, request, session);
    }
    await client(request);
    // Beside the client credentials, a session would make the upstream answer as the session's
    // account (another account, or one whose session expired or lacks the scope): ambiguous.
    if (session !== undefined) {
      throw new BadRequestError('Send either a Session header or Client-Id, Client-Secret and Account-Token, not both: the mirror authenticates requests by their Account-Token.');
    }
    const token = header(request, 'account-token');
    if (!token) throw new UnauthorizedError('Missing Account-Token header.');
    const key = deps.accounts.tokenHash(token);
    const now = Date.now();
    const hit = tokens.get(key);
    let found = hit && hit.until > now ? hit.account : undefined;
    if (!hit || hit.until <= now) {
      found = await deps.accounts.findByToken(token);
      tokens.set(key, { account: found, until: now + cacheMs });
      if (tokens.size > 10_000) tokens.clear();
    }
    if (!found) throw new UnauthorizedError('Invalid Account-Token: no linked account has this token.');
    return found;
  }

  return { client, account };
}

/** Registers (or rotates) an API client's credentials; only the secret's digest is stored. */
export async function upsertApiClient(prisma: PrismaClient, clientId: string, clientSecret: string, name = 'default'): Promise<void> {
  const secretHash = sha256Hex(clientSecret);
  await prisma.apiClient.upsert({ where: { clientId }, create: { clientId, secretHash, name }, update: { secretHash } });
}
