// The unified endpoints' reads: lists, single objects (by id or `source_id:<x>`), children, folder
// trees. Writes are in write-routes.ts.
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { BadRequestError, NotFoundError } from '../../lib/errors.ts';
import type { LinkedAccount } from '../auth-and-link/accounts.ts';
import type { SandboxContext } from '../context.ts';
import { aggregates, childOf, childSpecs, isTopLevel, type ResourceName, type TopLevelResource } from '../data/catalog.ts';
import type { PageVisitor, Ref, Scope } from '../data/dataset.ts';
import { compareSortKeys, compileFilter, fieldResolver, instantOf, passes, sortKeyOf, type FieldRef, type Filter, type OrderKey } from '../data/filters.ts';
import type { Fields } from '../data/generators.ts';
import { rawObject, type PathContext } from '../data/raw-source.ts';
import { narrowsByProject, recordFields } from '../data/record-fields.ts';
import { hasFault } from '../faults/apply.ts';
import { endlessPage } from '../faults/hostile-bodies.ts';
import { accountOf } from '../http/request-state.ts';
import { headerValue } from '../http/validate.ts';
import { listQuery, readListBody } from './list-query.ts';
import { pageMeta, parsePage } from './pagination.ts';
import { findProject, pathContext, scopesFor, supportOf } from './scope.ts';
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
  // An aggregate list is reached at its own path only (`/vendors/compliances`).
  if (!isTopLevel(name) || aggregates.has(name)) routeNotFound(request);
  return name;
}

/** A list's filters and order applied to records held in memory (a folder's files and subfolders). */
function selectRecords(account: LinkedAccount, resource: ResourceName, records: Fields[], filters: readonly Filter[], orderBy: readonly OrderKey[]): Fields[] {
  if (filters.length === 0 && orderBy.length === 0) return records;
  const rows: Array<{ fields: Fields; key: ReturnType<typeof sortKeyOf> | null }> = [];
  for (const fields of records) {
    let raw: Fields | null = null;
    const valueOf = (ref: FieldRef): unknown =>
      ref.kind === 'time'
        ? instantOf(fields[ref.name])
        : ref.kind === 'field'
          ? (fields[ref.name] ?? null)
          : ((raw ??= rawObject(account.profile, resource, fields))[ref.key] ?? null);
    if (passes(filters, valueOf)) rows.push({ fields, key: orderBy.length > 0 ? sortKeyOf(orderBy, valueOf) : null });
  }
  if (orderBy.length > 0) rows.sort((a, b) => compareSortKeys(orderBy, a.key!, b.key!));
  return rows.map((r) => r.fields);
}

/** A list's page, adjusted by the request's pagination faults (repeats, cycles, a page stuck behind). */
function pageWithFaults(request: FastifyRequest, account: LinkedAccount): { page: ReturnType<typeof parsePage>; alternating: boolean; stuck: boolean } {
  const page = parsePage(request.query as Record<string, unknown>, account.profile);
  if (hasFault(request, 'repeat-page')) Object.assign(page, { page: page.page, offset: 0 });
  // Pages that cycle: 1, 2, 1, 2, ... each saying there is more.
  const alternating = Boolean(hasFault(request, 'alternating-pages'));
  if (alternating) Object.assign(page, { offset: ((page.page - 1) % 2) * page.perPage });
  const stuck = Boolean(hasFault(request, 'stuck-page'));
  if (stuck) Object.assign(page, { offset: Math.max(0, page.offset - page.perPage) });
  return { page, alternating, stuck };
}

/**
 * The sandbox's reads over its dataset: objects rendered as a source system serves them, and list
 * pages written straight to JSON bytes (through the record cache where a list fits in it).
 */
class SandboxReads {
  readonly #ctx: SandboxContext;
  /** Bytes per served record lately: the first guess at a page's size. */
  #recordBytes = 1024;

  constructor(ctx: SandboxContext) {
    this.#ctx = ctx;
  }

  render(request: FastifyRequest, account: LinkedAccount, resource: ResourceName, scope: Scope, fields: Fields, parentResource?: ResourceName): Fields {
    const mode = sourceDataMode(request.headers);
    return mode ? withSourceData(account.profile, resource, fields, mode, pathContext(account, scope, parentResource)) : fields;
  }

