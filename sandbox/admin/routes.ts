// The admin API (`/_admin/...`, client credentials only): link without a browser, mutate data,
// inject faults, read stats, tune rate limits, webhook delivery and source-system behaviour.
import type { FastifyInstance } from 'fastify';
import { z } from 'zod';
import { BadRequestError, NotFoundError } from '../../lib/errors.ts';
import type { LinkedAccount } from '../auth-and-link/accounts.ts';
import type { SandboxContext } from '../context.ts';
import { childResources, childSpecs, isChild, isTopLevel, type ResourceName } from '../data/catalog.ts';
import type { Scope } from '../data/dataset.ts';
import { faultSpecSchema } from '../faults/faults.ts';
import { parseInput } from '../http/validate.ts';
import { registerStallRoutes } from './stall-routes.ts';
import { describeProfile, profileOf, sourceSystemProfiles } from '../source-systems/profiles.ts';
import { applyChange } from '../webhooks/changes.ts';
import { churnSchema } from '../webhooks/churn.ts';
import { deliverySettingsSchema } from '../webhooks/registry.ts';

const mintPublicTokenSchema = z.object({
  link_token: z.string().min(1),
  source_system: z.string().min(1),
  /** Another person signing in under the same reference id (another user, company and data); unset: its usual user. */
  login: z.string().min(1).max(255).optional(),
});

const target = {
  account_token: z.string().min(1),
  resource: z.string().min(1),
  project_id: z.string().optional(),
  parent_id: z.string().optional(),
  company_id: z.string().optional(),
};
const createObjectSchema = z.object({ ...target, object: z.record(z.string(), z.unknown()) });
const updateObjectSchema = z.object({ ...target, id: z.string().min(1), patch: z.record(z.string(), z.unknown()) });
const deleteObjectSchema = z.object({ ...target, id: z.string().min(1) });

const revokeTokenSchema = z.object({
  account_token: z.string().min(1),
  /** `expired`: the token ran out rather than being revoked (the upstream says which). */
  reason: z.enum(['revoked', 'expired']).default('revoked'),
});
const unlinkAccountSchema = z.object({ account_token: z.string().min(1) });

const rateLimitSettingsSchema = z.object({
  enabled: z.boolean().optional(),
  windowMs: z.number().int().positive().optional(),
  accountLimit: z.number().int().positive().optional(),
  sourceSystemLimits: z.record(z.string(), z.number().int().positive()).optional(),
  /** Start every window afresh. */
  reset: z.boolean().optional(),
});

const sourceSystemSettingsSchema = z.object({
  latency_ms: z.number().int().nonnegative().optional(),
  max_queued: z.number().int().nonnegative().optional(),
  max_execution_ms: z.number().int().positive().optional(),
});

const storageSettingsSchema = z.object({
  url_ttl_ms: z.number().int().positive().optional(),
  async_result_ttl_ms: z.number().int().positive().optional(),
});

const opts = { config: { kind: 'admin' as const } };

function accountFor(ctx: SandboxContext, token: string): LinkedAccount {
  const a = ctx.accounts.byAccountToken(token);
  if (!a) throw new NotFoundError('No linked account has this account_token');
  return a;
}

/** Resolves the list a mutation targets: company, project (if project-scoped), parent (children). */
function scopeFor(
  ctx: SandboxContext,
  account: LinkedAccount,
  name: string,
  t: { project_id?: string | undefined; parent_id?: string | undefined; company_id?: string | undefined },
): { resource: ResourceName; scope: Scope; parent?: ResourceName } {
  const resource = (name === 'line-items' ? 'ap-invoice-line-items' : name) as ResourceName;
  if (!isTopLevel(resource) && !isChild(resource)) throw new BadRequestError(`Unknown resource ${name}; children are ${childResources.join(', ')}`);
  if (!account.profile.resources[resource]) throw new BadRequestError(`${resource} is not supported by ${account.profile.name}`);
  const company = t.company_id ? account.companies.findIndex((c) => c.id === t.company_id) : 0;
  if (company < 0) throw new BadRequestError(`Unknown company_id ${t.company_id}`);
  const base: Scope = { company, project: null, parent: null };
  const top = isChild(resource) ? childSpecs[resource].parent : resource;
  let scope = base;
  if (account.profile.resources[top]?.scope === 'project') {
    if (!t.project_id) throw new BadRequestError(`project_id is required for ${top} in ${account.profile.name}`);
    const project = ctx.dataset.find(account, 'projects', base, t.project_id);
    if (!project) throw new NotFoundError(`Project ${t.project_id} not found`);
    scope = { ...base, project };
  }
  if (!isChild(resource)) return { resource, scope };
  if (!t.parent_id) throw new BadRequestError(`parent_id (the ${top} id) is required for ${resource}`);
  const parent = ctx.dataset.find(account, top, scope, t.parent_id);
  if (!parent) throw new NotFoundError(`${top} ${t.parent_id} not found`);
  return { resource, scope: { ...scope, parent }, parent: top };
}

