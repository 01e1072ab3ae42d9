// The unified writes, as the real service's request collection shows them (lib/upstream-surface.ts):
// create (POST collection, JSON, or multipart/form-data with a file part where the collection
// uploads one), update (PUT or PATCH item), delete (DELETE item), bulk create and update (PATCH
// collection with `{creates, updates}`), and the same under a parent (line items, versions, a
// folder's files, attachments). Every change goes through applyChange, as admin mutations do, so
// webhooks fire and lists, filters and a full pass's delete detection see it.
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { z } from 'zod';
import { BadRequestError, isMirrorError, NotFoundError } from '../../lib/errors.ts';
import { resourceDef } from '../../lib/resources.ts';
import { realServiceCollections, type CollectionOperation } from '../../lib/upstream-surface.ts';
import type { LinkedAccount } from '../auth-and-link/accounts.ts';
import type { SandboxContext } from '../context.ts';
import {
  childOf,
  childSpecs,
  contractResourceNames,
  isTopLevel,
  webhookTypeOf,
  type ChildResource,
  type ResourceName,
  type TopLevelResource,
} from '../data/catalog.ts';
import type { Ref, Scope } from '../data/dataset.ts';
import type { Fields } from '../data/generators.ts';
import { uuidFromKey } from '../data/random.ts';
import { NotSupportedError } from '../http/errors.ts';
import { accountOf } from '../http/request-state.ts';
import { headerValue, parseInput } from '../http/validate.ts';
import { boundaryOf, parseMultipart, type Part } from '../pass-through/multipart.ts';
import { applyChange } from '../webhooks/changes.ts';
import { pathContext, scopesFor, supportOf } from './scope.ts';
import { sourceDataMode, withSourceData } from './source-data.ts';

type Params = { resource: string; id?: string; sub?: string; subId?: string };

/** Operations per collection path template (`/ap-invoices/{id}/line-items`), as the collection shows them. */
const operations = new Map<string, ReadonlySet<CollectionOperation>>(realServiceCollections.map(([path, ops]) => [path, new Set(ops)]));

/**
 * Writes the sandbox kept from before it followed the collection: creates and updates of leads
 * (CRM Cloud) and appointments (FieldOps), which the collection shows only read.
 */
const keptWrites: Readonly<Record<string, readonly CollectionOperation[]>> = { '/leads': ['create', 'update'], '/appointments': ['create', 'update'] };

function offers(template: string, op: CollectionOperation): boolean {
  return operations.get(template)?.has(op) === true || keptWrites[template]?.includes(op) === true;
}

/**
 * Collections under a parent whose creates upload a file (the collection sends `contents(file)` to
 * each `.../{id}/attachments`, `/files/{id}/versions` and `/folders/{id}/files`): multipart only.
 */
const uploads = new Set(realServiceCollections.filter(([path]) => /\/\{id\}\/(attachments|versions|files)$/.test(path)).map(([path]) => path));

/** Most items of one bulk write. */
const maxBulkItems = 100;

const bulkSchema = z.strictObject({
  creates: z.array(z.record(z.string(), z.unknown())).optional(),
  updates: z.array(z.looseObject({ id: z.string({ message: 'each update needs the id (or source_id:<id>) of the record it changes' }).min(1) })).optional(),
});

function routeNotFound(request: FastifyRequest): never {
  throw new NotFoundError(`Route ${request.method} ${request.url.split('?')[0]} not found`);
}

