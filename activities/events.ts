// Event activities: registering upstream webhooks for an account, and applying the inbox. Each
// changed object is fetched from the upstream and upserted (an older fetch never overwrites a newer
// state); objects the upstream no longer has are marked deleted. A DELETE event is a claim, not a
// fact (anyone holding the registration's secret can send one): it is confirmed by the upstream's
// 404 before the record is marked deleted, and applied as an update if the object is still there.
import { Context } from '@temporalio/activity';
import { randomBytes, randomUUID } from 'node:crypto';
import pLimit from 'p-limit';
import { knownProfile, scopeKindIn } from '../connectors/source-systems/index.ts';
import { createWebhook, getObject } from '../connectors/operations.ts';
import { domainHash } from '../lib/crypto.ts';
import { UpstreamNotFoundError } from '../lib/errors.ts';
import { formatScope, resourceForWebhookType } from '../lib/resources.ts';
import { markApplied, pendingEvents, type PendingEvent } from '../mirror/streams/inbox.ts';
import { liveRecordIds } from '../mirror/streams/known-ids.ts';
import { markDeleted } from '../mirror/records/deletes.ts';
import { applyObjects } from '../mirror/records/object-writes.ts';
import type { StreamKey } from '../mirror/streams/streams.ts';
import type { PrismaClient } from '../mirror/db/prisma.ts';
import { saveWebhookRegistration, webhookRegistrationsOf } from '../mirror/control/webhook-registrations.ts';
import { asActivity } from './failures.ts';
import type { SyncDeps } from './sync.ts';

export interface EventDeps extends SyncDeps {
  prisma: PrismaClient;
  /** Base URL at which the upstream reaches the mirror's webhook receiver. */
  publicBaseUrl: string;
  hashKey: Buffer;
}

interface ApplyResult {
  applied: number;
  deleted: number;
  skipped: number;
  /** Types whose `target` was `<type>:*`: a pass over them is needed. */
  fullPassTypes: string[];
  more: boolean;
}

/** A service id as the contract gives every object (the receiver admits no other target). */
const serviceId = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

