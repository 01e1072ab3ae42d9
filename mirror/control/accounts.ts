// Linked accounts: registration (tokens encrypted at rest, found by a keyed hash), the mirror API client
// each belongs to, lookup, their status over time (linked, credentials refused, unlinked: each change
// an event in account_events), unlink (which ends its link sessions).
import { decryptSecret, domainHash, encryptSecret, keyedHash } from '../../lib/crypto.ts';
import { ConflictError, NotFoundError } from '../../lib/errors.ts';
import type { PrismaClient } from '../db/prisma.ts';

interface AccountKeys {
  /** AES-256-GCM key for tokens at rest. */
  encryptionKey: Buffer;
  /** HMAC key for token lookups. */
  hashKey: Buffer;
}

interface AccountStoreOptions {
  /**
   * The configured MIRROR_CLIENT_ID. Accounts linked before owners were recorded (client_id null)
   * belong to it, and so do those the operator's own tools (CLI, demo) link without naming a client.
   */
  defaultClientId?: string;
}

interface LinkedAccountInput {
  referenceId: string;
  accountToken: string;
  sourceSystem: { slug: string; name: string };
  linkedCompany?: unknown;
  linkedUser?: unknown;
  status?: string;
  /** The mirror API client linking or adopting it; unset: the configured client. */
  clientId?: string;
}

/** An account's status: `linked`, `credentials_refused` (the upstream refuses its token) or `unlinked`. */
export type AccountStatus = 'linked' | 'credentials_refused' | 'unlinked';

/** The events an account's status changes make (delivered to the application's account subscriptions). */
const accountEventOf = {
  credentials_refused: 'account.credentials_refused',
  linked: 'account.relinked',
  unlinked: 'account.unlinked',
} as const satisfies Record<AccountStatus, string>;

export interface AccountSummary {
  id: string;
  referenceId: string;
  sourceSystem: string;
  sourceSystemName: string;
  status: string;
  /** The mirror API client the account belongs to: its token works only with that client's credentials. */
  clientId: string | null;
  /** Why the account is in its status (the upstream's words for a refusal). */
  statusReason?: string | null;
}

/** What a registration did: a new account, or one the mirror knew (its data kept), relinked when it was not linked. */
export interface Registration extends AccountSummary {
  known: boolean;
  relinked: boolean;
}

interface AccountRow extends AccountSummary {
  tokenHash: string;
}

/** The lookup hash of an account token (its own hash domain: see lib/crypto.ts). */
export function accountTokenHash(hashKey: Buffer, accountToken: string): string {
  return domainHash(hashKey, 'accountToken', accountToken);
}

/** The `id` of a linked company or user object, when the upstream gave one. */
function idOf(v: unknown): string | null {
  const id = v && typeof v === 'object' ? (v as { id?: unknown }).id : undefined;
  return typeof id === 'string' && id !== '' ? id : null;
}

export class AccountStore {
  constructor(
    private readonly prisma: PrismaClient,
    private readonly keys: AccountKeys,
    private readonly options: AccountStoreOptions = {},
  ) {}

  tokenHash(accountToken: string): string {
    return accountTokenHash(this.keys.hashKey, accountToken);
  }

  /** The unprefixed hash stored before hash domains: still found, and replaced when found. */
  legacyTokenHash(accountToken: string): string {
    return keyedHash(this.keys.hashKey, accountToken);
  }

