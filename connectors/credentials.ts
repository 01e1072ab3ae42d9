// Whether the upstream still takes an account's token. One stream's 401 may be about that list alone;
// the account is `credentials_refused` only once a cheap call (`GET /link/account`) is refused too, and
// `unlinked` when the upstream says the account was unlinked. The sync, the probe and the API's
// forwards ask here, so every such change is judged the same way and made once.
import { z } from 'zod';
import { UpstreamAuthError } from '../lib/errors.ts';
import type { AccountStatus, AccountStore } from '../mirror/control/accounts.ts';
import type { UpstreamClient } from './upstream-client.ts';

/** What happens around an account when its status changes (schedules, probe, purge): the Temporal side, passed in by bin/. */
export interface AccountLifecycle {
  credentialsRefused(accountId: string): Promise<void>;
  relinked(accountId: string): Promise<void>;
  unlinked(accountId: string): Promise<void>;
}

type CredentialsVerdict =
  | { refused: false }
  /** `unlinked`: the upstream says the account itself is gone, not only this token. */
  | { refused: true; unlinked: boolean; reason: string };

/**
 * Whether an upstream refusal says the account was unlinked at the source (rather than its token
 * revoked or expired). The contract does not show the upstream's error codes: its words decide.
 */
function refusalSaysUnlinked(error: UpstreamAuthError): boolean {
  return /\bunlinked\b|\bdisconnected\b/i.test(error.message);
}

const linkedAccountAnswer = z.looseObject({ status: z.string().optional() });

export class AccountCredentials {
  /** Checks in flight, per account and token: streams refused at once share one upstream call. */
  private readonly inFlight = new Map<string, Promise<CredentialsVerdict>>();

  constructor(
    private readonly deps: {
      upstream: UpstreamClient;
      accounts: Pick<AccountStore, 'token' | 'tokenHash' | 'setStatus' | 'status' | 'refuseToken'>;
      lifecycle?: AccountLifecycle | undefined;
    },
  ) {}

  /**
   * Asks the upstream once whether it takes the token (the account's current one unless named), and
   * records what a refusal means: the token refused, and the account `credentials_refused` (its current
   * token) or `unlinked`. Transient trouble (5xx, timeouts) is thrown: it proves nothing either way.
   */
  confirm(accountId: string, token?: string): Promise<CredentialsVerdict> {
    const key = `${accountId}|${token === undefined ? '' : this.deps.accounts.tokenHash(token)}`;
    let check = this.inFlight.get(key);
    if (!check) {
      check = this.check(accountId, token).finally(() => this.inFlight.delete(key));
      this.inFlight.set(key, check);
    }
    return check;
  }

  private async check(accountId: string, token: string | undefined): Promise<CredentialsVerdict> {
    const current = await this.deps.accounts.token(accountId);
    const sent = token ?? current;
    try {
      await this.deps.upstream.request(
        { method: 'GET', path: '/link/account', accountToken: sent, budget: { account: accountId }, what: 'linked account (credentials check)' },
        linkedAccountAnswer,
      );
      return { refused: false };
    } catch (error) {
      if (!(error instanceof UpstreamAuthError) || error.upstreamStatus !== 401) throw error;
      const unlinked = refusalSaysUnlinked(error);
      const reason = error.message;
      // An earlier token refused alone changes nothing about the account: its current token decides.
      const to: AccountStatus | undefined = unlinked ? 'unlinked' : sent === current ? 'credentials_refused' : undefined;
      if (to === undefined) await this.deps.accounts.refuseToken(sent);
      else {
        const from: AccountStatus[] = to === 'unlinked' ? ['linked', 'credentials_refused'] : ['linked'];
        const moved = await this.deps.accounts.setStatus(accountId, { to, from, reason, refusedToken: sent });
        if (moved && this.deps.lifecycle)
          await (to === 'unlinked' ? this.deps.lifecycle.unlinked(accountId) : this.deps.lifecycle.credentialsRefused(accountId));
      }
      return { refused: true, unlinked, reason };
    }
  }

  /**
   * A probe of an account whose credentials were refused: when the upstream takes its token again, the
   * account is linked again (an event says so) and resumes. Returns the account's status after it.
   */
  async probe(accountId: string): Promise<AccountStatus> {
    const { status } = await this.deps.accounts.status(accountId);
    if (status !== 'credentials_refused') return status;
    const verdict = await this.confirm(accountId);
    if (verdict.refused) return verdict.unlinked ? 'unlinked' : 'credentials_refused';
    const moved = await this.deps.accounts.setStatus(accountId, {
      to: 'linked',
      from: ['credentials_refused'],
      reason: 'the upstream takes the account token again',
    });
    if (moved && this.deps.lifecycle) await this.deps.lifecycle.relinked(accountId);
    return 'linked';
  }
}
