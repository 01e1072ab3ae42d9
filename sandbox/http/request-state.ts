// What the pipeline learns about a request (who is calling, which faults fire) and hands to routes.
import type { LinkedAccount } from '../auth-and-link/accounts.ts';
import type { LinkSession } from '../auth-and-link/link-sessions.ts';
import type { Fault } from '../faults/faults.ts';

/**
 * Route kinds decide the checks: `link-token` (client credentials, no account), `account` (the
 * full set), `admin` (client credentials, no API-Version), `public` (signed URLs, the Link page).
 */
export type RouteKind = 'link-token' | 'account' | 'admin' | 'public';

interface RequestState {
  account: LinkedAccount | undefined;
  session: LinkSession | undefined;
  /** Index of the company in `account.companies` (Company-Id), 0 by default. */
  company: number;
  /** Body-level faults to apply (truncated JSON, lying pagination, ...). */
  faults: Fault[];
  /** A replay of an async request: not counted against rate limits again. */
  internal: boolean;
}

declare module 'fastify' {
  interface FastifyRequest {
    svc: RequestState;
  }
  interface FastifyContextConfig {
    kind?: RouteKind;
  }
}

export function newRequestState(): RequestState {
  return { account: undefined, session: undefined, company: 0, faults: [], internal: false };
}

/** The account of an authenticated `account` route (the pipeline guarantees it). */
export function accountOf(state: RequestState): LinkedAccount {
  if (!state.account) throw new Error('route reached without an account');
  return state.account;
}
