// Outbound webhooks: delivers the mirror's changes to a subscription in order, from its cursor on,
// with the contract's event body and the subscriber's Authorization. The cursor advances only after
// a delivery succeeded (at-least-once); a failure is recorded and retried by Temporal with backoff.
// Every connection goes to an address checked as it is made (lib/address-guard.ts): the name is
// resolved again, so a callback that has come to point inside the network is refused. Redirects
// are not followed. The subscriber sees what failed in words; the socket error goes to the log only.
import { isIP } from 'node:net';
// Not the upstream: the subscribers' own callbacks, through a dispatcher that checks every address
// (so this file is the lint walls' one exception to "undici in connectors/ only").
import { Agent, buildConnector, request } from 'undici';
import { createCallbackGuard, type CallbackGuard, type CallbackPolicy } from '../lib/address-guard.ts';
import { decryptSecret } from '../lib/crypto.ts';
import { UpstreamError } from '../lib/errors.ts';
import type { Logger } from '../lib/logger.ts';
import { resourceForWebhookType } from '../lib/resources.ts';
import { accountEventsSince, accountEventType } from '../mirror/control/account-events.ts';
import { changesSince, syncedSince } from '../mirror/reads/changes.ts';
import type { Pool } from '../mirror/db/pool.ts';
import type { PrismaClient } from '../mirror/db/prisma.ts';
import { advanceSubscription, findSubscription, recordDeliveryFailure } from '../mirror/control/subscriptions.ts';
import { asActivity } from './failures.ts';
import { withHeartbeat } from './heartbeat.ts';

export interface DeliveryDeps {
  pool: Pool;
  prisma: PrismaClient;
  encryptionKey: Buffer;
  /** Where callbacks may point: public addresses, plus MIRROR_CALLBACK_ALLOW (empty when unset). */
  callbacks?: CallbackPolicy;
  /** The raw cause of a failed delivery goes here, not to the subscriber. */
  logger?: Logger;
}

interface DeliveryResult {
  delivered: number;
  /** False when the subscription was deleted: the workflow ends. */
  active: boolean;
}

const timeoutMs = 10_000;

/** A subscriber's answer that is not a success (3xx included: redirects are not followed). */
class CallbackStatusError extends Error {
  constructor(readonly status: number) {
    super(`the callback answered ${status}${status >= 300 && status < 400 ? ' (redirects are not followed)' : ''}`);
  }
}

/**
 * What a subscriber is told about a failed delivery: the kind of failure, never the socket error
 * (its addresses, ports and codes would make the mirror a port scanner for whoever subscribes).
 */
function deliveryFailure(error: unknown): string {
  if (error instanceof CallbackStatusError) return error.message;
  const codes: string[] = [];
  const seen = new Set<unknown>();
  const walk = (e: unknown) => {
    if (!e || typeof e !== 'object' || seen.has(e)) return;
    seen.add(e);
    const code = (e as { code?: unknown }).code;
    if (typeof code === 'string') codes.push(code);
    walk((e as { cause?: unknown }).cause);
    const inner = (e as { errors?: unknown }).errors;
    if (Array.isArray(inner)) inner.forEach(walk);
  };
  walk(error);
  const has = (...wanted: string[]) => codes.some((c) => wanted.includes(c));
  if (has('ECALLBACKREFUSED')) return 'callback address not allowed';
  if (has('ENOTFOUND', 'EAI_AGAIN', 'EAI_FAIL', 'EAI_NONAME', 'ENODATA')) return 'could not resolve the callback host';
  if (has('UND_ERR_CONNECT_TIMEOUT')) return `timed out connecting to the callback host after ${timeoutMs / 1000} s`;
  if (has('UND_ERR_HEADERS_TIMEOUT', 'UND_ERR_BODY_TIMEOUT', 'ETIMEDOUT')) return `timed out after ${timeoutMs / 1000} s`;
  if (codes.some((c) => c.startsWith('ERR_TLS') || c.startsWith('ERR_SSL') || /CERT|SELF_SIGNED/.test(c)))
    return 'the TLS handshake with the callback host failed';
  if (has('ECONNRESET', 'EPIPE', 'UND_ERR_SOCKET', 'UND_ERR_CLOSED')) return 'the callback host closed the connection';
  if (has('ECONNREFUSED', 'EHOSTUNREACH', 'ENETUNREACH', 'EADDRNOTAVAIL')) return 'could not connect to the callback host';
  return 'delivery failed';
}

/**
 * The dispatcher of deliveries: names are resolved by the guard, which hands the connector only
 * allowed addresses; literal addresses (which `net.connect` does not look up) are checked here.
 */
