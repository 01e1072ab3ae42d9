// Webhook subscriptions: create (Project-Id for project-level), list, get, delete.
import type { FastifyInstance } from 'fastify';
import { BadRequestError, NotFoundError } from '../../lib/errors.ts';
import type { SandboxContext } from '../context.ts';
import { NotSupportedError } from '../http/errors.ts';
import { accountOf } from '../http/request-state.ts';
import { headerValue, parseInput } from '../http/validate.ts';
import { findProject } from '../resources/scope.ts';
import { createWebhookSchema, webhookView } from './registry.ts';

export function registerWebhookRoutes(app: FastifyInstance, ctx: SandboxContext): void {
  const opts = { config: { kind: 'account' as const } };

  app.post('/webhooks', opts, async (request, reply) => {
    const account = accountOf(request.svc);
    const profile = account.profile;
    if (profile.webhookTypes.length === 0) throw new NotSupportedError(`Webhooks are not supported by ${profile.name}`);
    const body = parseInput(createWebhookSchema, request.body);
    if (!profile.webhookTypes.includes(body.type)) {
      throw new BadRequestError(`Webhook type ${body.type} is not supported by ${profile.name}; supported: ${profile.webhookTypes.join(', ')}`);
    }
    const projectRef = headerValue(request.headers, 'project-id');
    const project = projectRef ? findProject(ctx, account, request, projectRef) : undefined;
    const hook = ctx.webhooks.create(account.id, account.key, body, project?.id);
    return reply.code(201).send(webhookView(hook));
  });

  app.get('/webhooks', opts, async (request) => {
    const hooks = ctx.webhooks.list(accountOf(request.svc).id);
    return { data: hooks.map(webhookView), meta: { current_page: 1, has_more_results: false } };
  });

  app.get('/webhooks/:id', opts, async (request) => {
    const { id } = request.params as { id: string };
    const hook = ctx.webhooks.get(accountOf(request.svc).id, id);
    if (!hook) throw new NotFoundError(`Webhook ${id} not found`);
    return webhookView(hook);
  });

  app.delete('/webhooks/:id', opts, async (request) => {
    const { id } = request.params as { id: string };
    if (!ctx.webhooks.remove(accountOf(request.svc).id, id)) throw new NotFoundError(`Webhook ${id} not found`);
    return { id, deleted: true };
  });
}
