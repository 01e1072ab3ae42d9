// Linked accounts: registration (token encrypted at rest, found by a keyed hash), lookup, unlink.
import { decryptSecret, encryptSecret, keyedHash } from '../lib/crypto.ts';
import { NotFoundError } from '../lib/errors.ts';
import type { PrismaClient } from './prisma.ts';

export interface AccountKeys {
  /** AES-256-GCM key for tokens at rest. */
  encryptionKey: Buffer;
  /** HMAC key for token lookups. */
  hashKey: Buffer;
}

export interface LinkedAccountInput {
  referenceId: string;
  accountToken: string;
  sourceSystem: { slug: string; name: string };
  linkedCompany?: unknown;
  linkedUser?: unknown;
  status?: string;
}

export interface AccountSummary {
  id: string;
  referenceId: string;
  sourceSystem: string;
  sourceSystemName: string;
  status: string;
}

export class AccountStore {
  constructor(
    private readonly prisma: PrismaClient,
    private readonly keys: AccountKeys,
  ) {}

  tokenHash(accountToken: string): string {
    return keyedHash(this.keys.hashKey, accountToken);
  }

  /** Registers (or re-registers) an account by its token; the same token always maps to the same account. */
  async register(input: LinkedAccountInput): Promise<AccountSummary> {
    const tokenHash = this.tokenHash(input.accountToken);
    const data = {
      referenceId: input.referenceId,
      sourceSystem: input.sourceSystem.slug,
      sourceSystemName: input.sourceSystem.name,
      linkedCompany: (input.linkedCompany ?? undefined),
      linkedUser: (input.linkedUser ?? undefined),
      tokenCiphertext: new Uint8Array(encryptSecret(this.keys.encryptionKey, input.accountToken)),
      status: input.status ?? 'linked',
      unlinkedAt: null,
    };
    // Re-linking the same user (same reference id and source system) keeps the account and its data.
    const existing =
      (await this.prisma.linkedAccount.findUnique({ where: { tokenHash } })) ??
      (await this.prisma.linkedAccount.findFirst({ where: { referenceId: input.referenceId, sourceSystem: input.sourceSystem.slug }, orderBy: { createdAt: 'asc' } }));
    const row = existing
      ? await this.prisma.linkedAccount.update({ where: { id: existing.id }, data: { ...data, tokenHash } })
      : await this.prisma.linkedAccount.create({ data: { ...data, tokenHash } });
    return summary(row);
  }

  async get(id: string): Promise<AccountSummary> {
    const row = await this.prisma.linkedAccount.findUnique({ where: { id } });
    if (!row) throw new NotFoundError(`No linked account ${id}`);
    return summary(row);
  }

  async findByToken(accountToken: string): Promise<AccountSummary | undefined> {
    const row = await this.prisma.linkedAccount.findUnique({ where: { tokenHash: this.tokenHash(accountToken) } });
    return row && row.status === 'linked' ? summary(row) : undefined;
  }

  /** The upstream token of an account, decrypted for one call. Never log it. */
  async token(id: string): Promise<string> {
    const row = await this.prisma.linkedAccount.findUnique({ where: { id }, select: { tokenCiphertext: true } });
    if (!row) throw new NotFoundError(`No linked account ${id}`);
    return decryptSecret(this.keys.encryptionKey, row.tokenCiphertext);
  }

  async list(): Promise<AccountSummary[]> {
    const rows = await this.prisma.linkedAccount.findMany({ orderBy: { createdAt: 'asc' } });
    return rows.map(summary);
  }

  async unlink(id: string): Promise<void> {
    await this.prisma.linkedAccount.update({ where: { id }, data: { status: 'unlinked', unlinkedAt: new Date() } });
  }
}

function summary(row: { id: string; referenceId: string; sourceSystem: string; sourceSystemName: string; status: string }): AccountSummary {
  return { id: row.id, referenceId: row.referenceId, sourceSystem: row.sourceSystem, sourceSystemName: row.sourceSystemName, status: row.status };
}
