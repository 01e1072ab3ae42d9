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
import { resourceForWebhookType, type ResourceDef } from '../lib/resources.ts';
import { accountEventsSince, accountEventType } from '../mirror/control/account-events.ts';
import { changesSince, syncedSince } from '../mirror/reads/changes.ts';
import type { Pool } from '../mirror/db/pool.ts';
import type { PrismaClient } from '../mirror/db/prisma.ts';
import { advanceSubscription, findSubscription, recordDeliveryFailure, type SubscriptionRow } from '../mirror/control/subscriptions.ts';
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

/** Posts one event body to the subscription's callback; a failure is recorded on it and thrown (retryable). */
type Post = (body: ReturnType<typeof eventBody>) => Promise<void>;

function poster(deps: DeliveryDeps, dispatcher: Agent, sub: SubscriptionRow): Post {
  const authorization = sub.authorizationCiphertext ? decryptSecret(deps.encryptionKey, sub.authorizationCiphertext) : undefined;
  return async (body) => {
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
}

/** The contract's event body, as every kind of subscription is sent it. */
function eventBody(sub: SubscriptionRow, e: { event: string; scope?: string; target: string; type: string; path: string; data: unknown }) {
  const projectId = e.scope === undefined ? undefined : /^project=([^/]+)/.exec(e.scope)?.[1];
  return {
    id: sub.id,
    source_id: sub.id,
    callback_url: sub.callbackUrl,
    event: e.event,
    ...(projectId ? { project_id: projectId } : {}),
    target: e.target,
    type: e.type,
    source_data: { path: e.path, content_type: 'application/json' as const, data: e.data },
  };
}

/** What one round of a subscription delivers from: its cursor on, at most `limit` of them. */
interface Round {
  deps: DeliveryDeps;
  sub: SubscriptionRow;
  post: Post;
  limit: number;
}

/** What a round of a resource's subscription reads: the resource (in its project, if it names one) from its cursor on. */
function resourceSince(sub: SubscriptionRow, def: ResourceDef, limit: number) {
  const scopePrefix = sub.projectId ? `project=${sub.projectId}` : undefined;
  return { accountId: sub.accountId, resource: def.name, scopePrefix, after: { at: sub.cursorAt, key: sub.cursorKey }, limit };
}

/** The account's own events: its status changes and stalled passes, in order. */
async function deliverAccountEvents({ deps, sub, post, limit }: Round): Promise<DeliveryResult> {
  const events = await accountEventsSince(deps.pool, { accountId: sub.accountId, event: sub.event, after: { at: sub.cursorAt, key: sub.cursorKey }, limit });
  for (const e of events) {
    const data = { event: e.event, reason: e.reason, at: e.at.toISOString(), ...e.stream };
    await post(eventBody(sub, { event: e.event, target: sub.accountId, type: accountEventType, path: '/link/account', data }));
    await advanceSubscription(deps.prisma, { id: sub.id, cursor: e.cursor, delivered: true });
  }
  return { delivered: events.length, active: true };
}

/** Completed passes of the resource (sync_runs): the subscription's cursor follows them instead of records. */
async function deliverPasses({ deps, sub, post, limit }: Round, def: ResourceDef): Promise<DeliveryResult> {
  const passes = await syncedSince(deps.pool, resourceSince(sub, def, limit));
  for (const pass of passes) {
    const data = {
      resource: def.name,
      scope: pass.scope,
      mode: pass.mode,
      pages: pass.pages,
      added: pass.added,
      updated: pass.updated,
      unchanged: pass.unchanged,
      deleted: pass.deleted,
      finished_at: pass.finishedAt.toISOString(),
    };
    await post(eventBody(sub, { event: 'SYNCED', scope: pass.scope, target: `${sub.type}:*`, type: sub.type, path: `/${def.name}`, data }));
    await advanceSubscription(deps.prisma, { id: sub.id, cursor: pass.cursor, delivered: true });
  }
  return { delivered: passes.length, active: true };
}

/** The resource's changed records; the cursor passes the changes of other events without sending them. */
async function deliverRecordChanges({ deps, sub, post, limit }: Round, def: ResourceDef): Promise<DeliveryResult> {
  const changes = await changesSince(deps.pool, resourceSince(sub, def, limit));
  let delivered = 0;
  for (const change of changes) {
    const wanted = sub.event === change.event || sub.event === '*';
    if (wanted) {
      await post(
        eventBody(sub, { event: change.event, scope: change.scope, target: change.id, type: sub.type, path: `/${def.name}/${change.id}`, data: change.data }),
      );
      delivered++;
    }
    await advanceSubscription(deps.prisma, { id: sub.id, cursor: change.cursor, delivered: wanted });
  }
  return { delivered, active: true };
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
          const round: Round = { deps, sub, post: poster(deps, dispatcher, sub), limit: input.limit ?? 50 };
          if (!def) return deliverAccountEvents(round);
          return sub.event === 'SYNCED' ? deliverPasses(round, def) : deliverRecordChanges(round, def);
        }),
      );
    },
  };
}

export type DeliveryActivities = ReturnType<typeof createDeliveryActivities>;
