// The unified endpoints: lists, single objects (by id or `source_id:<x>`), children, folder trees,
// and writes for the resource/source pairs that allow them.
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { BadRequestError, NotFoundError } from '../../lib/errors.ts';
import type { LinkedAccount } from '../auth-and-link/accounts.ts';
import type { SandboxContext } from '../context.ts';
import { childOf, childSpecs, isTopLevel, type ResourceName, type TopLevelResource } from '../data/catalog.ts';
import type { PageVisitor, Ref, Scope } from '../data/dataset.ts';
import { parseFilters } from '../data/filters.ts';
import type { Fields } from '../data/generators.ts';
import type { PathContext } from '../data/raw-source.ts';
import { hasFault } from '../faults/apply.ts';
import { endlessPage } from '../faults/hostile-bodies.ts';
import { NotSupportedError } from '../http/errors.ts';
import { accountOf } from '../http/request-state.ts';
import { headerValue } from '../http/validate.ts';
import { applyChange } from '../webhooks/changes.ts';
import { pageMeta, parsePage } from './pagination.ts';
import { pathContext, scopesFor, supportOf } from './scope.ts';
import { sendJson } from './json-page.ts';
import { isPooled, JsonWriter, releaseBuffer } from './json-writer.ts';
import type { Segment } from './record-cache.ts';
import { writeRecord } from './record-json.ts';
import { sourceDataMode, withSourceData } from './source-data.ts';

const noPath: PathContext = {};

type Params = { resource: string; id?: string; sub?: string; subId?: string };

function routeNotFound(request: FastifyRequest): never {
  throw new NotFoundError(`Route ${request.method} ${request.url.split('?')[0]} not found`);
}

function topLevel(request: FastifyRequest, name: string): TopLevelResource {
  if (!isTopLevel(name)) routeNotFound(request);
  return name;
}

