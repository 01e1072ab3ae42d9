// Link sessions created through the mirror: found by a keyed hash of their secret (never the secret
// itself), with their account, scopes and expiry. The rules for using one are api/sessions.ts's.
import type { PrismaClient } from '../db/prisma.ts';

interface LinkSessionRow {
  id: string;
  accountId: string;
  scopes: string[];
  expiresAt: Date;
}

interface LinkSessionInput {
  id: string;
  accountId: string;
  secretHash: string;
  name: string;
  scopes: string[];
  expiresAt: Date;
}

/** The session whose secret has this keyed hash, if the mirror recorded one. */
export async function findLinkSession(prisma: PrismaClient, secretHash: string): Promise<LinkSessionRow | null> {
  return prisma.linkSession.findUnique({ where: { secretHash }, select: { id: true, accountId: true, scopes: true, expiresAt: true } });
}

/** Records (or re-records) a session the upstream created. */
export async function saveLinkSession(prisma: PrismaClient, session: LinkSessionInput): Promise<void> {
  const { id, ...data } = session;
  await prisma.linkSession.upsert({ where: { id }, create: { id, ...data }, update: data });
}

/** Moves a session's recorded expiry (an extend or expire, here or upstream); only the account's own session. */
export async function setLinkSessionExpiry(prisma: PrismaClient, session: { id: string; accountId: string; expiresAt: Date }): Promise<void> {
  await prisma.linkSession.updateMany({ where: { id: session.id, accountId: session.accountId }, data: { expiresAt: session.expiresAt } });
}
