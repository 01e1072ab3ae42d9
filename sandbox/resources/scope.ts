// Resolves where a request reads: the company (Company-Id), the project (Project-Id, required by
// project-scoped resources, `*` for all projects in lists) and the parent object of children.
import type { FastifyRequest } from 'fastify';
import { BadRequestError, NotFoundError } from '../../lib/errors.ts';
import type { LinkedAccount } from '../auth-and-link/accounts.ts';
import type { SandboxContext } from '../context.ts';
import type { ResourceName, TopLevelResource } from '../data/catalog.ts';
import type { Ref, Scope } from '../data/dataset.ts';
import { NotSupportedError } from '../http/errors.ts';
import { headerValue } from '../http/validate.ts';
import type { ResourceSupport } from '../source-systems/profiles.ts';

export function supportOf(account: LinkedAccount, resource: ResourceName): ResourceSupport {
  const s = account.profile.resources[resource];
  if (!s) throw new NotSupportedError(`${resource} is not supported by ${account.profile.name}`);
  return s;
}

function companyScope(request: FastifyRequest): Scope {
  return { company: request.svc.company, project: null, parent: null };
}

export function findProject(ctx: SandboxContext, account: LinkedAccount, request: FastifyRequest, ref: string): Ref {
  const project = ctx.dataset.find(account, 'projects', companyScope(request), ref);
  if (!project) throw new NotFoundError(`Project ${ref} not found`);
  return project;
}

/**
 * The scopes a top-level resource is read in: one, or every project's for `Project-Id: *` when
 * `allowAll` (lists). Account-level resources ignore Project-Id.
 */
export function scopesFor(ctx: SandboxContext, account: LinkedAccount, request: FastifyRequest, resource: TopLevelResource, allowAll: boolean): Scope[] {
  const support = supportOf(account, resource);
  const base = companyScope(request);
  if (support.scope !== 'project') return [base];
  const raw = headerValue(request.headers, 'project-id')?.trim();
  if (!raw) throw new BadRequestError(`Project-Id header is required for ${resource} in ${account.profile.name}`);
  if (raw === '*') {
    if (!allowAll) throw new BadRequestError('Project-Id * is only accepted by list endpoints');
    if (support.crossProject === false) {
      throw new BadRequestError(`Project-Id * is not accepted for ${resource} by ${account.profile.name}: list each project with its own Project-Id`);
    }
    const projects = ctx.dataset.all(account, 'projects', base);
    return projects.map((p) => {
      const ref = ctx.dataset.find(account, 'projects', base, String(p.id))!;
      return { ...base, project: ref };
    });
  }
  return [{ ...base, project: findProject(ctx, account, request, raw) }];
}

// In a file of its own, which webhooks/changes.ts imports without this module's context.
export { pathContext } from './path-context.ts';