  dataHeaders(reply: FastifyReply): void {
    void reply.header(this.#ctx.headers.dataRetrievedAt, new Date().toISOString());
  }

  /**
   * What a list asks for besides its page: its filters (every form), order keys and equality
   * parameters, and `narrowing` (Project-Id on an account-level list) ANDed with them.
   */
  listSelection(
    request: FastifyRequest,
    account: LinkedAccount,
    resource: ResourceName,
    narrowing: readonly Filter[] = [],
  ): { filters: Filter[]; orderBy: OrderKey[] } {
    const asked = listQuery(request, resource, fieldResolver(resource, recordFields(resource)));
    if (asked.filters.length > 0 && !supportOf(account, resource).filterable) {
      throw new BadRequestError(`Filters on ${resource} are not supported by ${account.profile.name}`);
    }
    return { filters: [...asked.filters, ...asked.parameters, ...narrowing], orderBy: asked.orderBy };
  }

  /**
   * `Project-Id` on an account-level list whose records have a project (AP invoices): only that
   * project's records. `*` or no header: all of them.
   */
  projectNarrowing(request: FastifyRequest, account: LinkedAccount, resource: TopLevelResource): Filter[] {
    if (supportOf(account, resource).scope === 'project' || !narrowsByProject(resource)) return [];
    const raw = headerValue(request.headers, 'project-id')?.trim();
    if (!raw || raw === '*') return [];
    const project = findProject(this.#ctx, account, request, raw);
    return [compileFilter({ field: 'project_id', operator: '=', value: project.id }, 'Project-Id', fieldResolver(resource, recordFields(resource)))];
  }

  /** One page of a list over its scopes, with filters, order, pagination meta and fault quirks. */
  listPage(
    request: FastifyRequest,
    reply: FastifyReply,
    account: LinkedAccount,
    resource: ResourceName,
    scopes: Scope[],
    parentResource?: ResourceName,
    narrowing: readonly Filter[] = [],
  ) {
    const { page, alternating, stuck } = pageWithFaults(request, account);
    const { filters, orderBy } = this.listSelection(request, account, resource, narrowing);
    this.dataHeaders(reply);
    if (hasFault(request, 'endless-pages')) return sendJson(reply, endlessPage(page.page, page.perPage));
    const w = new JsonWriter(Math.min(16 * 1024 * 1024, Math.max(16 * 1024, Math.ceil(page.perPage * this.#recordBytes * 1.2))));
    w.text('{"data":[');
    const start = w.at;
    const visitor = this.#pageVisitor(w, request, account, resource, scopes, parentResource);
    const { returned, total } = this.#ctx.dataset.eachInPage(
      account,
      resource,
      scopes,
      { offset: page.offset, limit: page.perPage, filters, orderBy },
      visitor,
    );
    if (returned > 0) this.#recordBytes = Math.max(256, Math.round((w.at - start) / returned));
    const meta: { current_page: number; has_more_results: boolean | null } = pageMeta(account.profile, page, returned, total);
    const lie = hasFault(request, 'lying-has-more');
    if (lie) meta.has_more_results = lie.has_more_results !== undefined ? lie.has_more_results : meta.has_more_results === null ? true : !meta.has_more_results;
    if (alternating || stuck) meta.has_more_results = true;
    w.text(`],"meta":${JSON.stringify(meta)}}`);
    // Once sent (all of it handed to the socket, or copied by an inject), the buffer may serve another page.
    const backing = w.backing;
    if (isPooled(backing)) reply.raw.once('finish', () => releaseBuffer(backing));
    return sendJson(reply, w.take());
  }

  /**
   * Writes each record of a page into `w`, separated by commas. Texts are kept for one-scope lists
   * (the scope gives the path context) that fit in half the cache: reading through a bigger one would
   * evict everything before it is asked for again.
   */
  #pageVisitor(
    w: JsonWriter,
    request: FastifyRequest,
    account: LinkedAccount,
    resource: ResourceName,
    scopes: Scope[],
    parentResource?: ResourceName,
  ): PageVisitor {
    const d = this.#ctx.dataset;
    const records = this.#ctx.records;
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
    const cached = records.enabled && scopes.length === 1 && d.count(account, resource, scopes[0]!) * this.#recordBytes <= records.capacity / 2;
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
    return visitor;
  }

  parentOf(account: LinkedAccount, request: FastifyRequest, resource: TopLevelResource, id: string): { scope: Scope; ref: Ref } {
    const [scope] = scopesFor(this.#ctx, account, request, resource, false);
    const ref = this.#ctx.dataset.find(account, resource, scope!, id);
    if (!ref) throw new NotFoundError(`${resource} ${id} not found`);
    return { scope: scope!, ref };
  }

  folderView(request: FastifyRequest, account: LinkedAccount, scope: Scope, folder: Ref): Fields {
    const d = this.#ctx.dataset;
    const files = d.all(account, 'files', scope).filter((f) => f.folder_id === folder.id);
    const folders = d.all(account, 'folders', scope).filter((f) => f.parent_id === folder.id);
    return {
      ...this.render(request, account, 'folders', scope, folder.fields),
      files: files.map((f) => this.render(request, account, 'files', scope, f)),
      folders: folders.map((f) => this.render(request, account, 'folders', scope, f)),
    };
  }

  rootFolder(request: FastifyRequest, reply: FastifyReply): Fields {
    const d = this.#ctx.dataset;
    const account = accountOf(request.svc);
    const [scope] = scopesFor(this.#ctx, account, request, 'folders', false);
    const root = d.all(account, 'folders', scope!).find((f) => f.parent_id === null || f.parent_id === undefined);
    if (!root) throw new NotFoundError('This project has no root folder');
    this.dataHeaders(reply);
    return this.folderView(request, account, scope!, d.find(account, 'folders', scope!, String(root.id))!);
  }

  listTop(request: FastifyRequest, reply: FastifyReply, resource: TopLevelResource) {
    const account = accountOf(request.svc);
    const scopes = scopesFor(this.#ctx, account, request, resource, true);
    return this.listPage(request, reply, account, resource, scopes, undefined, this.projectNarrowing(request, account, resource));
  }

  getTop(request: FastifyRequest, reply: FastifyReply, resource: TopLevelResource, id: string) {
    const account = accountOf(request.svc);
    const { scope, ref } = this.parentOf(account, request, resource, id);
    this.dataHeaders(reply);
    if (resource === 'folders') return this.folderView(request, account, scope, ref);
    return this.render(request, account, resource, scope, ref.fields);
  }

  /** A folder's files or subfolders: a page of them, filtered and ordered in memory. */
  folderContents(request: FastifyRequest, reply: FastifyReply, account: LinkedAccount, sub: 'files' | 'folders', id: string) {
    const d = this.#ctx.dataset;
    const { scope, ref } = this.parentOf(account, request, 'folders', id);
    const page = parsePage(request.query as Record<string, unknown>, account.profile);
    const { filters, orderBy } = this.listSelection(request, account, sub);
    const contents =
      sub === 'files'
        ? d.all(account, 'files', scope).filter((f) => f.folder_id === ref.id)
        : d.all(account, 'folders', scope).filter((f) => f.parent_id === ref.id);
    const all = selectRecords(account, sub, contents, filters, orderBy);
    const items = all.slice(page.offset, page.offset + page.perPage);
    this.dataHeaders(reply);
    return {
      data: items.map((f) => this.render(request, account, sub === 'files' ? 'files' : 'folders', scope, f)),
      meta: pageMeta(account.profile, page, items.length, all.length),
    };
  }

  /** Children (line items, versions) and a folder's files and subfolders. */
  listUnder(request: FastifyRequest, reply: FastifyReply, { resource: name, id, sub }: Params) {
    const resource = topLevel(request, name);
    const account = accountOf(request.svc);
    if (resource === 'folders' && (sub === 'files' || sub === 'folders')) return this.folderContents(request, reply, account, sub, id!);
    const child = childOf(resource, sub!);
    if (!child) routeNotFound(request);
    supportOf(account, child);
    const { scope, ref } = this.parentOf(account, request, resource, id!);
    return this.listPage(request, reply, account, child, [{ ...scope, parent: ref }], resource);
  }

  /** One child (a line item, a version) by id, under its parent. */
  getUnder(request: FastifyRequest, reply: FastifyReply, { resource: name, id, sub, subId }: Params) {
    const resource = topLevel(request, name);
    const account = accountOf(request.svc);
    const child = childOf(resource, sub!);
    if (!child) routeNotFound(request);
    supportOf(account, child);
    const { scope, ref } = this.parentOf(account, request, resource, id!);
    const childScope = { ...scope, parent: ref };
    const found = this.#ctx.dataset.find(account, child, childScope, subId!);
    if (!found) throw new NotFoundError(`${childSpecs[child].segment} ${subId} not found in ${resource} ${id}`);
    this.dataHeaders(reply);
    return this.render(request, account, child, childScope, found.fields, resource);
  }
}

export function registerResourceRoutes(app: FastifyInstance, ctx: SandboxContext): void {
  const opts = { config: { kind: 'account' as const } };
  // Lists read a body sent with the GET (filters and order_by in it).
  const listOpts = { ...opts, preValidation: readListBody };
  const reads = new SandboxReads(ctx);

  app.get('/root-folder', opts, async (request, reply) => reads.rootFolder(request, reply));

  // Lists at a path of two names (`/vendors/compliances`): resources of their own, routed before an
  // object of the first (a vendor called "compliances").
  for (const [resource, { path }] of aggregates) {
    app.get(path, listOpts, async (request, reply) => reads.listTop(request, reply, resource));
    app.get(`${path}/:id`, opts, async (request, reply) => reads.getTop(request, reply, resource, (request.params as Params).id!));
  }

  app.get('/:resource', listOpts, async (request, reply) => reads.listTop(request, reply, topLevel(request, (request.params as Params).resource)));

  app.get('/:resource/:id', opts, async (request, reply) => {
    const { resource: name, id } = request.params as Params;
    return reads.getTop(request, reply, topLevel(request, name), id!);
  });

  app.get('/:resource/:id/:sub', listOpts, async (request, reply) => reads.listUnder(request, reply, request.params as Params));
  app.get('/:resource/:id/:sub/:subId', opts, async (request, reply) => reads.getUnder(request, reply, request.params as Params));
}
