// What the mirror keeps sealed with its keys (account tokens and their lookup hashes, subscribers'
// Authorization headers), read and rewritten together by `mirror rekey` after a key changed.
import type { PrismaClient } from '../db/prisma.ts';

interface SealedSecrets {
  accounts: { id: string; tokenCiphertext: Uint8Array<ArrayBuffer>; tokenHash: string }[];
  /** Every token each account was linked with (the current one is also in `accounts`). */
  tokens: { accountId: string; tokenCiphertext: Uint8Array<ArrayBuffer>; tokenHash: string }[];
  /** Subscriptions with an Authorization header only. */
  subscriptions: { id: string; authorizationCiphertext: Uint8Array<ArrayBuffer> }[];
}

export async function sealedSecrets(prisma: PrismaClient): Promise<SealedSecrets> {
  const accounts = await prisma.linkedAccount.findMany({ select: { id: true, tokenCiphertext: true, tokenHash: true } });
  const tokens = await prisma.accountToken.findMany({ select: { accountId: true, tokenCiphertext: true, tokenHash: true } });
  const subscriptions = await prisma.subscription.findMany({
    where: { authorizationCiphertext: { not: null } },
    select: { id: true, authorizationCiphertext: true },
  });
  return {
    accounts,
    tokens,
    subscriptions: subscriptions.flatMap((s) => (s.authorizationCiphertext ? [{ id: s.id, authorizationCiphertext: s.authorizationCiphertext }] : [])),
  };
}

/**
 * Writes every re-sealed secret in one transaction: all of them or none. A kept token is replaced by
 * its re-sealed row (`was`: the hash it had), since its hash is its key.
 */
export async function resealSecrets(
  prisma: PrismaClient,
  sealed: Omit<SealedSecrets, 'tokens'> & { tokens: (SealedSecrets['tokens'][number] & { was: string })[] },
): Promise<void> {
  await prisma.$transaction([
    ...sealed.tokens.map((t) =>
      prisma.accountToken.update({ where: { tokenHash: t.was }, data: { tokenCiphertext: t.tokenCiphertext, tokenHash: t.tokenHash } }),
    ),
    ...sealed.accounts.map((a) => prisma.linkedAccount.update({ where: { id: a.id }, data: { tokenCiphertext: a.tokenCiphertext, tokenHash: a.tokenHash } })),
    ...sealed.subscriptions.map((s) => prisma.subscription.update({ where: { id: s.id }, data: { authorizationCiphertext: s.authorizationCiphertext } })),
  ]);
}
