// The mirror's own webhooks (`POST/GET/DELETE /webhooks`), in the contract's shape: every change
// the mirror applies to a matching record is delivered durably to the callback URL. A callback must
// reach a public address (or one on the operator's allow-list): checked here, and again at delivery.
import { randomUUID } from 'node:crypto';
import type { FastifyInstance, FastifySchema } from 'fastify';
import { z } from 'zod';
import type { CallbackGuard } from '../../lib/address-guard.ts';
import { encryptSecret } from '../../lib/crypto.ts';
import { BadRequestError, NotFoundError } from '../../lib/errors.ts';
import { resourceForWebhookType } from '../../lib/resources.ts';
import { accountEvents, accountEventType } from '../../mirror/control/account-events.ts';
import { subscriptionWorkflowId } from '../../lib/workflow-ids.ts';
import type { PrismaClient } from '../../mirror/db/prisma.ts';
import { createSubscription, deleteSubscription, findSubscription, subscriptionsOf, type SubscriptionRow } from '../../mirror/control/subscriptions.ts';
import { workPriority } from '../../lib/work-priority.ts';
import { credentialsFirst, header, type Authenticator } from '../auth.ts';
import type { ProjectIds } from '../project-ids.ts';
import type { SyncControl } from '../sync-control.ts';
import { errorAnswer, headersOf, json, metaSchema, pathParams, projectHeader, typedRoutes } from '../route-schema.ts';

const createSchema = z.object({
  callback_url: z.url({ protocol: /^https?$/, message: 'callback_url must be an http(s) URL' }),
  authorization_header: z.string().max(4096).optional(),
  // SYNCED (the mirror's own): a stream's pass committed every page, with its counts. The account's
  // own events (type `account`): its credentials refused, linked again, unlinked, a pass stalled.
  event: z.enum(['CREATE', 'UPDATE', 'DELETE', 'SYNCED', ...accountEvents], {
    message: `event must be CREATE, UPDATE, DELETE or SYNCED (with a resource's type), or one of ${accountEvents.join(', ')} (with type account)`,
  }),
  type: z.string().min(1, 'type is required').max(64),
});

const webhookSchema = z
  .object({
    id: z.string(),
    source_id: z.string(),
    callback_url: z.string(),
    event: z.string(),
    project_id: z.string().optional(),
    target: z.string(),
    type: z.string(),
    delivery: z.object({
      delivered: z.number().int(),
      failures: z.number().int(),
      last_error: z.string().nullable(),
      last_delivered_at: z.string().nullable(),
    }),
  })
  .meta({ id: 'Webhook' });
const webhookId = pathParams('id');

const schemas = {
  create: {
    summary: 'Subscribe to changes of a resource',
    description:
      'Every change the mirror applies to a matching record is delivered, in order and at least once, to `callback_url` with your `authorization_header`.',
    tags: ['webhooks'],
    access: 'account',
    headers: headersOf(projectHeader("Only changes in this project (its id or `source_id:<id>`): one of the account's projects.")),
    body: createSchema,
    response: {
      201: json('The subscription.', webhookSchema),
      400: errorAnswer('Invalid body, or a Project-Id that is not a project id.'),
      404: errorAnswer('The account has no such project.'),
    },
  },
  list: {
    summary: 'List subscriptions',
    tags: ['webhooks'],
    access: 'account',
    response: { 200: json('Subscriptions.', z.object({ data: z.array(webhookSchema), meta: metaSchema })) },
  },
  get: {
    summary: 'One subscription',
    tags: ['webhooks'],
    access: 'account',
    params: webhookId,
    response: { 200: json('The subscription.', webhookSchema), 404: errorAnswer('No such webhook.') },
  },
  delete: {
    summary: 'Delete a subscription',
    tags: ['webhooks'],
    access: 'account',
    params: webhookId,
    response: { 200: json('The deleted subscription.', webhookSchema), 404: errorAnswer('No such webhook.') },
  },
} satisfies Record<string, FastifySchema>;

interface SubscriptionDeps {
  auth: Authenticator;
  prisma: PrismaClient;
  sync: SyncControl;
  encryptionKey: Buffer;
  /** Where callbacks may point (lib/address-guard.ts, MIRROR_CALLBACK_ALLOW). */
  callbacks: CallbackGuard;
  /** Settles which of the account's projects a Project-Id names (as the reads do). */
  projects: ProjectIds;
}