  /**
   * Registers (or re-registers) an account by its token, for one mirror client. The same token is
   * always the same account, and stays with the client that has it (another client gets a 409). A new
   * token re-uses an existing account, and its mirrored data, only when the same client links the same
   * reference id and source system again and the upstream names the same linked company and user as at
   * the first link; anything else is a new account.
   */
  async register(input: LinkedAccountInput): Promise<Registration> {
    const clientId = input.clientId ?? this.options.defaultClientId ?? null;
    const tokenHash = this.tokenHash(input.accountToken);
    const data = {
      referenceId: input.referenceId,
      sourceSystem: input.sourceSystem.slug,
      sourceSystemName: input.sourceSystem.name,
      linkedCompany: input.linkedCompany ?? undefined,
      linkedUser: input.linkedUser ?? undefined,
      tokenCiphertext: new Uint8Array(encryptSecret(this.keys.encryptionKey, input.accountToken)),
      tokenHash,
      clientId,
      status: input.status ?? 'linked',
      statusReason: null,
      unlinkedAt: null,
    };
    const tokenRow = { tokenHash, tokenCiphertext: data.tokenCiphertext, refusedAt: null };
    const linkedCompanyId = idOf(input.linkedCompany);
    const linkedUserId = idOf(input.linkedUser);
    const sameToken = await this.rowByToken(input.accountToken);
    if (sameToken) {
      if (this.ownerOf(sameToken) !== clientId) {
        throw new ConflictError(
          'This account token is linked through another client of the mirror, and stays with it: link the account again (POST /link/token/exchange) to get a token of your own.',
        );
      }
      // An account from before identities were recorded learns its identity from the upstream now.
      const row = await this.relink(sameToken, {
        ...data,
        ...(sameToken.linkedCompanyId === null && sameToken.linkedUserId === null ? { linkedCompanyId, linkedUserId } : {}),
      });
      await this.keepToken(row.id, tokenRow);
      return { ...this.summary(row), known: true, relinked: sameToken.status !== 'linked' };
    }
    const existing =
      clientId !== null && linkedCompanyId !== null && linkedUserId !== null
        ? await this.prisma.linkedAccount.findFirst({
            where: {
              referenceId: input.referenceId,
              sourceSystem: input.sourceSystem.slug,
              linkedCompanyId,
              linkedUserId,
              OR: [{ clientId }, ...(clientId === this.options.defaultClientId ? [{ clientId: null }] : [])],
            },
            orderBy: { createdAt: 'asc' },
          })
        : null;
    // The earlier tokens of a re-linked account stay its own: each keeps working while the upstream takes it.
    const row = existing ? await this.relink(existing, data) : await this.prisma.linkedAccount.create({ data: { ...data, linkedCompanyId, linkedUserId } });
    await this.keepToken(row.id, tokenRow);
    return { ...this.summary(row), known: existing !== null, relinked: existing !== null && existing.status !== 'linked' };
  }

  /** Updates a known account on a new link; one that was not linked is linked again, an event says so. */
  private async relink<T extends { id: string; status: string }>(row: T, data: Record<string, unknown> & { status: string }) {
    if (row.status === 'linked' || data.status !== 'linked') return this.prisma.linkedAccount.update({ where: { id: row.id }, data });
    const [updated] = await this.prisma.$transaction([
      this.prisma.linkedAccount.update({ where: { id: row.id }, data: { ...data, statusChangedAt: new Date(), purgedAt: null } }),
      this.prisma.accountEvent.create({ data: { accountId: row.id, event: accountEventOf.linked, reason: `linked again (was ${row.status})` } }),
    ]);
    return updated;
  }

  private async keepToken(accountId: string, token: { tokenHash: string; tokenCiphertext: Uint8Array<ArrayBuffer>; refusedAt: null }): Promise<void> {
    await this.prisma.accountToken.upsert({
      where: { tokenHash: token.tokenHash },
      create: { accountId, ...token },
      update: { accountId, tokenCiphertext: token.tokenCiphertext, refusedAt: null },
    });
  }

  /**
   * Moves an account to another status, only from the statuses named (a racing change wins once), and
   * records the change as an event. `refusedToken`: the token the upstream refused (the mirror refuses
   * it too from now on). Returns whether the status changed.
   */
  async setStatus(id: string, change: { to: AccountStatus; from: readonly AccountStatus[]; reason: string; refusedToken?: string }): Promise<boolean> {
    const now = new Date();
    const moved = await this.prisma.$transaction(async (tx) => {
      const r = await tx.linkedAccount.updateMany({
        where: { id, status: { in: [...change.from] } },
        data: { status: change.to, statusReason: change.reason, statusChangedAt: now, ...(change.to === 'unlinked' ? { unlinkedAt: now } : {}) },
      });
      if (r.count === 0) return false;
      await tx.accountEvent.create({ data: { accountId: id, event: accountEventOf[change.to], reason: change.reason } });
      if (change.to === 'unlinked') await tx.linkSession.deleteMany({ where: { accountId: id } });
      return true;
    });
    if (change.refusedToken !== undefined) await this.refuseToken(change.refusedToken);
    // Linked again because the upstream takes its token again: the mirror takes it again too.
    if (moved && change.to === 'linked') {
      const row = await this.prisma.linkedAccount.findUnique({ where: { id }, select: { tokenHash: true } });
      if (row) await this.prisma.accountToken.updateMany({ where: { accountId: id, tokenHash: row.tokenHash }, data: { refusedAt: null } });
    }
    return moved;
  }

