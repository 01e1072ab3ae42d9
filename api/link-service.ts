// Linking accounts through the mirror: the token exchange is forwarded upstream, the account is
// registered (token encrypted at rest) for the mirror client that linked it, and its first full sync
// starts at once. Accounts linked before the mirror was adopted are adopted by registering their
// existing token. Whether a re-link keeps an account's data is decided by AccountStore.register from
// what the upstream answers (its linked company and user), never from the caller's reference id alone.
import { z } from 'zod';
import type { UpstreamClient } from '../connectors/upstream-client.ts';
import { exchangePublicToken } from '../connectors/operations.ts';
import type { LinkedAccountObject } from '../connectors/schemas.ts';
import type { AccountStore, AccountSummary, Registration } from '../mirror/control/accounts.ts';
import type { SyncControl } from './sync-control.ts';

interface LinkDeps {
  upstream: UpstreamClient;
  accounts: AccountStore;
  sync?: SyncControl;
  /** The mirror API client linking (its Client-Id); unset: the configured MIRROR_CLIENT_ID (the CLI, the demo). */
  clientId?: string;
}

/** The linked account object of `GET /link/account` (contract 2.3, without the token). */
const linkedAccountAnswerSchema = z.looseObject({
  reference_id: z.string().optional(),
  status: z.string().optional(),
  source_system: z.looseObject({ slug: z.string().min(1), name: z.string().optional() }).optional(),
  linked_company: z.unknown().optional(),
  linked_user: z.unknown().optional(),
});

export async function linkWithPublicToken(deps: LinkDeps, publicToken: string): Promise<{ account: AccountSummary; linked: LinkedAccountObject }> {
  const linked = await exchangePublicToken(deps.upstream, publicToken);
  const account = await deps.accounts.register({
    referenceId: linked.reference_id,
    accountToken: linked.account_token,
    sourceSystem: linked.source_system,
    linkedCompany: linked.linked_company,
    linkedUser: linked.linked_user,
    status: linked.status,
    ...(deps.clientId === undefined ? {} : { clientId: deps.clientId }),
  });
  if (deps.sync) await resume(deps.sync, account);
  return { account, linked };
}

/**
 * Adopts an account linked before the mirror: its token is checked against the upstream first. A token
 * another client of the mirror already holds is refused (409): it stays with that client.
 */
export async function adoptAccountToken(deps: LinkDeps, accountToken: string): Promise<AccountSummary> {
  const res = await deps.upstream.request({ method: 'GET', path: '/link/account', accountToken, what: 'linked account' }, linkedAccountAnswerSchema);
  const body = res.body;
  const ss = body.source_system;
  const account = await deps.accounts.register({
    referenceId: body.reference_id ?? '',
    accountToken,
    sourceSystem: { slug: ss?.slug ?? 'unknown', name: ss?.name ?? ss?.slug ?? 'unknown' },
    linkedCompany: body.linked_company,
    linkedUser: body.linked_user,
    ...(deps.clientId === undefined ? {} : { clientId: deps.clientId }),
  });
  if (deps.sync) await resume(deps.sync, account);
  return account;
}

/** A new account gets its first full pass; a known one linked again resumes with an incremental pass. */
async function resume(sync: SyncControl, account: Registration): Promise<void> {
  if (account.known) await sync.relinked(account.id);
  else await sync.onLinked(account.id);
}