export function createEventActivities(deps: EventDeps) {
  const { pool, accounts, upstream } = deps;

  return {
    /** Registers CREATE/UPDATE/DELETE webhooks for every type the account's source system supports. */
    async registerWebhooks(input: { accountId: string }): Promise<{ registered: number }> {
      return asActivity(async () => {
        const account = await accounts.get(input.accountId);
        const profile = knownProfile(account.sourceSystem);
        if (!profile || profile.webhookTypes.length === 0) return { registered: 0 };
        const token = await accounts.token(input.accountId);
        const existing = await webhookRegistrationsOf(deps.prisma, input.accountId);
        const have = new Set(existing.map((r) => `${r.event}:${r.type}:${r.projectId ?? ''}`));
        let registered = 0;
        const projectIds: (string | undefined)[] = [];
        for (const type of profile.webhookTypes) {
          const def = resourceForWebhookType(type);
          if (!def) continue;
          const kind = scopeKindIn(profile, def.name, def.scope);
          if (kind === 'project') {
            if (projectIds.length === 0) {
              projectIds.push(...(await liveRecordIds(pool, { accountId: input.accountId, resource: 'projects', scope: '' })));
            }
          }
          const scopes = kind === 'project' ? projectIds : [undefined];
          for (const projectId of scopes) {
            for (const event of ['CREATE', 'UPDATE', 'DELETE'] as const) {
              if (have.has(`${event}:${type}:${projectId ?? ''}`)) continue;
              const id = randomUUID();
              const secret = randomBytes(24).toString('base64url');
              const created = await createWebhook(
                upstream,
                { accountToken: token, accountId: input.accountId, sourceSystem: profile.slug },
                {
                  callbackUrl: `${deps.publicBaseUrl.replace(/\/+$/, '')}/webhooks/inbound/${id}`,
                  authorizationHeader: secret,
                  event,
                  type,
                  projectId,
                },
              );
              await saveWebhookRegistration(deps.prisma, {
                id,
                accountId: input.accountId,
                upstreamId: created.id,
                type,
                event,
                projectId: projectId ?? null,
                authorizationHash: domainHash(deps.hashKey, 'webhookAuthorization', secret),
              });
              registered++;
            }
          }
        }
        return { registered };
      });
    },

    /**
     * Applies up to `limit` pending events, coalesced by object: the objects are fetched
     * concurrently (within the account's budget: every request goes through the governor), then
     * written in one statement per stream and marked applied in one per outcome. An object fetched
     * before a newer state was written never overwrites it (the record write's guard).
     */
    async applyInbox(input: { accountId: string; limit?: number; concurrency?: number; drainMs?: number }): Promise<ApplyResult> {
      return asActivity(async () => {
        // Drains the inbox: events that landed while a batch was applied are taken up at once, not
        // after a round trip through the workflow (100-180 ms a batch on a busy machine). Returns
        // when the inbox is empty, when a pass is requested, or after `drainMs` (more: true).
        const limit = input.limit ?? 500;
        const deadline = Date.now() + (input.drainMs ?? 20_000);
        const total: ApplyResult = { applied: 0, deleted: 0, skipped: 0, fullPassTypes: [], more: false };
        for (;;) {
          const t0 = performance.now();
          const events = await pendingEvents(pool, input.accountId, limit);
          if (events.length === 0) return total;
          const r = await applyBatch(events, t0);
          total.applied += r.applied;
          total.deleted += r.deleted;
          total.skipped += r.skipped;
          total.fullPassTypes.push(...r.fullPassTypes);
          activityHeartbeat();
          // A worker shutting down cancels its activities: hand what is left to the next run.
          if (total.fullPassTypes.length > 0 || Date.now() >= deadline || activityCancelled()) return { ...total, more: true };
        }
      });

      async function applyBatch(events: PendingEvent[], t0: number): Promise<ApplyResult> {
        const tRead = performance.now();
        const result: ApplyResult = { applied: 0, deleted: 0, skipped: 0, fullPassTypes: [], more: false };
        const account = await accounts.get(input.accountId);
        const profile = knownProfile(account.sourceSystem);
        const token = await accounts.token(input.accountId);
        // Coalesce: one fetch per object, whatever number of events named it.
        const byObject = new Map<string, PendingEvent[]>();
        for (const e of events) {
          const k = `${e.type}|${e.projectId ?? ''}|${e.target}`;
          byObject.set(k, [...(byObject.get(k) ?? []), e]);
        }
        const outcomes = new Map<string, number[]>();
        const settle = (outcome: string, group: readonly PendingEvent[]) =>
          outcomes.set(outcome, [...(outcomes.get(outcome) ?? []), ...group.map((g) => g.id)]);
        const wanted: { key: StreamKey; target: string; group: PendingEvent[]; projectId?: string; path: string }[] = [];
        for (const group of byObject.values()) {
          const e = group[group.length - 1]!;
          const def = resourceForWebhookType(e.type);
          if (!def || def.scope === 'child') {
            settle('skipped: not mirrored', group);
            result.skipped += group.length;
            continue;
          }
          if (e.target.endsWith(':*')) {
            result.fullPassTypes.push(def.name);
            settle('pass requested', group);
            continue;
          }
          // The receiver admits service ids only; a row from before that check is not fetched.
          if (!serviceId.test(e.target)) {
            settle('skipped: target is not an object id', group);
            result.skipped += group.length;
            continue;
          }
          const kind = scopeKindIn(profile, def.name, def.scope);
          if (kind === 'project' && !e.projectId) {
            settle('skipped: no project', group);
            result.skipped += group.length;
            continue;
          }
          const scope = kind === 'project' ? formatScope([['project', e.projectId!]]) : '';
          wanted.push({
            key: { accountId: input.accountId, resource: def.name, scope },
            target: e.target,
            group,
            ...(kind === 'project' ? { projectId: e.projectId! } : {}),
            path: `${def.path}/${encodeURIComponent(e.target)}`,
          });
        }

        const fetchLimit = pLimit(input.concurrency ?? 16);
        const fetched = await Promise.allSettled(
          // DELETE events too: only the upstream's 404 confirms a deletion.
          wanted.map((w) =>
            fetchLimit(async () => {
              try {
                const res = await getObject(upstream, {
                  accountToken: token,
                  accountId: input.accountId,
                  sourceSystem: profile?.slug,
                  path: w.path,
                  projectId: w.projectId,
                  includeSourceData: true,
                });
                return res.body;
              } catch (error) {
                if (error instanceof UpstreamNotFoundError) return undefined;
                throw error;
              }
            }),
          ),
        );

        const tFetched = performance.now();
        // Per stream: the fetched objects in one write, the gone ones in one update.
        // `refused`: DELETE events for objects the upstream still returned (written as an update).
        const streams = new Map<
          string,
          { key: StreamKey; items: Record<string, unknown>[]; gone: string[]; upserted: PendingEvent[]; refused: PendingEvent[]; deleted: PendingEvent[] }
        >();
        let failure: unknown;
        wanted.forEach((w, i) => {
          const r = fetched[i]!;
          if (r.status === 'rejected') {
            failure ??= r.reason;
            return;
          }
          const k = `${w.key.resource}\n${w.key.scope}`;
          let stream = streams.get(k);
          if (!stream) streams.set(k, (stream = { key: w.key, items: [], gone: [], upserted: [], refused: [], deleted: [] }));
          if (r.value === undefined) {
            stream.gone.push(w.target);
            stream.deleted.push(...w.group);
          } else {
            stream.items.push(r.value);
            stream.upserted.push(...w.group.filter((g) => g.event !== 'DELETE'));
            stream.refused.push(...w.group.filter((g) => g.event === 'DELETE'));
          }
        });
        for (const stream of streams.values()) {
          if (stream.items.length > 0) {
            await applyObjects(pool, stream.key, stream.items);
            result.applied += stream.upserted.length + stream.refused.length;
            settle('upserted', stream.upserted);
            settle('not deleted: the upstream still has it (applied as an update)', stream.refused);
          }
          if (stream.gone.length > 0) {
            result.deleted += await markDeleted(pool, stream.key, stream.gone);
            result.applied += stream.deleted.length;
            settle('deleted', stream.deleted);
          }
        }
        for (const [outcome, ids] of outcomes) await markApplied(pool, ids, outcome);
        deps.logger.debug(
          {
            events: events.length,
            objects: wanted.length,
            readMs: Math.round(tRead - t0),
            fetchMs: Math.round(tFetched - tRead),
            writeMs: Math.round(performance.now() - tFetched),
          },
          'inbox applied',
        );
        // What could not be fetched stays pending; the activity's retry takes it up again.
        if (failure !== undefined) throw failure instanceof Error ? failure : new Error('fetching a changed object failed');
        return result;
      }
    },
  };
}

/** Heartbeats when run as an activity (tests call activities directly too). */
function activityHeartbeat(): void {
  try {
    Context.current().heartbeat();
  } catch {
    // Not in an activity.
  }
}

function activityCancelled(): boolean {
  try {
    return Context.current().cancellationSignal.aborted;
  } catch {
    return false;
  }
}

export type EventActivities = ReturnType<typeof createEventActivities>;
