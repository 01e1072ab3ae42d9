// Webhooks the mirror registered upstream for its accounts: one per (event, type, project), with the
// keyed hash of the secret each delivery must present (api/routes/webhooks-inbound.ts checks it).
import type { PrismaClient } from '../db/prisma.ts';

interface WebhookRegistrationRow {
  id: string;
  accountId: string;
  /** The upstream's id of the webhook, to delete it there. */
  upstreamId: string | null;
  type: string;
  event: string;
  projectId: string | null;
  authorizationHash: string;
}

const columns = { id: true, accountId: true, upstreamId: true, type: true, event: true, projectId: true, authorizationHash: true } as const;

export async function webhookRegistrationsOf(prisma: PrismaClient, accountId: string): Promise<WebhookRegistrationRow[]> {
  return prisma.webhookRegistration.findMany({ where: { accountId }, select: columns });
}

/** A registration by its id (the path of its deliveries). */
export async function findWebhookRegistration(prisma: PrismaClient, id: string): Promise<WebhookRegistrationRow | null> {
  return prisma.webhookRegistration.findUnique({ where: { id }, select: columns });
}

export async function saveWebhookRegistration(prisma: PrismaClient, registration: WebhookRegistrationRow): Promise<void> {
  await prisma.webhookRegistration.create({ data: registration });
}

export async function deleteWebhookRegistration(prisma: PrismaClient, id: string): Promise<void> {
  await prisma.webhookRegistration.delete({ where: { id } });
}

/** Which of these accounts have registrations (whose secrets a new signing key no longer checks). */
export async function accountsWithWebhooks(prisma: PrismaClient, accountIds: readonly string[]): Promise<string[]> {
  const groups = await prisma.webhookRegistration.groupBy({ by: ['accountId'], where: { accountId: { in: [...accountIds] } } });
  return groups.map((g) => g.accountId);
}
