// The receiver of upstream webhook deliveries. Checks the registered Authorization value in constant
// time (401 and nothing stored otherwise), validates the body, stores the event in the inbox
// (deduplicated), answers at once, and wakes the account's change workflow.
import type { FastifyInstance } from 'fastify';
import { z } from 'zod';
import { keyedHash, safeEqual } from '../../lib/crypto.ts';
import { BadRequestError, UnauthorizedError } from '../../lib/errors.ts';
import { storeEvent } from '../../mirror/inbox.ts';
import type { Pool } from '../../mirror/pool.ts';
import type { PrismaClient } from '../../mirror/prisma.ts';
import type { SyncControl } from '../sync-control.ts';

export const inboundEventSchema = z.looseObject({
  id: z.string().optional(),
  source_id: z.string().nullish(),
  callback_url: z.string().optional(),
  event: z.enum(['CREATE', 'UPDATE', 'DELETE']),
  project_id: z.string().nullish(),
  target: z.string().min(1),
  type: z.string().min(1),
  source_data: z.unknown().optional(),
});

export interface InboundDeps {
  pool: Pool;
  prisma: PrismaClient;
  hashKey: Buffer;
  sync?: SyncControl;
}

const uuid = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

type Registration = { id: string; accountId: string; projectId: string | null; authorizationHash: string };

/**
 * Registrations seen lately, so a burst of deliveries costs one lookup per webhook, not one per
 * event. Only found ones are kept, for a few seconds: a deleted registration (unlinked account,
 * re-registered webhooks) stops being accepted within that time.
 */
const registrationTtlMs = 5_000;

export function registerInboundWebhookRoutes(app: FastifyInstance, deps: InboundDeps): void {
  const recent = new Map<string, { registration: Registration; until: number }>();
  async function registrationOf(id: string): Promise<Registration | null> {
    const hit = recent.get(id);
    if (hit && hit.until > Date.now()) return hit.registration;
    const found = await deps.prisma.webhookRegistration.findUnique({ where: { id }, select: { id: true, accountId: true, projectId: true, authorizationHash: true } });
    if (recent.size > 10_000) recent.clear();
    if (found) recent.set(id, { registration: found, until: Date.now() + registrationTtlMs });
    else recent.delete(id);
    return found;
  }

  app.post<{ Params: { registrationId: string } }>('/webhooks/inbound/:registrationId', async (request, reply) => {
    const presented = request.headers.authorization ?? '';
    const id = request.params.registrationId;
    const registration = uuid.test(id) ? await registrationOf(id) : null;
    // Compare even when the registration is unknown, so timing tells nothing.
    const ok = safeEqual(keyedHash(deps.hashKey, presented), registration?.authorizationHash ?? '');
    if (!registration || !ok) throw new UnauthorizedError('This webhook delivery is not authorized.');
    const parsed = inboundEventSchema.safeParse(request.body);
    if (!parsed.success) {
      const details = parsed.error.issues.map((i) => ({ path: i.path.join('.'), message: i.message }));
      throw new BadRequestError(`Invalid webhook event: ${details.map((d) => `${d.path} ${d.message}`).join('; ')}`, { details });
    }
    const e = parsed.data;
    const stored = await storeEvent(deps.pool, {
      accountId: registration.accountId,
      registrationId: registration.id,
      event: e.event,
      type: e.type,
      target: e.target,
      projectId: e.project_id ?? registration.projectId,
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
