// What the mirror keeps sealed with its keys (account tokens and their lookup hashes, subscribers'
// Authorization headers), read and rewritten together by `mirror rekey` after a key changed.
import type { PrismaClient } from '../db/prisma.ts';

export interface SealedSecrets {
  accounts: { id: string; tokenCiphertext: Uint8Array<ArrayBuffer>; tokenHash: string }[];
  /** Subscriptions with an Authorization header only. */
  subscriptions: { id: string; authorizationCiphertext: Uint8Array<ArrayBuffer> }[];
}

export async function sealedSecrets(prisma: PrismaClient): Promise<SealedSecrets> {
  const accounts = await prisma.linkedAccount.findMany({ select: { id: true, tokenCiphertext: true, tokenHash: true } });
  const subscriptions = await prisma.subscription.findMany({
    where: { authorizationCiphertext: { not: null } },
    select: { id: true, authorizationCiphertext: true },
  });
  return {
    accounts,
    subscriptions: subscriptions.flatMap((s) => (s.authorizationCiphertext ? [{ id: s.id, authorizationCiphertext: s.authorizationCiphertext }] : [])),
  };
}

/** Writes every re-sealed secret in one transaction: all of them or none. */
export async function resealSecrets(prisma: PrismaClient, sealed: SealedSecrets): Promise<void> {
  await prisma.$transaction([
    ...sealed.accounts.map((a) => prisma.linkedAccount.update({ where: { id: a.id }, data: { tokenCiphertext: a.tokenCiphertext, tokenHash: a.tokenHash } })),
    ...sealed.subscriptions.map((s) => prisma.subscription.update({ where: { id: s.id }, data: { authorizationCiphertext: s.authorizationCiphertext } })),
  ]);
}
