// Authentication of the mirror's API: the contract's headers. Client credentials are checked against
// stored SHA-256 digests in constant time; `Account-Token` selects the linked account by keyed hash,
// and only together with the credentials of the client the account belongs to.
import { hash } from 'node:crypto';
import type { FastifyRequest } from 'fastify';
import type { UpstreamClient } from '../connectors/upstream-client.ts';
import { domainHash, safeEqual, sha256Hex } from '../lib/crypto.ts';
import { BadRequestError, UnauthorizedError } from '../lib/errors.ts';
import type { AccountStore, AccountSummary } from '../mirror/control/accounts.ts';
import { apiClientSecretHash, upsertApiClient } from '../mirror/control/api-clients.ts';
import type { PrismaClient } from '../mirror/db/prisma.ts';
import { accountOfSession, createSessionChecker } from './sessions.ts';

export const apiVersion = '2021-11-21';

export interface Authenticator {
  /** Checks API-Version and the client credentials; resolves with the client's id. */
  client(request: FastifyRequest): Promise<string>;
  /** Checks everything, then resolves the linked account of `Account-Token` (one of this client's). */
  account(request: FastifyRequest): Promise<AccountSummary>;
}

/**
 * A route's preValidation step that checks the credentials before its schema judges the input: a
 * caller without them gets the 401, never a 400 about the input the route takes.
 */
export function credentialsFirst(auth: Authenticator, kind: 'client' | 'account'): (request: FastifyRequest) => Promise<void> {
  return async (request) => {
    await auth[kind](request);
  };
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
  return `${accountId}.${domainHash(key, 'internal', accountId)}`;
}

/**
 * How long what the database said about a client or an account token is believed: revoking a client
 * (deleting or rotating its secret) or unlinking an account takes effect within this time at most,
 * in every API process, without a restart.
 */
const authCacheMs = 3000;

interface AuthenticatorDeps {
  prisma: PrismaClient;
  accounts: AccountStore;
  cacheMs?: number;
  internalKey?: Buffer;
  /** Asks the upstream whether a link session is still valid there (see api/sessions.ts); without it, the mirror's record alone decides. */
  upstream?: UpstreamClient | undefined;
  sessionCheckMs?: number;
}

/**
 * The contract's headers checked, with what the database said about clients and account tokens
 * believed for `cacheMs` (the caches this object holds).
 */
class HeaderAuthenticator implements Authenticator {
  readonly #deps: AuthenticatorDeps;
  readonly #cacheMs: number;
  readonly #checkSession: ReturnType<typeof createSessionChecker> | undefined;
  readonly #clients = new Map<string, { secretHash: string | null; until: number }>();
  readonly #tokens = new Map<string, { account: AccountSummary | undefined; until: number }>();
  // Requests that passed every check, by a SHA-256 of their exact Client-Id, Client-Secret and
  // Account-Token (never the plaintext): a repeat of the same credentials then costs one digest instead
  // of the secret's digest, its comparison and the token's HMAC. An entry lives no longer than the
  // client and token entries it was checked against, so revocation still shows within `cacheMs`; a
  // different secret or token is a different key, so no request is ever answered as another account.
  readonly #verified = new Map<string, { account: AccountSummary; until: number }>();

  constructor(deps: AuthenticatorDeps) {
    this.#deps = deps;
    this.#cacheMs = deps.cacheMs ?? authCacheMs;
    this.#checkSession = deps.upstream
      ? createSessionChecker({
          prisma: deps.prisma,
          accounts: deps.accounts,
          upstream: deps.upstream,
          ...(deps.sessionCheckMs === undefined ? {} : { everyMs: deps.sessionCheckMs }),
        })
      : undefined;
  }

