// Linked accounts: registration (token encrypted at rest, found by a keyed hash), the mirror API client
// each belongs to, lookup, unlink (which ends its link sessions).
import { decryptSecret, domainHash, encryptSecret, keyedHash } from '../../lib/crypto.ts';
import { ConflictError, NotFoundError } from '../../lib/errors.ts';
import type { PrismaClient } from '../db/prisma.ts';

export interface AccountKeys {
  /** AES-256-GCM key for tokens at rest. */
  encryptionKey: Buffer;
  /** HMAC key for token lookups. */
  hashKey: Buffer;
}

export interface AccountStoreOptions {
  /**
   * The configured MIRROR_CLIENT_ID. Accounts linked before owners were recorded (client_id null)
   * belong to it, and so do those the operator's own tools (CLI, demo) link without naming a client.
   */
  defaultClientId?: string;
}

export interface LinkedAccountInput {
  referenceId: string;
  accountToken: string;
  sourceSystem: { slug: string; name: string };
  linkedCompany?: unknown;
  linkedUser?: unknown;
  status?: string;
  /** The mirror API client linking or adopting it; unset: the configured client. */
  clientId?: string;
}

export interface AccountSummary {
  id: string;
  referenceId: string;
  sourceSystem: string;
  sourceSystemName: string;
  status: string;
  /** The mirror API client the account belongs to: its token works only with that client's credentials. */
  clientId: string | null;
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
  async register(input: LinkedAccountInput): Promise<AccountSummary> {
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
      unlinkedAt: null,
    };
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
      const row = await this.prisma.linkedAccount.update({
        where: { id: sameToken.id },
        data: { ...data, ...(sameToken.linkedCompanyId === null && sameToken.linkedUserId === null ? { linkedCompanyId, linkedUserId } : {}) },
      });
      return this.summary(row);
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
    const row = existing
      ? await this.prisma.linkedAccount.update({ where: { id: existing.id }, data })
      : await this.prisma.linkedAccount.create({ data: { ...data, linkedCompanyId, linkedUserId } });
    return this.summary(row);
  }

  async get(id: string): Promise<AccountSummary> {
    const row = await this.prisma.linkedAccount.findUnique({ where: { id } });
    if (!row) throw new NotFoundError(`No linked account ${id}`);
    return this.summary(row);
  }

  /** The linked account of a token (whichever client it belongs to: the caller checks `clientId`). */
  async findByToken(accountToken: string): Promise<AccountSummary | undefined> {
    const row = await this.rowByToken(accountToken);
    return row && row.status === 'linked' ? this.summary(row) : undefined;
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

  /** Marks the account unlinked and ends its link sessions, in one transaction; returns how many sessions ended. */
  async unlink(id: string): Promise<{ sessionsEnded: number }> {
    const [, sessions] = await this.prisma.$transaction([
      this.prisma.linkedAccount.update({ where: { id }, data: { status: 'unlinked', unlinkedAt: new Date() } }),
      this.prisma.linkSession.deleteMany({ where: { accountId: id } }),
    ]);
    return { sessionsEnded: sessions.count };
  }

  /** The row of a token, by its hash; a row still under the legacy hash is moved to the new one. */
  private async rowByToken(accountToken: string) {
    const tokenHash = this.tokenHash(accountToken);
    const legacy = this.legacyTokenHash(accountToken);
    const rows = await this.prisma.linkedAccount.findMany({ where: { tokenHash: { in: [tokenHash, legacy] } }, take: 2 });
    const row = rows.find((r) => r.tokenHash === tokenHash) ?? rows[0];
    if (!row || row.tokenHash === tokenHash) return row;
    await this.prisma.linkedAccount.updateMany({ where: { id: row.id, tokenHash: legacy }, data: { tokenHash } });
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
    };
  }
}