/** Linking without a browser, and each source system's behaviour (latency, queue, execution time). */
function registerLinkAndSourceSystemRoutes(app: FastifyInstance, ctx: SandboxContext): void {
  app.post('/_admin/link/public-token', opts, async (request) => {
    const body = parseInput(mintPublicTokenSchema, request.body);
    const profile = profileOf(body.source_system);
    if (!profile) throw new BadRequestError(`Unknown source_system ${body.source_system}; known: ${sourceSystemProfiles.map((p) => p.slug).join(', ')}`);
    return { public_token: ctx.accounts.mintPublicToken(body.link_token, profile, body.login) };
  });

  app.get('/_admin/source-systems', opts, async () => ({ data: sourceSystemProfiles.map(describeProfile) }));

  app.put('/_admin/source-systems/:slug', opts, async (request) => {
    const { slug } = request.params as { slug: string };
    if (!profileOf(slug)) throw new NotFoundError(`Unknown source system ${slug}`);
    const body = parseInput(sourceSystemSettingsSchema, request.body);
    const prev = ctx.sourceSettings.get(slug) ?? { latencyMs: 0 };
    const next = {
      latencyMs: body.latency_ms ?? prev.latencyMs,
      ...(body.max_queued !== undefined ? { maxQueued: body.max_queued } : prev.maxQueued !== undefined ? { maxQueued: prev.maxQueued } : {}),
      ...(body.max_execution_ms !== undefined
        ? { maxExecutionMs: body.max_execution_ms }
        : prev.maxExecutionMs !== undefined
          ? { maxExecutionMs: prev.maxExecutionMs }
          : {}),
    };
    ctx.sourceSettings.set(slug, next);
    return { slug, latency_ms: next.latencyMs, max_queued: next.maxQueued ?? null, max_execution_ms: next.maxExecutionMs ?? null };
  });
}

/** The linked accounts: listed, a token refused, an account unlinked at the source. */
function registerAccountRoutes(app: FastifyInstance, ctx: SandboxContext): void {
  app.get('/_admin/accounts', opts, async () => ({
    data: ctx.accounts
      .all()
      .map((a) => ({ id: a.id, reference_id: a.referenceId, source_system: a.profile.slug, companies: a.companies, linked_at: a.linkedAt })),
  }));

  // The source system stops taking a token, or the account is unlinked at the source: every later
  // request with the token is answered 401, saying why.
  app.post('/_admin/accounts/revoke', opts, async (request) => {
    const body = parseInput(revokeTokenSchema, request.body);
    const account = accountFor(ctx, body.account_token);
    ctx.accounts.refuse(body.account_token, body.reason);
    return { id: account.id, reference_id: account.referenceId, status: body.reason };
  });

  app.post('/_admin/accounts/unlink', opts, async (request) => {
    const body = parseInput(unlinkAccountSchema, request.body);
    const account = accountFor(ctx, body.account_token);
    ctx.accounts.refuse(body.account_token, 'unlinked');
    return { id: account.id, reference_id: account.referenceId, status: 'unlinked' };
  });
}

/** Data changed at the source: an object created, updated or deleted (webhooks follow). */
function registerObjectRoutes(app: FastifyInstance, ctx: SandboxContext): void {
  app.post('/_admin/objects', opts, async (request, reply) => {
    const body = parseInput(createObjectSchema, request.body);
    const account = accountFor(ctx, body.account_token);
    const t = scopeFor(ctx, account, body.resource, body);
    const created = applyChange(ctx, account, t.resource, t.scope, { op: 'create', object: body.object }, t.parent);
    return reply.code(201).send(created);
  });

  app.patch('/_admin/objects', opts, async (request) => {
    const body = parseInput(updateObjectSchema, request.body);
    const account = accountFor(ctx, body.account_token);
    const t = scopeFor(ctx, account, body.resource, body);
    const updated = applyChange(ctx, account, t.resource, t.scope, { op: 'update', id: body.id, patch: body.patch }, t.parent);
    if (!updated) throw new NotFoundError(`${t.resource} ${body.id} not found`);
    return updated;
  });

  app.delete('/_admin/objects', opts, async (request) => {
    const body = parseInput(deleteObjectSchema, request.body);
    const account = accountFor(ctx, body.account_token);
    const t = scopeFor(ctx, account, body.resource, body);
    const deleted = applyChange(ctx, account, t.resource, t.scope, { op: 'delete', id: body.id }, t.parent);
    if (!deleted) throw new NotFoundError(`${t.resource} ${body.id} not found`);
    return { deleted: true, id: deleted.id, source_id: deleted.source_id };
  });
}

