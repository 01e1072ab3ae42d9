// The mirror API's clients: their credentials, stored as the SHA-256 digest of the secret only.
import { sha256Hex } from '../../lib/crypto.ts';
import type { PrismaClient } from '../db/prisma.ts';

/** The stored digest of a client's secret; null when no such client is registered. */
export async function apiClientSecretHash(prisma: PrismaClient, clientId: string): Promise<string | null> {
  const row = await prisma.apiClient.findUnique({ where: { clientId }, select: { secretHash: true } });
  return row?.secretHash ?? null;
}

/** Registers (or rotates) an API client's credentials; only the secret's digest is stored. */
export async function upsertApiClient(prisma: PrismaClient, clientId: string, clientSecret: string, name = 'default'): Promise<void> {
  const secretHash = sha256Hex(clientSecret);
  await prisma.apiClient.upsert({ where: { clientId }, create: { clientId, secretHash, name }, update: { secretHash } });
}