  /** The upstream refused this token: the mirror refuses it too from now on (other tokens of its account are untouched). */
  async refuseToken(accountToken: string): Promise<void> {
    await this.prisma.accountToken.updateMany({ where: { tokenHash: this.tokenHash(accountToken), refusedAt: null }, data: { refusedAt: new Date() } });
  }

  /** The account's status and why, straight from the database (the sync asks before it asks the upstream). */
  async status(id: string): Promise<{ status: AccountStatus; reason: string | null }> {
    const row = await this.prisma.linkedAccount.findUnique({ where: { id }, select: { status: true, statusReason: true } });
    if (!row) throw new NotFoundError(`No linked account ${id}`);
    return { status: row.status as AccountStatus, reason: row.statusReason };
  }

  async get(id: string): Promise<AccountSummary> {
    const row = await this.prisma.linkedAccount.findUnique({ where: { id } });
    if (!row) throw new NotFoundError(`No linked account ${id}`);
    return this.summary(row);
  }

  /**
   * The account of a token (whichever client it belongs to: the caller checks `clientId`): any token the
   * account was linked with, until the upstream was seen refusing it or the account was unlinked.
   */
  async findByToken(accountToken: string): Promise<AccountSummary | undefined> {
    // The account's current token first (a row still under the legacy hash is upgraded on the way).
    const row = await this.rowByToken(accountToken);
    const kept = await this.prisma.accountToken.findUnique({ where: { tokenHash: this.tokenHash(accountToken) }, include: { account: true } });
    if (kept?.refusedAt) return undefined;
    if (row) return row.status === 'linked' ? this.summary(row) : undefined;
    return kept && kept.account.status !== 'unlinked' ? this.summary(kept.account) : undefined;
  }

  /** The upstream token of an account, decrypted for one call. Never log it. */
  async token(id: string): Promise<string> {
    const row = await this.prisma.linkedAccount.findUnique({ where: { id }, select: { tokenCiphertext: true } });
    if (!row) throw new NotFoundError(`No linked account ${id}`);
    return decryptSecret(this.keys.encryptionKey, row.tokenCiphertext);
  }

  async list(): Promise<AccountSummary[]> {
    const rows = await this.prisma.linkedAccount.findMany({ orderBy: { createdAt: 'asc' } });
    return rows.map((r) => this.summary(r));
  }

  /** Marks the account unlinked (an event says so) and ends its link sessions, in one transaction; returns how many sessions ended. */
  async unlink(id: string, reason = 'unlinked through the mirror'): Promise<{ sessionsEnded: number }> {
    const sessions = await this.prisma.linkSession.count({ where: { accountId: id } });
    const moved = await this.setStatus(id, { to: 'unlinked', from: ['linked', 'credentials_refused'], reason });
    if (!moved) await this.get(id);
    return { sessionsEnded: moved ? sessions : 0 };
  }

  /** The row of a token, by its hash; a row still under the legacy hash is moved to the new one. */
  private async rowByToken(accountToken: string) {
    const tokenHash = this.tokenHash(accountToken);
    const legacy = this.legacyTokenHash(accountToken);
    const rows = await this.prisma.linkedAccount.findMany({ where: { tokenHash: { in: [tokenHash, legacy] } }, take: 2 });
    const row = rows.find((r) => r.tokenHash === tokenHash) ?? rows[0];
    if (!row || row.tokenHash === tokenHash) return row;
    await this.prisma.linkedAccount.updateMany({ where: { id: row.id, tokenHash: legacy }, data: { tokenHash } });
    await this.prisma.accountToken.updateMany({ where: { accountId: row.id, tokenHash: legacy }, data: { tokenHash } });
    return { ...row, tokenHash };
  }

  private ownerOf(row: { clientId: string | null }): string | null {
    return row.clientId ?? this.options.defaultClientId ?? null;
  }

  private summary(row: AccountRow): AccountSummary {
    return {
      id: row.id,
      referenceId: row.referenceId,
      sourceSystem: row.sourceSystem,
      sourceSystemName: row.sourceSystemName,
      status: row.status,
      clientId: this.ownerOf(row),
      statusReason: row.statusReason ?? null,
    };
  }
}