  async #clientSecretHash(clientId: string): Promise<string | null> {
    const now = Date.now();
    const hit = this.#clients.get(clientId);
    if (hit && hit.until > now) return hit.secretHash;
    const secretHash = await apiClientSecretHash(this.#deps.prisma, clientId);
    if (this.#clients.size >= 10_000) this.#clients.clear();
    this.#clients.set(clientId, { secretHash, until: now + this.#cacheMs });
    return secretHash;
  }

  /** Checks API-Version and the client credentials; returns the client and until when the answer may be believed. */
  async #checkClient(request: FastifyRequest): Promise<{ clientId: string; until: number }> {
    const version = header(request, 'api-version');
    if (version === undefined) throw new UnauthorizedError('Missing API-Version header: send API-Version: 2021-11-21.');
    if (version !== apiVersion) throw new UnauthorizedError(`Unsupported API-Version "${version.slice(0, 40)}": send API-Version: ${apiVersion}.`);
    const clientId = header(request, 'client-id');
    const secret = header(request, 'client-secret');
    if (!clientId || !secret) throw new UnauthorizedError('Missing Client-Id or Client-Secret header.');
    const expected = clientId.length === 36 ? await this.#clientSecretHash(clientId) : null;
    // Compare even for unknown clients, so timing does not reveal which ids exist.
    const ok = safeEqual(sha256Hex(secret), expected ?? '0'.repeat(64));
    if (!ok || expected === null) throw new UnauthorizedError('Invalid Client-Id or Client-Secret.');
    return { clientId, until: this.#clients.get(clientId)?.until ?? 0 };
  }

  async client(request: FastifyRequest): Promise<string> {
    return (await this.#checkClient(request)).clientId;
  }

  /** The worker's internal credential: the account it names, or a 401 (undefined: none was sent, or no key checks it). */
  #internalAccount(request: FastifyRequest): Promise<AccountSummary> | undefined {
    const internal = header(request, internalHeader);
    if (internal === undefined || !this.#deps.internalKey) return undefined;
    const accountId = internal.split('.')[0] ?? '';
    if (/^[0-9a-f-]{36}$/.test(accountId) && safeEqual(internal, internalToken(this.#deps.internalKey, accountId))) return this.#deps.accounts.get(accountId);
    throw new UnauthorizedError('Invalid internal credential.');
  }

  /**
   * Upstream, a Session replaces the client credentials and the account token: alone, it is the
   * credential (a session created through the mirror, see api/sessions.ts). Undefined: not a session-only request.
   */
  #sessionAccount(request: FastifyRequest, session: string | undefined): Promise<AccountSummary> | undefined {
    const key = this.#deps.internalKey;
    if (session === undefined || !key || ![...clientHeaders, 'account-token'].every((h) => header(request, h) === undefined)) return undefined;
    const version = header(request, 'api-version');
    if (version !== apiVersion)
      throw new UnauthorizedError(`${version === undefined ? 'Missing API-Version header' : 'Unsupported API-Version'}: send API-Version: ${apiVersion}.`);
    return accountOfSession({ prisma: this.#deps.prisma, accounts: this.#deps.accounts, key, check: this.#checkSession }, request, session);
  }

  /** The linked account of an Account-Token, as the database said within `cacheMs`. */
  async #tokenEntry(token: string, now: number): Promise<{ account: AccountSummary | undefined; until: number }> {
    const tokenKey = this.#deps.accounts.tokenHash(token);
    let entry = this.#tokens.get(tokenKey);
    if (!entry || entry.until <= now) {
      entry = { account: await this.#deps.accounts.findByToken(token), until: now + this.#cacheMs };
      this.#tokens.set(tokenKey, entry);
      if (this.#tokens.size > 10_000) this.#tokens.clear();
    }
    return entry;
  }

  async account(request: FastifyRequest): Promise<AccountSummary> {
    const internal = this.#internalAccount(request);
    if (internal) return internal;
    const session = header(request, 'session');
    const bySession = this.#sessionAccount(request, session);
    if (bySession) return bySession;
    const clientId = header(request, 'client-id');
    const secret = header(request, 'client-secret');
    const token = header(request, 'account-token');
    const key =
      session === undefined && clientId && secret && token && header(request, 'api-version') === apiVersion
        ? hash('sha256', `${clientId}\u0000${secret}\u0000${token}`, 'hex')
        : undefined;
    const now = Date.now();
    if (key !== undefined) {
      const hit = this.#verified.get(key);
      if (hit && hit.until > now) return hit.account;
    }
    const checked = await this.#checkClient(request);
    // Beside the client credentials, a session would make the upstream answer as the session's
    // account (another account, or one whose session expired or lacks the scope): ambiguous.
    if (session !== undefined) {
      throw new BadRequestError(
        'Send either a Session header or Client-Id, Client-Secret and Account-Token, not both: the mirror authenticates requests by their Account-Token.',
      );
    }
    if (!token) throw new UnauthorizedError('Missing Account-Token header.');
    const entry = await this.#tokenEntry(token, now);
    const found = entry.account;
    // An account answers only to the client it belongs to; to any other, its token is as unknown as
    // a made-up one (the same answer, so nothing tells that it exists).
    if (!found || found.clientId !== checked.clientId) throw new UnauthorizedError('Invalid Account-Token: no linked account has this token.');
    if (key !== undefined) {
      if (this.#verified.size >= 10_000) this.#verified.clear();
      this.#verified.set(key, { account: found, until: Math.min(checked.until, entry.until) });
    }
    return found;
  }
}

export function createAuthenticator(deps: AuthenticatorDeps): Authenticator {
  return new HeaderAuthenticator(deps);
}

// Registering a client is the store's (mirror/control/api-clients.ts); re-exported for the tools and tests that set one up.
export { upsertApiClient };
