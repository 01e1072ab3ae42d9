// The JSON pass-through of REST source systems: native paths (`/rest/v1.0/vendors/123`) answered
// with native objects. Writes are answered as the source would, but not stored.
import { z } from 'zod';
import type { LinkedAccount } from '../auth-and-link/accounts.ts';
import type { SandboxContext } from '../context.ts';
import { isTopLevel, type TopLevelResource } from '../data/catalog.ts';
import type { Scope } from '../data/dataset.ts';
import { nativeName, rawObject } from '../data/raw-source.ts';
import type { SourceAnswer } from './sql.ts';

export const jsonPassthroughSchema = z.object({
  method: z.enum(['DELETE', 'GET', 'PATCH', 'POST', 'PUT']),
  path: z.string().min(1).startsWith('/'),
  data: z.record(z.string(), z.unknown()).optional(),
});
type JsonPassthrough = z.infer<typeof jsonPassthroughSchema>;

export function runNativeJson(ctx: SandboxContext, account: LinkedAccount, req: JsonPassthrough): SourceAnswer {
  const profile = account.profile;
  const [pathname, search = ''] = req.path.split('?');
  const path = req.path;
  const notFound = (message: string): SourceAnswer => ({ status: 404, body: { errors: message }, path, contentType: 'application/json' });
  if (!pathname!.startsWith(profile.nativeBase)) return notFound(`No route matches ${pathname}`);
  const segments = pathname!.slice(profile.nativeBase.length).split('/').filter(Boolean);
  const resources: TopLevelResource[] = Object.keys(profile.resources).filter(isTopLevel);
  const base: Scope = { company: 0, project: null, parent: null };
  let scope = base;
  let k = 0;
  if (segments[k] === 'companies' && segments[k + 1]) {
    const c = account.companies.findIndex((x) => x.source_id === segments[k + 1]);
    if (c < 0) return notFound(`Company ${segments[k + 1]} not found`);
    scope = { ...scope, company: c };
    k += 2;
  }
  if (segments[k] === 'projects' && segments[k + 1] && segments[k + 2]) {
    const project = ctx.dataset.find(account, 'projects', scope, `source_id:${segments[k + 1]}`);
    if (!project) return notFound(`Project ${segments[k + 1]} not found`);
    scope = { ...scope, project };
    k += 2;
  }
  const resource = resources.find((r) => nativeName(profile, r) === segments[k]);
  if (!resource) return notFound(`No route matches ${pathname}`);
  if (profile.resources[resource]?.scope === 'project' && !scope.project)
    return { status: 400, body: { errors: 'project_id is required' }, path, contentType: 'application/json' };
  const id = segments[k + 1];
  if (id === undefined) {
    if (req.method === 'GET') {
      const q = new URLSearchParams(search);
      const perPage = Math.min(Number(q.get('per_page') ?? req.data?.per_page ?? 100) || 100, 1000);
      const page = Math.max(1, Number(q.get('page') ?? req.data?.page ?? 1) || 1);
      const items = ctx.dataset.list(account, resource, [scope], { offset: (page - 1) * perPage, limit: perPage }).items;
      return { status: 200, body: items.map((f) => rawObject(profile, resource, f)), path, contentType: 'application/json' };
    }
    if (req.method === 'POST')
      return { status: 201, body: { id: 99_000_000 + Math.floor(Math.random() * 999_999), ...req.data }, path, contentType: 'application/json' };
    return { status: 405, body: { errors: `${req.method} not allowed on a collection` }, path, contentType: 'application/json' };
  }
  const found = ctx.dataset.find(account, resource, scope, `source_id:${id}`);
  if (!found) return notFound(`${nativeName(profile, resource)} ${id} not found`);
  const raw = rawObject(profile, resource, found.fields);
  switch (req.method) {
    case 'GET':
      return { status: 200, body: raw, path, contentType: 'application/json' };
    case 'PATCH':
    case 'PUT':
      return { status: 200, body: { ...raw, ...req.data }, path, contentType: 'application/json' };
    case 'DELETE':
      return { status: 204, body: null, path, contentType: 'application/json' };
    default:
      return { status: 405, body: { errors: `${req.method} not allowed on a record` }, path, contentType: 'application/json' };
  }
}
