// Linked accounts and the short-lived tokens that lead to them (link token -> public token ->
// account token). Tokens are random; the data an account sees derives from reference id + source
// system, so re-linking the same pair sees the same ids and a new reference id sees new ones. A
// `login` (admin API only) stands for another person signing in under the same reference id: another
// user and company in the source system, with other data.
import { randomBytes, randomUUID } from 'node:crypto';
import { BadRequestError } from '../../lib/errors.ts';
import type { Dataset } from '../data/dataset.ts';
import { Rng } from '../data/random.ts';
import { companyWords, companySuffixes, firstNames, lastNames } from '../data/vocabulary.ts';
import type { SourceSystemProfile } from '../source-systems/profiles.ts';

interface Company {
  id: string;
  source_id: string;
  name: string;
}

export interface LinkedAccount {
  /** Internal id, used in stats and admin answers instead of the secret token. */
  id: string;
  token: string;
  referenceId: string;
  profile: SourceSystemProfile;
  /** Data key: same reference id + source system -> same data. */
  key: string;
  /** Index 0 is the linked company; cross-company systems grant a few more. */
  companies: Company[];
  user: { id: string; source_id: string; name: string; email: string };
  linkedAt: string;
}

interface PendingToken {
  referenceId: string;
  slug?: string;
  /** Who signed in on the Link page; unset is the reference id's usual user. */
  login?: string;
  expiresAt: number;
}

/** Why the upstream no longer takes a token: revoked or expired by the source system, or its account unlinked. */
type TokenRefusal = 'revoked' | 'expired' | 'unlinked';

/** What the upstream answers (401) to a token it no longer takes, by why. */
export const refusalMessages: Record<TokenRefusal, string> = {
  revoked: 'Invalid Account-Token: the token was revoked',
  expired: 'Invalid Account-Token: the token has expired',
  unlinked: 'Invalid Account-Token: the linked account was unlinked',
};

const LINK_TOKEN_TTL_MS = 30 * 60_000;
const PUBLIC_TOKEN_TTL_MS = 10 * 60_000;

export class AccountRegistry {
  private readonly linkTokens = new Map<string, PendingToken>();
  private readonly publicTokens = new Map<string, PendingToken & { slug: string }>();
  private readonly byToken = new Map<string, LinkedAccount>();
  private readonly byId = new Map<string, LinkedAccount>();
  /** Tokens the upstream took once and refuses now, with why (an unknown token is simply invalid). */
  private readonly refused = new Map<string, TokenRefusal>();
  private readonly refusedAccounts = new Map<string, LinkedAccount>();

  constructor(private readonly dataset: Dataset) {}

  createLinkToken(referenceId: string): string {
    const token = `link-sandbox-${randomUUID()}`;
    this.linkTokens.set(token, { referenceId, expiresAt: Date.now() + LINK_TOKEN_TTL_MS });
    return token;
  }

  /** Peeks at a link token without spending it (the Link page shows its form first). */
  peekLinkToken(token: string): PendingToken | undefined {
    const t = this.linkTokens.get(token);
    return t && t.expiresAt > Date.now() ? t : undefined;
  }

  /** What the Link page yields after the user signs in: spends the link token. */
  mintPublicToken(linkToken: string, profile: SourceSystemProfile, login?: string): string {
    const pending = this.linkTokens.get(linkToken);
    this.linkTokens.delete(linkToken);
    if (!pending || pending.expiresAt <= Date.now()) throw new BadRequestError('Invalid, used or expired link_token');
    const token = `public-sandbox-${randomUUID()}`;
    this.publicTokens.set(token, {
      referenceId: pending.referenceId,
      slug: profile.slug,
      ...(login ? { login } : {}),
      expiresAt: Date.now() + PUBLIC_TOKEN_TTL_MS,
    });
    return token;
  }

  exchange(publicToken: string, profileOf: (slug: string) => SourceSystemProfile | undefined): LinkedAccount {
    const pending = this.publicTokens.get(publicToken);
    this.publicTokens.delete(publicToken);
    if (!pending || pending.expiresAt <= Date.now()) throw new BadRequestError('Invalid, used or expired public_token');
    const profile = profileOf(pending.slug)!;
    const key = pending.login ? `${pending.referenceId}|${profile.slug}|login=${pending.login}` : `${pending.referenceId}|${profile.slug}`;
    const data = { key, profile };
    const companyCount = profile.crossCompany ? 3 : 1;
    const companies: Company[] = [];
    for (let c = 0; c < companyCount; c++) {
      const rng = new Rng(`${this.dataset.seed}|${key}|company|${c}`);
      companies.push({
        id: this.dataset.idOf(data, 'companies', c),
        source_id: String(4_000_000 + rng.int(0, 999_999)),
        name: `${rng.pick(companyWords)} ${rng.pick(companySuffixes)} ${c === 0 ? 'Inc.' : 'Holdings'}`,
      });
    }
    const rng = new Rng(`${this.dataset.seed}|${key}|user`);
    const first = rng.pick(firstNames);
    const last = rng.pick(lastNames);
    const account: LinkedAccount = {
      id: randomUUID(),
      // 64 URL-safe characters: long, random, never derivable from the reference id.
      token: randomBytes(48).toString('base64url'),
      referenceId: pending.referenceId,
      profile,
      key,
      companies,
      user: {
        id: this.dataset.idOf(data, 'users', 0),
        source_id: String(7_000_000 + rng.int(0, 999_999)),
        name: `${first} ${last}`,
        email: `${first}.${last}@example.com`.toLowerCase(),
      },
      linkedAt: new Date().toISOString(),
    };
    this.byToken.set(account.token, account);
    this.byId.set(account.id, account);
    return account;
  }

  byAccountToken(token: string): LinkedAccount | undefined {
    return this.byToken.get(token);
  }

  byAccountId(id: string): LinkedAccount | undefined {
    return this.byId.get(id);
  }

  /** Why a token that was once valid is refused now; undefined for a valid or never-issued one. */
  refusalOf(token: string): TokenRefusal | undefined {
    return this.refused.get(token);
  }

  /** The account a refused token belonged to (its requests still count in the account's stats). */
  refusedAccountOf(token: string): LinkedAccount | undefined {
    return this.refusedAccounts.get(token);
  }

  /**
   * The source system stops taking an account's token (revoked or expired) or the account is unlinked
   * there. The account's data stays, so a re-link under the same reference id sees the same records;
   * other accounts, other links of the same reference id included, keep working.
   */
  refuse(token: string, why: TokenRefusal): LinkedAccount | undefined {
    const account = this.byToken.get(token);
    if (!account) return undefined;
    this.byToken.delete(token);
    this.byId.delete(account.id);
    this.refused.set(token, why);
    this.refusedAccounts.set(token, account);
    return account;
  }

  /** Accounts that see the same source data (same reference id and source system). */
  sharingData(key: string): LinkedAccount[] {
    return [...this.byToken.values()].filter((a) => a.key === key);
  }

  all(): LinkedAccount[] {
    return [...this.byToken.values()];
  }
}

/** The linked account object of the contract (2.3). */
export function linkedAccountView(a: LinkedAccount) {
  const company = a.companies[0]!;
  return {
    reference_id: a.referenceId,
    account_token: a.token,
    status: 'linked',
    source_system: { slug: a.profile.slug, name: a.profile.name, supports_cross_account_uuid: a.profile.supportsCrossAccountUuid },
    linked_company: { id: company.id, source_id: company.source_id, name: company.name },
    linked_user: a.user,
  };
}
