// The receiver of upstream webhook deliveries. Checks the registered Authorization value in constant
// time (401 and nothing stored otherwise), validates the body and checks it against its registration
// (same type and event, the registration's project, a well-formed target: 400 otherwise), stores the
// event in the inbox (deduplicated), answers at once, and wakes the account's change workflow. The
// secret proves the sender holds that registration, not that the change happened: what an event
// names is fetched from the upstream before it is applied (activities/events.ts).
import type { FastifyInstance, FastifyRequest, FastifySchema } from 'fastify';
import { z } from 'zod';
import { domainHash, keyedHash, safeEqual } from '../../lib/crypto.ts';
import { BadRequestError, UnauthorizedError } from '../../lib/errors.ts';
import { storeEvent } from '../../mirror/streams/inbox.ts';
import type { Pool } from '../../mirror/db/pool.ts';
import type { PrismaClient } from '../../mirror/db/prisma.ts';
import { findWebhookRegistration } from '../../mirror/control/webhook-registrations.ts';
import type { SyncControl } from '../sync-control.ts';
import { errorAnswer, json, pathParams, typedRoutes, type RouteRequest } from '../route-schema.ts';

const inboundEventSchema = z.looseObject({
  id: z.string().optional(),
  source_id: z.string().nullish(),
  callback_url: z.string().optional(),
  event: z.enum(['CREATE', 'UPDATE', 'DELETE']),
  project_id: z.string().nullish(),
  target: z.string().min(1),
  type: z.string().min(1),
  source_data: z.unknown().optional(),
});

const inboundSchema = {
  summary: "The upstream's webhook deliveries (not for applications)",
  description: 'Registered upstream by the mirror; `Authorization` must be the secret of that registration.',
  tags: ['webhooks'],
  access: 'webhook',
  params: pathParams('registrationId'),
  body: inboundEventSchema,
  response: {
    200: json('Stored in the inbox (or a duplicate).', z.object({ received: z.boolean(), duplicate: z.boolean() })),
    400: errorAnswer('An event that is not one, or does not fit its registration.'),
    401: errorAnswer('Unknown registration or wrong secret.'),
  },
} satisfies FastifySchema;

interface InboundDeps {
  pool: Pool;
  prisma: PrismaClient;
  hashKey: Buffer;
  sync?: SyncControl;
}

const uuid = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

type Registration = { id: string; accountId: string; type: string; event: string; projectId: string | null; authorizationHash: string };

/**
 * Registrations seen lately, so a burst of deliveries costs one lookup per webhook, not one per
 * event. Found ones are kept for a few seconds: a deleted registration (unlinked account,
 * re-registered webhooks) stops being accepted within that time.
 */
const registrationTtlMs = 5_000;
/**
 * Ids found unknown, kept shorter: a flood of deliveries to one made-up id costs one lookup per
 * interval, while a registration the upstream reaches before its row is committed is accepted
 * again soon (the upstream retries a refused delivery).
 */
const unknownTtlMs = 2_000;
const cacheMax = 10_000;

/** Keeps at most `cacheMax` entries, dropping the oldest. */
function remember<V>(map: Map<string, V>, key: string, value: V): void {
  map.delete(key);
  if (map.size >= cacheMax) map.delete(map.keys().next().value!);
  map.set(key, value);
}

/** The changed object's service id (a UUID, as the contract gives every object), or `<type>:*`. */
function targetProblem(target: string, type: string): string | undefined {
  if (uuid.test(target) || target === `${type}:*`) return undefined;
  return `target must be the changed object's id (a UUID) or "${type}:*"`;
}

/** Why an authentic delivery does not fit its registration, if it does not. */
function mismatch(e: z.infer<typeof inboundEventSchema>, registration: Registration): string | undefined {
  if (e.type !== registration.type) return `type "${e.type}" does not match this webhook's type "${registration.type}"`;
  if (e.event !== registration.event) return `event ${e.event} does not match this webhook's event ${registration.event}`;
  // A project-level webhook speaks for its own project only.
  if (registration.projectId && e.project_id && e.project_id !== registration.projectId)
    return 'project_id names another project than the one this webhook was registered for';
  return targetProblem(e.target, registration.type);
}

export function registerInboundWebhookRoutes(fastify: FastifyInstance, deps: InboundDeps): void {
  const app = typedRoutes(fastify);
  const recent = new Map<string, { registration: Registration; until: number }>();
  const unknown = new Map<string, number>();
  const lookups = new Map<string, Promise<Registration | null>>();
  async function registrationOf(id: string): Promise<Registration | null> {
    const now = Date.now();
    const hit = recent.get(id);
    if (hit && hit.until > now) return hit.registration;
    const missUntil = unknown.get(id);
    if (missUntil !== undefined && missUntil > now) return null;
    // Deliveries arriving together share one lookup.
    let pending = lookups.get(id);
    if (!pending) {
      pending = findWebhookRegistration(deps.prisma, id)
        .then((found) => {
          if (found) {
            unknown.delete(id);
            remember(recent, id, { registration: found, until: Date.now() + registrationTtlMs });
          } else {
            recent.delete(id);
            remember(unknown, id, Date.now() + unknownTtlMs);
          }
          return found;
        })
        .finally(() => lookups.delete(id));
      lookups.set(id, pending);
    }
    return pending;
  }

  /**
   * The delivery's registration, once its secret is checked: before the body is judged, so a caller
   * without the secret gets the 401 and learns nothing of what a delivery holds.
   */
  const authorized = new WeakMap<FastifyRequest, Registration>();
  async function authorize(request: RouteRequest<typeof inboundSchema>): Promise<void> {
    const presented = request.headers.authorization ?? '';
    const id = request.params.registrationId;
    const registration = uuid.test(id) ? await registrationOf(id) : null;
    // Compare even when the registration is unknown, so timing tells nothing. Registrations made
    // before the hash domains existed stored the unprefixed hash: both are compared, always.
    const storedHash = registration?.authorizationHash ?? '';
    const current = safeEqual(domainHash(deps.hashKey, 'webhookAuthorization', presented), storedHash);
    const legacy = safeEqual(keyedHash(deps.hashKey, presented), storedHash);
    const ok = current || legacy;
    if (!registration || !ok) throw new UnauthorizedError('This webhook delivery is not authorized.');
    authorized.set(request, registration);
  }

  app.post('/webhooks/inbound/:registrationId', { preValidation: authorize, schema: inboundSchema }, async (request, reply) => {
    const registration = authorized.get(request)!;
    const e = request.body;
    const problem = mismatch(e, registration);
    if (problem) {
      request.log.warn({ registration: registration.id, problem }, 'refused a webhook event that does not fit its registration');
      throw new BadRequestError(`Invalid webhook event: ${problem}.`);
    }
    const stored = await storeEvent(deps.pool, {
      accountId: registration.accountId,
      registrationId: registration.id,
      event: e.event,
      type: e.type,
      target: e.target,
      projectId: registration.projectId ?? e.project_id ?? null,
      body: e,
    });
    if (deps.sync) {
      // The event is safe in the inbox: answer now, wake the workflow meanwhile (signals are
      // coalesced per account). A failed wake-up is repaired by the workflow's own timer.
      void deps.sync.signalEvents(registration.accountId).catch((error: unknown) => request.log.warn({ err: error }, 'could not signal the change workflow'));
    }
    return reply.status(200).send({ received: true, duplicate: !stored });
  });
}