function guardedAgent(guard: CallbackGuard): Agent {
  const connector = buildConnector({ timeout: timeoutMs, lookup: guard.lookup });
  return new Agent({
    connect(options, callback) {
      const host = options.hostname.replace(/^\[(.*)\]$/, '$1');
      if (isIP(host) && !guard.addressAllowed(host)) {
        callback(Object.assign(new Error('callback address not allowed'), { code: 'ECALLBACKREFUSED' }), null);
        return;
      }
      connector(options, callback);
    },
  });
}

export function createDeliveryActivities(deps: DeliveryDeps) {
  const dispatcher = guardedAgent(createCallbackGuard(deps.callbacks));
  return {
    async deliverChanges(input: { subscriptionId: string; limit?: number }): Promise<DeliveryResult> {
      // A slow subscriber makes a delivery long (up to 50 posts of `timeoutMs`): beats tell Temporal the
      // worker is alive, and their absence that it died (retried after the workflow's heartbeat timeout).
      return withHeartbeat(() =>
        asActivity(async () => {
          const sub = await findSubscription(deps.prisma, input.subscriptionId);
          if (!sub) return { delivered: 0, active: false };
          const def = sub.type === accountEventType ? undefined : resourceForWebhookType(sub.type);
          if (!def && sub.type !== accountEventType) return { delivered: 0, active: true };
          const authorization = sub.authorizationCiphertext ? decryptSecret(deps.encryptionKey, sub.authorizationCiphertext) : undefined;
          const post = async (body: unknown) => {
            try {
              const res = await request(sub.callbackUrl, {
                method: 'POST',
                headers: { 'content-type': 'application/json', ...(authorization ? { authorization } : {}) },
                body: JSON.stringify(body),
                headersTimeout: timeoutMs,
                bodyTimeout: timeoutMs,
                dispatcher,
              });
              await res.body.dump();
              if (res.statusCode >= 300) throw new CallbackStatusError(res.statusCode);
            } catch (error) {
              const failure = deliveryFailure(error);
              deps.logger?.warn(
                { subscription: sub.id, failure, err: (error as Error).message, code: (error as { code?: unknown }).code },
                'delivery to a subscriber failed',
              );
              await recordDeliveryFailure(deps.prisma, { id: sub.id, error: `${new Date().toISOString()} ${failure}` });
              // Retryable: Temporal retries the activity with backoff until the subscriber is back.
              throw new UpstreamError(`Delivery to subscription ${sub.id} failed: ${failure}`);
            }
          };
          if (!def) {
            // The account's own events: its status changes and stalled passes, in order.
            const events = await accountEventsSince(deps.pool, {
              accountId: sub.accountId,
              event: sub.event,
              after: { at: sub.cursorAt, key: sub.cursorKey },
              limit: input.limit ?? 50,
            });
            for (const e of events) {
              await post({
                id: sub.id,
                source_id: sub.id,
                callback_url: sub.callbackUrl,
                event: e.event,
                target: sub.accountId,
                type: accountEventType,
                source_data: {
                  path: '/link/account',
                  content_type: 'application/json',
                  data: { event: e.event, reason: e.reason, at: e.at.toISOString(), ...e.stream },
                },
              });
              await advanceSubscription(deps.prisma, { id: sub.id, cursor: e.cursor, delivered: true });
            }
            return { delivered: events.length, active: true };
          }
          const scopePrefix = sub.projectId ? `project=${sub.projectId}` : undefined;
          if (sub.event === 'SYNCED') {
            // The subscription's cursor follows completed passes (sync_runs) instead of records.
            const passes = await syncedSince(deps.pool, {
              accountId: sub.accountId,
              resource: def.name,
              scopePrefix,
              after: { at: sub.cursorAt, key: sub.cursorKey },
              limit: input.limit ?? 50,
            });
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
                  data: {
                    resource: def.name,
                    scope: pass.scope,
                    mode: pass.mode,
                    pages: pass.pages,
                    added: pass.added,
                    updated: pass.updated,
                    unchanged: pass.unchanged,
                    deleted: pass.deleted,
                    finished_at: pass.finishedAt.toISOString(),
                  },
                },
              });
              await advanceSubscription(deps.prisma, { id: sub.id, cursor: pass.cursor, delivered: true });
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
            await advanceSubscription(deps.prisma, { id: sub.id, cursor: change.cursor, delivered: sub.event === change.event || sub.event === '*' });
          }
          return { delivered, active: true };
        }),
      );
    },
  };
}

export type DeliveryActivities = ReturnType<typeof createDeliveryActivities>;
