// Event activities: registering upstream webhooks for an account, and applying the inbox
// (activities/inbox.ts). Each changed object is fetched from the upstream and upserted (an older
// fetch never overwrites a newer state); objects the upstream no longer has are marked deleted. A
// DELETE event is a claim, not a fact (anyone holding the registration's secret can send one): it is
// confirmed by the upstream's 404 before the record is marked deleted, and applied as an update if
// the object is still there.
import { randomBytes, randomUUID } from 'node:crypto';
import { knownProfile, scopeKindIn } from '../connectors/source-systems/index.ts';
import { createWebhook, listWebhooks } from '../connectors/operations.ts';
import { domainHash } from '../lib/crypto.ts';
import { resourceForWebhookType } from '../lib/resources.ts';
import { liveRecordIds } from '../mirror/streams/known-ids.ts';
import type { PrismaClient } from '../mirror/db/prisma.ts';
import { deleteWebhookRegistration, saveWebhookRegistration, webhookRegistrationsOf } from '../mirror/control/webhook-registrations.ts';
import { asActivity } from './failures.ts';
import { applyInbox, type ApplyInboxInput, type ApplyResult } from './inbox.ts';
import type { SyncDeps } from './sync.ts';

export interface EventDeps extends SyncDeps {
  prisma: PrismaClient;
  /** Base URL at which the upstream reaches the mirror's webhook receiver. */
  publicBaseUrl: string;
  hashKey: Buffer;
}

export function createEventActivities(deps: EventDeps) {
  const { pool, accounts, upstream } = deps;

  return {
    /**
     * Registers CREATE/UPDATE/DELETE webhooks for every type the account's source system supports, and
     * keeps them true: first the upstream's own list is read, and a registration of the mirror's that
     * the upstream no longer has (deleted there, an upstream reset, a registration made against
     * another upstream) is dropped here and registered again. Where the upstream does not list its
     * webhooks the mirror's registrations are taken as they are. A project's registrations are made
     * for the projects the mirror holds, so new projects get theirs at the next full pass.
     * `onlyIfRegistered`: an account with no registration at all is left so (an account is registered
     * when it is linked, or when asked: `mirror webhooks register`).
     */
    async registerWebhooks(input: { accountId: string; onlyIfRegistered?: boolean }): Promise<{ registered: number; missing: number }> {
      return asActivity(async () => {
        const account = await accounts.get(input.accountId);
        const profile = knownProfile(account.sourceSystem);
        if (!profile || profile.webhookTypes.length === 0) return { registered: 0, missing: 0 };
        let existing = await webhookRegistrationsOf(deps.prisma, input.accountId);
        if (input.onlyIfRegistered && existing.length === 0) return { registered: 0, missing: 0 };
        const token = await accounts.token(input.accountId);
        let missing = 0;
        const listed =
          existing.length === 0 ? undefined : await listWebhooks(upstream, { accountToken: token, accountId: input.accountId, sourceSystem: profile.slug });
        if (listed) {
          const upstreamIds = new Set(listed.map((w) => w.id));
          const gone = existing.filter((r) => !r.upstreamId || !upstreamIds.has(r.upstreamId));
          for (const r of gone) await deleteWebhookRegistration(deps.prisma, r.id);
          missing = gone.length;
          if (missing > 0) deps.logger.warn({ accountId: input.accountId, missing }, 'upstream webhooks missing: registering them again');
          existing = existing.filter((r) => !gone.includes(r));
        }
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
        return { registered, missing };
      });
    },

    /** Applies the account's pending webhook events (activities/inbox.ts). */
    async applyInbox(input: ApplyInboxInput): Promise<ApplyResult> {
      return asActivity(() => applyInbox(deps, input));
    },
  };
}

export type EventActivities = ReturnType<typeof createEventActivities>;