function shape(row: SubscriptionRow) {
  return {
    id: row.id,
    source_id: row.id,
    callback_url: row.callbackUrl,
    event: row.event,
    ...(row.projectId ? { project_id: row.projectId } : {}),
    target: `${row.type}:*`,
    type: row.type,
    delivery: { delivered: row.delivered, failures: row.failures, last_error: row.lastError, last_delivered_at: row.lastDeliveredAt?.toISOString() ?? null },
  };
}

export function registerSubscriptionRoutes(fastify: FastifyInstance, deps: SubscriptionDeps): void {
  const app = typedRoutes(fastify);
  app.post('/webhooks', { preValidation: credentialsFirst(deps.auth, 'account'), schema: schemas.create }, async (request, reply) => {
    const account = await deps.auth.account(request);
    const body = request.body;
    const forAccount = (accountEvents as readonly string[]).includes(body.event);
    if (forAccount !== (body.type === accountEventType))
      throw new BadRequestError(
        forAccount
          ? `The event ${body.event} is the account's: subscribe to it with type "${accountEventType}".`
          : `Type "${accountEventType}" takes the account's events: ${accountEvents.join(', ')}.`,
        { details: [{ path: forAccount ? 'type' : 'event', message: 'account events go with type account, and only they' }] },
      );
    if (!forAccount && !resourceForWebhookType(body.type))
      throw new BadRequestError(`Unknown webhook type "${body.type}": use a resource's singular name, e.g. file, project, ap-invoice.`);
    // A project-level subscription names one of the account's own projects, as the upstream's
    // webhooks do (a project it does not have is a 404); kept by its service id, which is what
    // changes are matched on, also when it was named by `source_id:`.
    const projectRef = header(request, 'project-id')?.trim();
    const projectId = projectRef ? await deps.projects.resolve(account, projectRef) : null;
    // Literal addresses in every spelling, localhost names, user info, and every address the name resolves to.
    const verdict = await deps.callbacks.checkUrl(body.callback_url);
    if (!verdict.ok) throw new BadRequestError(`Invalid webhook: ${verdict.reason}`, { details: [{ path: 'callback_url', message: verdict.reason }] });
    const id = randomUUID();
    const row = await createSubscription(deps.prisma, {
      id,
      accountId: account.id,
      callbackUrl: body.callback_url,
      authorizationCiphertext: body.authorization_header ? new Uint8Array(encryptSecret(deps.encryptionKey, body.authorization_header)) : null,
      event: body.event,
      type: body.type,
      projectId,
    });
    await deps.sync.client.workflow.start('subscriptionDeliveryWorkflow', {
      taskQueue: deps.sync.taskQueue,
      workflowId: subscriptionWorkflowId(id),
      args: [{ subscriptionId: id }],
      priority: workPriority(account.id, 'event'),
    });
    return reply.status(201).send(shape(row));
  });

  app.get('/webhooks', { schema: schemas.list }, async (request) => {
    const account = await deps.auth.account(request);
    const rows = await subscriptionsOf(deps.prisma, account.id);
    return { data: rows.map(shape), meta: { current_page: 1, has_more_results: false } };
  });

  app.get('/webhooks/:id', { schema: schemas.get }, async (request) => {
    const account = await deps.auth.account(request);
    const row = /^[0-9a-f-]{36}$/i.test(request.params.id) ? await findSubscription(deps.prisma, request.params.id) : null;
    if (!row || row.accountId !== account.id) throw new NotFoundError(`No webhook ${request.params.id}.`);
    return shape(row);
  });

  app.delete('/webhooks/:id', { schema: schemas.delete }, async (request, reply) => {
    const account = await deps.auth.account(request);
    const row = /^[0-9a-f-]{36}$/i.test(request.params.id) ? await findSubscription(deps.prisma, request.params.id) : null;
    if (!row || row.accountId !== account.id) throw new NotFoundError(`No webhook ${request.params.id}.`);
    await deleteSubscription(deps.prisma, row.id);
    await deps.sync.client.workflow
      .getHandle(subscriptionWorkflowId(row.id))
      .cancel()
      .catch(() => undefined);
    return reply.status(200).send(shape(row));
  });
}
