// The mirror's own webhook subscriptions: what a subscriber asked for, its sealed Authorization
// header, and how far delivery got (a cursor into the change feed, counts, the last failure).
import type { PrismaClient } from '../db/prisma.ts';

export interface SubscriptionRow {
  id: string;
  accountId: string;
  callbackUrl: string;
  /** The subscriber's Authorization header, sealed with MIRROR_ENCRYPTION_KEY. */
  authorizationCiphertext: Uint8Array<ArrayBuffer> | null;
  event: string;
  type: string;
  projectId: string | null;
  cursorAt: Date;
  cursorKey: string;
  delivered: number;
  failures: number;
  lastError: string | null;
  lastDeliveredAt: Date | null;
}

type NewSubscription = Pick<SubscriptionRow, 'id' | 'accountId' | 'callbackUrl' | 'authorizationCiphertext' | 'event' | 'type' | 'projectId'>;

export async function createSubscription(prisma: PrismaClient, subscription: NewSubscription): Promise<SubscriptionRow> {
  return prisma.subscription.create({ data: subscription });
}

/** An account's subscriptions, oldest first. */
export async function subscriptionsOf(prisma: PrismaClient, accountId: string): Promise<SubscriptionRow[]> {
  return prisma.subscription.findMany({ where: { accountId }, orderBy: { createdAt: 'asc' } });
}

/** A subscription by id, whichever account it belongs to (callers check the account). */
export async function findSubscription(prisma: PrismaClient, id: string): Promise<SubscriptionRow | null> {
  return prisma.subscription.findUnique({ where: { id } });
}

export async function deleteSubscription(prisma: PrismaClient, id: string): Promise<void> {
  await prisma.subscription.delete({ where: { id } });
}

/** A delivery failed: counted, and what failed kept for the subscriber to read. */
export async function recordDeliveryFailure(prisma: PrismaClient, failure: { id: string; error: string }): Promise<void> {
  await prisma.subscription.update({ where: { id: failure.id }, data: { failures: { increment: 1 }, lastError: failure.error } });
}

/**
 * The cursor moves past a change (or a completed pass); `delivered` when it was sent to the subscriber
 * (a change of another event is passed over without a delivery).
 */
export async function advanceSubscription(prisma: PrismaClient, step: { id: string; cursor: { at: Date; key: string }; delivered: boolean }): Promise<void> {
  await prisma.subscription.update({
    where: { id: step.id },
    data: {
      cursorAt: step.cursor.at,
      cursorKey: step.cursor.key,
      ...(step.delivered ? { delivered: { increment: 1 }, lastDeliveredAt: new Date(), lastError: null } : {}),
    },
  });
}