function topLevel(request: FastifyRequest, name: string): TopLevelResource {
  if (!isTopLevel(name)) routeNotFound(request);
  return name;
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

/**
 * The parent's id on a new child of the real service's other resources, when its catalog entry
 * lists the field (`subcontract_id` on a subcontract's line item), as their generated records carry it.
 */
function realParentField(child: ChildResource, parentId: string): Fields {
  if (contractResourceNames.has(child)) return {};
  const field = `${childSpecs[child].parent.replace(/ies$/, 'y').replace(/s$/, '').replace(/-/g, '_')}_id`;
  return resourceDef(child)?.fields.includes(field) ? { [field]: parentId } : {};
}

const verbs: Partial<Record<CollectionOperation, string>> = { create: 'Creating', update: 'Updating', delete: 'Deleting', 'bulk-patch': 'Bulk writing' };

/** A write's body: a JSON object, or a multipart form (text fields, and its file part if any). */
function bodyOf(request: FastifyRequest, template: string): { fields: unknown; file: Part | null } {
  const type = headerValue(request.headers, 'content-type')?.toLowerCase() ?? '';
  const upload = uploads.has(template);
  if (!type.startsWith('multipart/form-data')) {
    if (upload) throw new BadRequestError(`${request.method} ${template} uploads a file: send multipart/form-data with the file in a part named contents`);
    return { fields: request.body, file: null };
  }
  const boundary = boundaryOf(type);
  if (!boundary || !Buffer.isBuffer(request.body)) throw new BadRequestError('A multipart/form-data body needs its boundary in Content-Type');
  const parts = parseMultipart(request.body, boundary);
  const file = parts.find((p) => p.filename !== null) ?? null;
  if (!file) throw new BadRequestError('The multipart body has no file part: send the file in a part named contents (with a filename)');
  const fields: Fields = {};
  for (const p of parts) if (p !== file) fields[p.name] = p.data.toString('utf8');
  return { fields, file };
}

/** What an uploaded file makes of a record: its name, size and type (the bytes are not kept). */
function uploaded(resource: ResourceName, fields: Fields, file: Part): Fields {
  const { content_type: contentType, ...rest } = fields;
  const filename = file.filename || 'upload';
  const type = typeof contentType === 'string' && contentType ? contentType : (file.contentType ?? 'application/octet-stream');
  const name = typeof rest.name === 'string' && rest.name ? rest.name : filename;
  const size = String(file.data.length);
  if (resource === 'photos') return { ...rest, name, size, file_url: null, preview_url: null };
  if (resource === 'files') return { notes: null, ...rest, name, filename, size, type, version: '1', url: null, preview_url: null };
  return { ...rest, name, filename, size, url: null, preview_url: null };
}

/** A child addressed through its parent, for its update or delete. */
interface ChildTarget {
  account: LinkedAccount;
  parent: TopLevelResource;
  child: ChildResource;
  scope: Scope;
  subId: string;
}

/** The sandbox's writes over its dataset: each checked as the source system would, then applied with applyChange. */
class SandboxWrites {
  readonly #ctx: SandboxContext;
  constructor(ctx: SandboxContext) {
    this.#ctx = ctx;
  }

  #render(request: FastifyRequest, account: LinkedAccount, resource: ResourceName, scope: Scope, fields: Fields, parentResource?: ResourceName): Fields {
    const mode = sourceDataMode(request.headers);
    return mode ? withSourceData(account.profile, resource, fields, mode, pathContext(account, scope, parentResource)) : fields;
  }

  #dataHeaders(reply: FastifyReply): void {
    void reply.header(this.#ctx.headers.dataRetrievedAt, new Date().toISOString());
  }

  /**
   * The write is offered: the collection has it (else the route does not exist, as upstream), the
   * source system serves the resource and writes it.
   */
  #gate(request: FastifyRequest, account: LinkedAccount, template: string, op: CollectionOperation, resource: ResourceName): void {
    if (!offers(template, op)) routeNotFound(request);
    const s = supportOf(account, resource);
    if (!s.writable) throw new NotSupportedError(`${verbs[op] ?? 'Writing'} ${resource} is not supported by ${account.profile.name}`);
  }

  #parentOf(account: LinkedAccount, request: FastifyRequest, resource: TopLevelResource, id: string): { scope: Scope; ref: Ref } {
    const [scope] = scopesFor(this.#ctx, account, request, resource, false);
    const ref = this.#ctx.dataset.find(account, resource, scope!, id);
    if (!ref) throw new NotFoundError(`${resource} ${id} not found`);
    return { scope: scope!, ref };
  }

  /** A top-level write's resource, account and scope, once the write is offered. */
  #top(request: FastifyRequest, name: string, op: CollectionOperation): { resource: TopLevelResource; account: LinkedAccount; scope: Scope } {
    const resource = topLevel(request, name);
    const account = accountOf(request.svc);
    this.#gate(request, account, `/${resource}`, op, resource);
    const [scope] = scopesFor(this.#ctx, account, request, resource, false);
    return { resource, account, scope: scope! };
  }

  #resolveReferences(request: FastifyRequest, account: LinkedAccount, resource: ResourceName, fields: Fields): void {
    for (const [key, value] of Object.entries(fields)) {
      if (typeof value !== 'string' || !value.startsWith('source_id:')) continue;
      const target = key === 'parent_id' && isTopLevel(resource) ? resource : referenceTargets[key];
      if (!target || !account.profile.resources[target]) continue;
      const [scope] = scopesFor(this.#ctx, account, request, target, false);
      const found = this.#ctx.dataset.find(account, target, scope!, value);
      if (!found) throw new BadRequestError(`${key}: no ${target} has ${value}`);
      fields[key] = found.id;
    }
  }

  #checkFields(request: FastifyRequest, reply: FastifyReply, account: LinkedAccount, resource: ResourceName, body: unknown): Fields {
    if (typeof body !== 'object' || body === null || Array.isArray(body)) throw new BadRequestError('The body must be a JSON object');
    const fields = { ...(body as Fields) };
    delete fields.source_data;
    this.#resolveReferences(request, account, resource, fields);
    const prohibited = Object.keys(fields).filter((k) => account.profile.resources[resource]?.unsupportedFields?.includes(k));
    if (prohibited.length > 0) {
      if (headerValue(request.headers, 'ignore-prohibited-fields')?.toLowerCase() !== 'true') {
        throw new BadRequestError(
          `${account.profile.name} does not support the field(s) ${prohibited.join(', ')} on ${resource}; send Ignore-Prohibited-Fields: true to drop them`,
        );
      }
      for (const k of prohibited) delete fields[k];
      void reply.header(this.#ctx.headers.warnings, `Ignored unsupported field(s): ${prohibited.join(', ')}`);
    }
    return fields;
  }

  /** One create, in a list (top level) or under a parent. */
  #create(
    request: FastifyRequest,
    reply: FastifyReply,
    account: LinkedAccount,
    resource: ResourceName,
    scope: Scope,
    template: string,
    parentResource?: ResourceName,
    extra: Fields = {},
  ): Fields {
    const body = bodyOf(request, template);
    let fields = this.#checkFields(request, reply, account, resource, body.fields);
    if (body.file) fields = uploaded(resource, fields, body.file);
    const created = applyChange(this.#ctx, account, resource, scope, { op: 'create', object: { ...fields, ...extra } }, parentResource)!;
    return this.#render(request, account, resource, scope, created, parentResource);
  }

  createTop(request: FastifyRequest, reply: FastifyReply, { resource: name }: Params) {
    const { resource, account, scope } = this.#top(request, name, 'create');
    const view = this.#create(request, reply, account, resource, scope, `/${resource}`);
    this.#dataHeaders(reply);
    // The contract shows budget line item creation answering a one-item list.
    if (resource === 'budget-line-items') return reply.code(201).send({ data: [view], meta: { current_page: 1, has_more_results: false } });
    return reply.code(201).send(view);
  }

  updateTop(request: FastifyRequest, reply: FastifyReply, { resource: name, id }: Params) {
    const { resource, account, scope } = this.#top(request, name, 'update');
    const updated = applyChange(this.#ctx, account, resource, scope, {
      op: 'update',
      id: id!,
      patch: this.#checkFields(request, reply, account, resource, request.body),
    });
    if (!updated) throw new NotFoundError(`${resource} ${id} not found`);
    this.#dataHeaders(reply);
    return this.#render(request, account, resource, scope, updated);
  }

  deleteTop(request: FastifyRequest, reply: FastifyReply, { resource: name, id }: Params) {
    const { resource, account, scope } = this.#top(request, name, 'delete');
    if (!applyChange(this.#ctx, account, resource, scope, { op: 'delete', id: id! })) throw new NotFoundError(`${resource} ${id} not found`);
    return reply.code(204).send();
  }

  /**
   * Bulk create and update: `{creates: [fields...], updates: [{id, ...fields}...]}`, each item applied
   * on its own (one failing leaves the others done). The answer is 200 with one result per item,
   * creates first, each `{operation, index, status, object}` or `{operation, index, status, error: {message}}`.
   */
  bulk(request: FastifyRequest, reply: FastifyReply, { resource: name }: Params) {
    const { resource, account, scope } = this.#top(request, name, 'bulk-patch');
    const body = parseInput(bulkSchema, request.body);
    const creates = body.creates ?? [];
    const updates = body.updates ?? [];
    if (creates.length + updates.length === 0) throw new BadRequestError('Send at least one item in creates or updates');
    if (creates.length + updates.length > maxBulkItems)
      throw new BadRequestError(`At most ${maxBulkItems} items per bulk write (creates and updates together); this one has ${creates.length + updates.length}`);
    const results: Record<string, unknown>[] = [];
    const attempt = (operation: 'create' | 'update', index: number, run: () => { status: number; object: Fields }) => {
      try {
        results.push({ operation, index, ...run() });
      } catch (error) {
        if (!isMirrorError(error)) throw error;
        results.push({ operation, index, status: error.statusCode, error: { message: error.message } });
      }
    };
    creates.forEach((item, index) =>
      attempt('create', index, () => {
        const created = applyChange(this.#ctx, account, resource, scope, { op: 'create', object: this.#checkFields(request, reply, account, resource, item) })!;
        return { status: 201, object: this.#render(request, account, resource, scope, created) };
      }),
    );
    updates.forEach((item, index) =>
      attempt('update', index, () => {
        const { id, ...patch } = item;
        const updated = applyChange(this.#ctx, account, resource, scope, {
          op: 'update',
          id,
          patch: this.#checkFields(request, reply, account, resource, patch),
        });
        if (!updated) throw new NotFoundError(`${resource} ${id} not found`);
        return { status: 200, object: this.#render(request, account, resource, scope, updated) };
      }),
    );
    this.#dataHeaders(reply);
    return reply.code(200).send({ data: results });
  }

  /** Creates under a parent: a child (line item, version), a folder's file, an attachment. */
  createUnder(request: FastifyRequest, reply: FastifyReply, { resource: name, id, sub }: Params) {
    const resource = topLevel(request, name);
    const account = accountOf(request.svc);
    const template = `/${resource}/{id}/${sub}`;
    if (resource === 'folders' && sub === 'files') return this.#createFileInFolder(request, reply, account, template, id!);
    if (sub === 'attachments') return this.#createAttachment(request, reply, account, resource, template, id!);
    const child = childOf(resource, sub!);
    if (!child) routeNotFound(request);
    this.#gate(request, account, template, 'create', child);
    const { scope, ref } = this.#parentOf(account, request, resource, id!);
    const childScope = { ...scope, parent: ref };
    const extra: Fields =
      child === 'file-versions'
        ? { file_id: ref.id, version: String(this.#ctx.dataset.all(account, child, childScope).length + 1) }
        : realParentField(child, ref.id);
    const view = this.#create(request, reply, account, child, childScope, template, resource, extra);
    this.#dataHeaders(reply);
    return reply.code(201).send(view);
  }

  #createFileInFolder(request: FastifyRequest, reply: FastifyReply, account: LinkedAccount, template: string, folderId: string) {
    this.#gate(request, account, template, 'create', 'files');
    const { scope, ref } = this.#parentOf(account, request, 'folders', folderId);
    const view = this.#create(request, reply, account, 'files', scope, template, undefined, { folder_id: ref.id });
    this.#dataHeaders(reply);
    return reply.code(201).send(view);
  }

  /**
   * Attachments are no resource of the catalog: the answer describes what was received, under its
   * parent; nothing lists them later.
   */
  #createAttachment(request: FastifyRequest, reply: FastifyReply, account: LinkedAccount, resource: TopLevelResource, template: string, parentId: string) {
    const d = this.#ctx.dataset;
    this.#gate(request, account, template, 'create', resource);
    const { ref } = this.#parentOf(account, request, resource, parentId);
    const body = bodyOf(request, template);
    const fields = this.#checkFields(request, reply, account, resource, body.fields);
    const n = d.overlay.next();
    const now = d.overlay.tick();
    this.#dataHeaders(reply);
    return reply.code(201).send({
      id: uuidFromKey(`${d.seed}|${account.key}|attachments|${n}`),
      source_id: `attachment-${n}`,
      ...uploaded(resource, fields, body.file!),
      [`${webhookTypeOf(resource).replace(/-/g, '_')}_id`]: ref.id,
      source_create_time: now,
      source_update_time: now,
    });
  }

  /** Updates and deletes of a child, addressed through its parent. */
  #childTarget(request: FastifyRequest, op: CollectionOperation, { resource: name, id, sub, subId }: Params): ChildTarget {
    const parent = topLevel(request, name);
    const account = accountOf(request.svc);
    const child = childOf(parent, sub!);
    if (!child) routeNotFound(request);
    this.#gate(request, account, `/${parent}/{id}/${sub}`, op, child);
    const { scope, ref } = this.#parentOf(account, request, parent, id!);
    return { account, parent, child, scope: { ...scope, parent: ref }, subId: subId! };
  }

  updateChild(request: FastifyRequest, reply: FastifyReply, params: Params) {
    const t = this.#childTarget(request, 'update', params);
    const patch = this.#checkFields(request, reply, t.account, t.child, request.body);
    const updated = applyChange(this.#ctx, t.account, t.child, t.scope, { op: 'update', id: t.subId, patch }, t.parent);
    if (!updated) throw new NotFoundError(`${childSpecs[t.child].segment} ${t.subId} not found in ${t.parent} ${t.scope.parent!.id}`);
    this.#dataHeaders(reply);
    return this.#render(request, t.account, t.child, t.scope, updated, t.parent);
  }

  deleteChild(request: FastifyRequest, reply: FastifyReply, params: Params) {
    const t = this.#childTarget(request, 'delete', params);
    if (!applyChange(this.#ctx, t.account, t.child, t.scope, { op: 'delete', id: t.subId }, t.parent)) {
      throw new NotFoundError(`${childSpecs[t.child].segment} ${t.subId} not found in ${t.parent} ${t.scope.parent!.id}`);
    }
    return reply.code(204).send();
  }
}

export function registerWriteRoutes(app: FastifyInstance, ctx: SandboxContext): void {
  const opts = { config: { kind: 'account' as const } };
  const writes = new SandboxWrites(ctx);
  const params = (request: FastifyRequest) => request.params as Params;

  app.post('/:resource', opts, async (request, reply) => writes.createTop(request, reply, params(request)));
  const update = async (request: FastifyRequest, reply: FastifyReply) => writes.updateTop(request, reply, params(request));
  app.patch('/:resource/:id', opts, update);
  app.put('/:resource/:id', opts, update);
  // A delete answers 204 without a body: the contract shows none, and the caller named the record.
  app.delete('/:resource/:id', opts, async (request, reply) => writes.deleteTop(request, reply, params(request)));
  app.patch('/:resource', opts, async (request, reply) => writes.bulk(request, reply, params(request)));

  app.post('/:resource/:id/:sub', opts, async (request, reply) => writes.createUnder(request, reply, params(request)));
  const updateChild = async (request: FastifyRequest, reply: FastifyReply) => writes.updateChild(request, reply, params(request));
  app.patch('/:resource/:id/:sub/:subId', opts, updateChild);
  app.put('/:resource/:id/:sub/:subId', opts, updateChild);
  app.delete('/:resource/:id/:sub/:subId', opts, async (request, reply) => writes.deleteChild(request, reply, params(request)));
}
