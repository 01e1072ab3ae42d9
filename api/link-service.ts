// Linking accounts through the mirror: the token exchange is forwarded upstream, the account is
// registered (token encrypted at rest) and its first full sync starts at once. Accounts linked
// before the mirror was adopted are adopted by registering their existing token.
import type { UpstreamClient } from '../connectors/upstream-client.ts';
import { exchangePublicToken } from '../connectors/operations.ts';
import type { LinkedAccountObject } from '../connectors/schemas.ts';
import type { AccountStore, AccountSummary } from '../mirror/accounts.ts';
import type { SyncControl } from './sync-control.ts';

export interface LinkDeps {
  upstream: UpstreamClient;
  accounts: AccountStore;
  sync?: SyncControl;
}

export async function linkWithPublicToken(deps: LinkDeps, publicToken: string): Promise<{ account: AccountSummary; linked: LinkedAccountObject }> {
  const linked = await exchangePublicToken(deps.upstream, publicToken);
  const account = await deps.accounts.register({
    referenceId: linked.reference_id,
    accountToken: linked.account_token,
    sourceSystem: linked.source_system,
    linkedCompany: linked.linked_company,
    linkedUser: linked.linked_user,
    status: linked.status,
  });
  if (deps.sync) await deps.sync.onLinked(account.id);
  return { account, linked };
}

/** Adopts an account linked before the mirror: its token is checked against the upstream first. */
export async function adoptAccountToken(deps: LinkDeps, accountToken: string): Promise<AccountSummary> {
  const res = await deps.upstream.request<Record<string, unknown>>({ method: 'GET', path: '/link/account', accountToken, what: 'linked account' });
  const body = res.body;
  const ss = (body.source_system ?? {}) as { slug?: string; name?: string };
  const account = await deps.accounts.register({
    referenceId: typeof body.reference_id === 'string' ? body.reference_id : '',
    accountToken,
    sourceSystem: { slug: ss.slug ?? 'unknown', name: ss.name ?? ss.slug ?? 'unknown' },
    linkedCompany: body.linked_company,
    linkedUser: body.linked_user,
  });
  if (deps.sync) await deps.sync.onLinked(account.id);
  return account;
}
