// Outbound webhooks: delivers the mirror's changes to a subscription in order, from its cursor on,
// with the contract's event body and the subscriber's Authorization. The cursor advances only after
// a delivery succeeded (at-least-once); a failure is recorded and retried by Temporal with backoff.
import { request } from 'undici';
import { decryptSecret } from '../lib/crypto.ts';
import { UpstreamError } from '../lib/errors.ts';
import { resourceForWebhookType } from '../lib/resources.ts';
import { changesSince, syncedSince } from '../mirror/changes.ts';
import type { Pool } from '../mirror/pool.ts';
import type { PrismaClient } from '../mirror/prisma.ts';
import { asActivity } from './failures.ts';

export interface DeliveryDeps {
  pool: Pool;
  prisma: PrismaClient;
  encryptionKey: Buffer;
}

export interface DeliveryResult {
  delivered: number;
  /** False when the subscription was deleted: the workflow ends. */
  active: boolean;
}

export function createDeliveryActivities(deps: DeliveryDeps) {
  return {
    async deliverChanges(input: { subscriptionId: string; limit?: number }): Promise<DeliveryResult> {
      return asActivity(async () => {
        const sub = await deps.prisma.subscription.findUnique({ where: { id: input.subscriptionId } });
        if (!sub) return { delivered: 0, active: false };
        const def = resourceForWebhookType(sub.type);
        if (!def) return { delivered: 0, active: true };
        const authorization = sub.authorizationCiphertext ? decryptSecret(deps.encryptionKey, sub.authorizationCiphertext) : undefined;
        const post = async (body: unknown) => {
          try {
            const res = await request(sub.callbackUrl, {
              method: 'POST',
              headers: { 'content-type': 'application/json', ...(authorization ? { authorization } : {}) },
              body: JSON.stringify(body),
              headersTimeout: 10_000,
              bodyTimeout: 10_000,
            });
            await res.body.dump();
            if (res.statusCode >= 300) throw new UpstreamError(`Subscriber answered ${res.statusCode}`, res.statusCode);
          } catch (error) {
            await deps.prisma.subscription.update({
              where: { id: sub.id },
              data: { failures: { increment: 1 }, lastError: `${new Date().toISOString()} ${(error as Error).message}`.slice(0, 500) },
            });
            // Retryable: Temporal retries the activity with backoff until the subscriber is back.
            throw new UpstreamError(`Delivery to subscription ${sub.id} failed: ${(error as Error).message}`, undefined, { cause: error });
          }
        };
        const scopePrefix = sub.projectId ? `project=${sub.projectId}` : undefined;
        if (sub.event === 'SYNCED') {
          // The subscription's cursor follows completed passes (sync_runs) instead of records.
          const passes = await syncedSince(deps.pool, { accountId: sub.accountId, resource: def.name, scopePrefix, after: { at: sub.cursorAt, key: sub.cursorKey }, limit: input.limit ?? 50 });
          for (const pass of passes) {
            const projectId = /^project=([^/]+)/.exec(pass.scope)?.[1];
            await post({
              id: sub.id,
              source_id: sub.id,
              callback_url: sub.callbackUrl,
              event: 'SYNCED',
              ...(projectId ? { project_id: projectId } : {}),
              target: `${sub.type}:*`,
              type: sub.type,
              source_data: {
                path: `/${def.name}`,
                content_type: 'application/json',
                data: { resource: def.name, scope: pass.scope, mode: pass.mode, pages: pass.pages, added: pass.added, updated: pass.updated, unchanged: pass.unchanged, deleted: pass.deleted, finished_at: pass.finishedAt.toISOString() },
              },
            });
            await deps.prisma.subscription.update({
              where: { id: sub.id },
              data: { cursorAt: pass.cursor.at, cursorKey: pass.cursor.key, delivered: { increment: 1 }, lastDeliveredAt: new Date(), lastError: null },
            });
          }
          return { delivered: passes.length, active: true };
        }
        const changes = await changesSince(deps.pool, {
          accountId: sub.accountId,
          resource: def.name,
          scopePrefix,
          after: { at: sub.cursorAt, key: sub.cursorKey },
          limit: input.limit ?? 50,
        });
        let delivered = 0;
        for (const change of changes) {
          if (sub.event === change.event || sub.event === '*') {
            const projectId = /^project=([^/]+)/.exec(change.scope)?.[1];
            const body = {
              id: sub.id,
              source_id: sub.id,
              callback_url: sub.callbackUrl,
              event: change.event,
              ...(projectId ? { project_id: projectId } : {}),
              target: change.id,
              type: sub.type,
              source_data: { path: `/${def.name}/${change.id}`, content_type: 'application/json', data: change.data },
            };
            await post(body);
            delivered++;
          }
          await deps.prisma.subscription.update({
            where: { id: sub.id },
            data: { cursorAt: change.cursor.at, cursorKey: change.cursor.key, ...(sub.event === change.event || sub.event === '*' ? { delivered: { increment: 1 }, lastDeliveredAt: new Date(), lastError: null } : {}) },
          });
        }
        return { delivered, active: true };
      });
    },
  };
}

export type DeliveryActivities = ReturnType<typeof createDeliveryActivities>;