export function registerResourceRoutes(app: FastifyInstance, ctx: SandboxContext): void {
  const opts = { config: { kind: 'account' as const } };
  const d = ctx.dataset;
  const records = ctx.records;
  /** Bytes per served record lately: the first guess at a page's size. */
  let recordBytes = 1024;

  function render(request: FastifyRequest, account: LinkedAccount, resource: ResourceName, scope: Scope, fields: Fields, parentResource?: ResourceName): Fields {
    const mode = sourceDataMode(request.headers);
    return mode ? withSourceData(account.profile, resource, fields, mode, pathContext(account, scope, parentResource)) : fields;
  }

  function dataHeaders(reply: FastifyReply): void {
    void reply.header(ctx.headers.dataRetrievedAt, new Date().toISOString());
  }

  /** One page of a list over its scopes, with filters, pagination meta and fault quirks. */
  function listPage(request: FastifyRequest, reply: FastifyReply, account: LinkedAccount, resource: ResourceName, scopes: Scope[], parentResource?: ResourceName) {
    const query = request.query as Record<string, unknown>;
    const page = parsePage(query, account.profile);
    const filters = parseFilters(query.filters);
    if (filters.length > 0 && !supportOf(account, resource).filterable) {
      throw new BadRequestError(`Filters on ${resource} are not supported by ${account.profile.name}`);
    }
    if (hasFault(request, 'repeat-page')) Object.assign(page, { page: page.page, offset: 0 });
    // Pages that cycle: 1, 2, 1, 2, ... each saying there is more.
    const alternating = hasFault(request, 'alternating-pages');
    if (alternating) Object.assign(page, { offset: ((page.page - 1) % 2) * page.perPage });
    dataHeaders(reply);
    if (hasFault(request, 'endless-pages')) return sendJson(reply, endlessPage(page.page, page.perPage));
    const mode = sourceDataMode(request.headers);
    const profile = account.profile;
    const paths = new Map<Scope, PathContext>();
    const pathOf = (scope: Scope): PathContext => {
      let p = paths.get(scope);
      if (!p) paths.set(scope, (p = pathContext(account, scope, parentResource)));
      return p;
    };
    // Items of `Project-Id: *` lists carry their project in project_id; scope per item for paths.
    const pathScope = (f: Fields): Scope => (scopes.length === 1 ? scopes[0]! : (scopes.find((s) => s.project?.id === f.project_id) ?? scopes[0]!));
    // Texts are kept for one-scope lists (the scope gives the path context) that fit in half the
    // cache: reading through a bigger one would evict everything before it is asked for again.
    const cached = records.enabled && scopes.length === 1 && d.count(account, resource, scopes[0]!) * recordBytes <= records.capacity / 2;
    let context = '';
    if (cached) {
      records.sync(d.overlay.version);
      context = `${JSON.stringify(mode)}\n${mode ? JSON.stringify(pathOf(scopes[0]!)) : ''}\n`;
    }
    let segment: Segment | undefined;
    let segmentList: string | null = null;
    const segmentOf = (list: string): Segment => {
      if (list !== segmentList || !segment) {
        segment = records.segment(context + list);
        segmentList = list;
      }
      return segment;
    };
    const w = new JsonWriter(Math.min(16 * 1024 * 1024, Math.max(16 * 1024, Math.ceil(page.perPage * recordBytes * 1.2))));
    w.text('{"data":[');
    let n = 0;
    let held = -1;
    const visitor: PageVisitor = {
      item: (fields, list, index) => {
        if (n++ > 0) w.byte(0x2c);
        if (fields === null) return records.copyTo(held, w);
        const start = w.at;
        writeRecord(w, profile, resource, fields, mode, mode ? pathOf(pathScope(fields)) : noPath);
        if (cached && list !== null) records.keep(segmentOf(list), index, w, start);
      },
    };
    if (cached) visitor.has = (list, index) => (held = records.find(segmentOf(list), index)) >= 0;
    const start = w.at;
    const { returned, total } = d.eachInPage(account, resource, scopes, { offset: page.offset, limit: page.perPage, filters }, visitor);
    if (returned > 0) recordBytes = Math.max(256, Math.round((w.at - start) / returned));
    const meta: { current_page: number; has_more_results: boolean | null } = pageMeta(account.profile, page, returned, total);
    const lie = hasFault(request, 'lying-has-more');
    if (lie) meta.has_more_results = lie.has_more_results !== undefined ? lie.has_more_results : meta.has_more_results === null ? true : !meta.has_more_results;
    if (alternating) meta.has_more_results = true;
    w.text(`],"meta":${JSON.stringify(meta)}}`);
    // Once sent (all of it handed to the socket, or copied by an inject), the buffer may serve another page.
    const backing = w.backing;
    if (isPooled(backing)) reply.raw.once('finish', () => releaseBuffer(backing));
    return sendJson(reply, w.take());
  }

  function parentOf(account: LinkedAccount, request: FastifyRequest, resource: TopLevelResource, id: string): { scope: Scope; ref: Ref } {
    const [scope] = scopesFor(ctx, account, request, resource, false);
    const ref = d.find(account, resource, scope!, id);
    if (!ref) throw new NotFoundError(`${resource} ${id} not found`);
    return { scope: scope!, ref };
  }

  function folderView(request: FastifyRequest, account: LinkedAccount, scope: Scope, folder: Ref): Fields {
    const files = d.all(account, 'files', scope).filter((f) => f.folder_id === folder.id);
    const folders = d.all(account, 'folders', scope).filter((f) => f.parent_id === folder.id);
    return {
      ...render(request, account, 'folders', scope, folder.fields),
      files: files.map((f) => render(request, account, 'files', scope, f)),
      folders: folders.map((f) => render(request, account, 'folders', scope, f)),
    };
  }

  app.get('/root-folder', opts, async (request, reply) => {
    const account = accountOf(request.svc);
    const [scope] = scopesFor(ctx, account, request, 'folders', false);
    const root = d.all(account, 'folders', scope!).find((f) => f.parent_id === null || f.parent_id === undefined);
    if (!root) throw new NotFoundError('This project has no root folder');
    dataHeaders(reply);
    return folderView(request, account, scope!, d.find(account, 'folders', scope!, String(root.id))!);
  });

  app.get('/:resource', opts, async (request, reply) => {
    const { resource: name } = request.params as Params;
    const resource = topLevel(request, name);
    const account = accountOf(request.svc);
    const scopes = scopesFor(ctx, account, request, resource, true);
    return listPage(request, reply, account, resource, scopes);
  });

  app.get('/:resource/:id', opts, async (request, reply) => {
    const { resource: name, id } = request.params as Params;
    const resource = topLevel(request, name);
    const account = accountOf(request.svc);
    const { scope, ref } = parentOf(account, request, resource, id!);
    dataHeaders(reply);
    if (resource === 'folders') return folderView(request, account, scope, ref);
    return render(request, account, resource, scope, ref.fields);
  });

  /** Children (line items, versions) and a folder's files and subfolders. */
  app.get('/:resource/:id/:sub', opts, async (request, reply) => {
    const { resource: name, id, sub } = request.params as Params;
    const resource = topLevel(request, name);
    const account = accountOf(request.svc);
    if (resource === 'folders' && (sub === 'files' || sub === 'folders')) {
      const { scope, ref } = parentOf(account, request, 'folders', id!);
      const all = sub === 'files' ? d.all(account, 'files', scope).filter((f) => f.folder_id === ref.id) : d.all(account, 'folders', scope).filter((f) => f.parent_id === ref.id);
      const page = parsePage(request.query as Record<string, unknown>, account.profile);
      const items = all.slice(page.offset, page.offset + page.perPage);
      dataHeaders(reply);
      return { data: items.map((f) => render(request, account, sub === 'files' ? 'files' : 'folders', scope, f)), meta: pageMeta(account.profile, page, items.length, all.length) };
    }
    const child = childOf(resource, sub!);
    if (!child) routeNotFound(request);
    supportOf(account, child);
    const { scope, ref } = parentOf(account, request, resource, id!);
    return listPage(request, reply, account, child, [{ ...scope, parent: ref }], resource);
  });

  app.get('/:resource/:id/:sub/:subId', opts, async (request, reply) => {
    const { resource: name, id, sub, subId } = request.params as Params;
    const resource = topLevel(request, name);
    const account = accountOf(request.svc);
    const child = childOf(resource, sub!);
    if (!child) routeNotFound(request);
    supportOf(account, child);
    const { scope, ref } = parentOf(account, request, resource, id!);
    const childScope = { ...scope, parent: ref };
    const found = d.find(account, child, childScope, subId!);
    if (!found) throw new NotFoundError(`${childSpecs[child].segment} ${subId} not found in ${resource} ${id}`);
    dataHeaders(reply);
    return render(request, account, child, childScope, found.fields, resource);
  });

  // Writes, for the pairs a source system allows: create, update (PATCH or PUT), through the same
  // path as admin mutations, so webhooks fire.
  function writable(request: FastifyRequest, account: LinkedAccount, resource: ResourceName, verb: string): void {
    const s = supportOf(account, resource);
    if (!s.writable) throw new NotSupportedError(`${verb} ${resource} is not supported by ${account.profile.name}`);
  }

  /** Reference fields accept `source_id:<x>` like every place that takes a service UUID. */
  const referenceTargets: Record<string, TopLevelResource> = {
    cost_code_id: 'cost-codes',
    vendor_id: 'vendors',
    customer_id: 'customers',
    project_id: 'projects',
    folder_id: 'folders',
    opportunity_id: 'opportunities',
  };

  function resolveReferences(request: FastifyRequest, account: LinkedAccount, resource: TopLevelResource, fields: Fields): void {
    for (const [key, value] of Object.entries(fields)) {
      if (typeof value !== 'string' || !value.startsWith('source_id:')) continue;
      const target = key === 'parent_id' ? resource : referenceTargets[key];
      if (!target || !account.profile.resources[target]) continue;
      const [scope] = scopesFor(ctx, account, request, target, false);
      const found = d.find(account, target, scope!, value);
      if (!found) throw new BadRequestError(`${key}: no ${target} has ${value}`);
      fields[key] = found.id;
    }
  }

  function checkFields(request: FastifyRequest, reply: FastifyReply, account: LinkedAccount, resource: TopLevelResource, body: unknown): Fields {
    if (typeof body !== 'object' || body === null || Array.isArray(body)) throw new BadRequestError('The body must be a JSON object');
    const fields = { ...(body as Fields) };
    delete fields.source_data;
    resolveReferences(request, account, resource, fields);
    const prohibited = Object.keys(fields).filter((k) => account.profile.resources[resource]?.unsupportedFields?.includes(k));
    if (prohibited.length > 0) {
      if (headerValue(request.headers, 'ignore-prohibited-fields')?.toLowerCase() !== 'true') {
        throw new BadRequestError(`${account.profile.name} does not support the field(s) ${prohibited.join(', ')} on ${resource}; send Ignore-Prohibited-Fields: true to drop them`);
      }
      for (const k of prohibited) delete fields[k];
      void reply.header(ctx.headers.warnings, `Ignored unsupported field(s): ${prohibited.join(', ')}`);
    }
    return fields;
  }

  app.post('/:resource', opts, async (request, reply) => {
    const { resource: name } = request.params as Params;
    const resource = topLevel(request, name);
    const account = accountOf(request.svc);
    writable(request, account, resource, 'Creating');
    const [scope] = scopesFor(ctx, account, request, resource, false);
    const created = applyChange(ctx, account, resource, scope!, { op: 'create', object: checkFields(request, reply, account, resource, request.body) })!;
    const view = render(request, account, resource, scope!, created);
    dataHeaders(reply);
    // The contract shows budget line item creation answering a one-item list.
    if (resource === 'budget-line-items') return reply.code(201).send({ data: [view], meta: { current_page: 1, has_more_results: false } });
    return reply.code(201).send(view);
  });

  const update = async (request: FastifyRequest, reply: FastifyReply) => {
    const { resource: name, id } = request.params as Params;
    const resource = topLevel(request, name);
    const account = accountOf(request.svc);
    writable(request, account, resource, 'Updating');
    const [scope] = scopesFor(ctx, account, request, resource, false);
    const updated = applyChange(ctx, account, resource, scope!, { op: 'update', id: id!, patch: checkFields(request, reply, account, resource, request.body) });
    if (!updated) throw new NotFoundError(`${resource} ${id} not found`);
    dataHeaders(reply);
    return render(request, account, resource, scope!, updated);
  };
  app.patch('/:resource/:id', opts, update);
  app.put('/:resource/:id', opts, update);
}