/** Injected faults: added, stalls, listed, cleared. */
function registerFaultRoutes(app: FastifyInstance, ctx: SandboxContext): void {
  app.post('/_admin/faults', opts, async (request, reply) => {
    const spec = parseInput(faultSpecSchema, request.body);
    return reply.code(201).send({ id: ctx.faults.add(spec).id });
  });
  registerStallRoutes(app, ctx, opts);
  app.get('/_admin/faults', opts, async () => ({ data: ctx.faults.list() }));
  app.delete('/_admin/faults', opts, async () => {
    ctx.faults.clear();
    return { cleared: true };
  });
  app.delete('/_admin/faults/:id', opts, async (request) => {
    const { id } = request.params as { id: string };
    if (!ctx.faults.remove(id)) throw new NotFoundError(`Fault ${id} not found`);
    return { deleted: true };
  });
}

function registerStatsRoutes(app: FastifyInstance, ctx: SandboxContext): void {
  app.get('/_admin/stats', opts, async () => ({ ...ctx.stats.snapshot(), serial_queues: ctx.serial.snapshot(), record_cache: ctx.records.snapshot() }));
  app.delete('/_admin/stats', opts, async () => {
    ctx.stats.reset();
    return { reset: true };
  });
}

/** Rate limits and webhook delivery, read and tuned. */
function registerLimitAndDeliveryRoutes(app: FastifyInstance, ctx: SandboxContext): void {
  app.get('/_admin/rate-limits', opts, async () => ctx.limiter.settings);
  app.put('/_admin/rate-limits', opts, async (request) => {
    const body = parseInput(rateLimitSettingsSchema, request.body);
    const s = ctx.limiter.settings;
    if (body.enabled !== undefined) s.enabled = body.enabled;
    if (body.windowMs !== undefined) {
      s.windowMs = body.windowMs;
      s.windowOverride = true;
    }
    if (body.accountLimit !== undefined) s.accountLimit = body.accountLimit;
    if (body.sourceSystemLimits !== undefined) s.sourceSystemLimits = { ...s.sourceSystemLimits, ...body.sourceSystemLimits };
    if (body.reset || body.windowMs !== undefined) ctx.limiter.reset();
    return s;
  });

  app.get('/_admin/webhook-delivery', opts, async () => ctx.webhooks.settings);
  app.put('/_admin/webhook-delivery', opts, async (request) => {
    ctx.webhooks.settings = parseInput(deliverySettingsSchema, { ...ctx.webhooks.settings, ...(request.body as object) });
    return ctx.webhooks.settings;
  });
  app.get('/_admin/webhook-deliveries', opts, async () => ({ data: ctx.webhooks.deliveryLog() }));
}

/** Continuous changes to an account's data (churn), and the storage's link lifetimes. */
function registerChurnAndStorageRoutes(app: FastifyInstance, ctx: SandboxContext): void {
  app.post('/_admin/churn', opts, async (request, reply) => {
    const body = parseInput(churnSchema, request.body);
    return reply.code(201).send(ctx.churn.start(ctx, accountFor(ctx, body.account_token), body));
  });
  app.get('/_admin/churn', opts, async () => ({ data: ctx.churn.list() }));
  app.delete('/_admin/churn', opts, async () => {
    ctx.churn.stopAll();
    return { stopped: true };
  });

  app.put('/_admin/storage', opts, async (request) => {
    const body = parseInput(storageSettingsSchema, request.body);
    if (body.url_ttl_ms !== undefined) ctx.signer.lifetimeMs = body.url_ttl_ms;
    if (body.async_result_ttl_ms !== undefined) ctx.asyncRequests.ttlMs = body.async_result_ttl_ms;
    return { url_ttl_ms: ctx.signer.lifetimeMs, async_result_ttl_ms: ctx.asyncRequests.ttlMs };
  });
}

export function registerAdminRoutes(app: FastifyInstance, ctx: SandboxContext): void {
  registerLinkAndSourceSystemRoutes(app, ctx);
  registerAccountRoutes(app, ctx);
  registerObjectRoutes(app, ctx);
  registerFaultRoutes(app, ctx);
  registerStatsRoutes(app, ctx);
  registerLimitAndDeliveryRoutes(app, ctx);
  registerChurnAndStorageRoutes(app, ctx);
}
