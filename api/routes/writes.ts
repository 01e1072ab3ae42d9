// Writes through the mirror, of every kind the upstream takes on the catalog's resources: create
// (POST collection, JSON or multipart), update (PATCH or PUT item), delete (DELETE item), bulk
// create and update (PATCH collection with `{creates, updates}`), the same under a parent (line
// items, versions) and a folder's new file. Each is forwarded as it came (its body streamed, never
// parsed; the contract's headers through forward()), the upstream's answer is relayed unchanged,
// and what the upstream did is applied to the mirror before the answer is sent, so a read right
// after the write sees it: the returned objects upserted, a deleted record soft-deleted as a pass's
// delete detection would mark it, each successful item of a bulk write applied. Nothing is applied
// when the upstream refuses or fails, nor for a bulk item that failed; a write is never resent (it
// is not idempotent). Writes elsewhere on the upstream's surface go through the catch-all forwarder.
import type { FastifyInstance, FastifyReply, FastifyRequest, FastifySchema } from 'fastify';
import { z } from 'zod';
import { isMirrored, knownProfile, scopeKindIn } from '../../connectors/source-systems/index.ts';
import { NotFoundError } from '../../lib/errors.ts';
import { childrenOf, formatScope, resourceDef, resources, type ResourceDef } from '../../lib/resources.ts';
import { realServiceCollections } from '../../lib/upstream-surface.ts';
import { getObject } from '../../connectors/operations.ts';
import type { UpstreamClient } from '../../connectors/upstream-client.ts';
import type { AccountStore, AccountSummary } from '../../mirror/control/accounts.ts';
import type { Pool } from '../../mirror/db/pool.ts';
import type { ReadRouter } from '../../mirror/reads/read-router.ts';
import { resolveId } from '../../mirror/reads/records-read.ts';
import { markDeletedWithChildren } from '../../mirror/records/deletes.ts';
import { applyObjects } from '../../mirror/records/object-writes.ts';
import { header, type Authenticator } from '../auth.ts';
import { forward, jsonOf, refuseHostileTarget, type UpstreamTarget } from '../forward.ts';
import {
  answer,
  asyncHeader,
  errorAnswer,
  forwardedSchema,
  headersOf,
  json,
  objectSchema,
  pathParams,
  readAsItCame,
  typedRoutes,
  type RouteApp,
} from '../route-schema.ts';

interface WriteRouteDeps {
  pool: Pool;
  /** Told of each write applied, so the account's next reads see it on whichever server answers them. */
  router?: ReadRouter;
  auth: Authenticator;
  target: UpstreamTarget;
  headerPrefix: string;
  upstream: UpstreamClient;
  accounts: AccountStore;
}

/** A write's answer is one object, a one-item list (budget line items) or a bulk write's results: well under this. */
const maxAnswerBytes = 8 * 1024 * 1024;

type Json = Record<string, unknown>;
const isObject = (v: unknown): v is Json => typeof v === 'object' && v !== null && !Array.isArray(v);
const hasId = (o: Json): boolean => typeof o.id === 'string';

/** The objects a write answered: the object itself, or the `data` of a list answer. */
function objectsOf(body: unknown): Json[] {
  if (isObject(body) && Array.isArray(body.data)) return body.data.filter(isObject).filter(hasId);
  if (isObject(body) && hasId(body)) return [body];
  return [];
}

/**
 * The objects a bulk write created or updated: its results' `object`s whose item succeeded (a
 * `status` of 2xx, or none), in order; results that are objects themselves (a plain list answer)
 * count too. A failed item (`status` 4xx/5xx, an `error`) gives nothing.
 */
function bulkObjectsOf(body: unknown): Json[] {
  if (!isObject(body) || !Array.isArray(body.data)) return [];
  const out: Json[] = [];
  for (const item of body.data) {
    if (!isObject(item)) continue;
    const status = typeof item.status === 'number' ? item.status : undefined;
    if ((status !== undefined && (status < 200 || status >= 300)) || item.error !== undefined) continue;
    if (isObject(item.object) && hasId(item.object)) out.push(item.object);
    else if (!('object' in item) && hasId(item)) out.push(item);
  }
  return out;
}

/** Collections the real service writes in bulk (`PATCH {collection}` with `{creates, updates}`). */
const bulkPaths = new Set(realServiceCollections.filter(([, ops]) => ops.includes('bulk-patch')).map(([path]) => path));

/** Where written records live in the mirror: their scope, the project it names, and the parent's when under one. */
interface Place {
  scope: string;
  projectId?: string;
  parent?: { def: ResourceDef; id: string; scope: string };
}

/** A write's body and headers go upstream as they came (streamed, never parsed): documented only. */
const recordBody = readAsItCame(z.looseObject({}).describe("The record's fields, as the upstream takes them (optional `source_data`)."));
const bulkBody = readAsItCame(z.object({ creates: z.array(z.looseObject({})).optional(), updates: z.array(z.looseObject({ id: z.string() })).optional() }));
const writeHeaders = (projectScoped: boolean, ignoreProhibited: boolean) =>
  readAsItCame(
    headersOf({
      ...(projectScoped ? { 'project-id': z.string().describe('The project the record belongs to.') } : {}),
      ...(ignoreProhibited
        ? {
            'ignore-prohibited-fields': z.string().optional().describe('`true` drops fields the source system does not support instead of refusing the write.'),
          }
        : {}),
      ...asyncHeader,
    }),
  );

const writeDescription =
  "Forwarded to the upstream with the contract's headers (`Ignore-Prohibited-Fields`, `Project-Id`); the upstream's answer is relayed unchanged, and the object it returned is in the mirror before the answer is sent. A refused write changes nothing.";

/**
 * The schemas of the writes of one catalog resource, without their path parameters: the routes add
 * them (a child's parent id, an item's id).
 */
function writeSchemas(def: ResourceDef) {
  const parent = def.parent ? resourceDef(def.parent)! : undefined;
  const projectScoped = (parent ?? def).scope === 'project';
  const what = parent ? `${def.name.replace(/-/g, ' ')} of one of the ${parent.name.replace(/-/g, ' ')}` : def.name.replace(/-/g, ' ');
  const common = { tags: [def.name], access: 'account' } as const;
  const write = (summary: string) =>
    ({
      ...common,
      summary,
      description: writeDescription,
      headers: writeHeaders(projectScoped, true),
      body: recordBody,
      response: {
        200: json("The updated record (the upstream's answer).", objectSchema(def)),
        201: json("The created record (the upstream's answer; a one-item list for budget line items).", forwardedSchema),
        400: errorAnswer("The upstream's refusal, with its message."),
      },
    }) satisfies FastifySchema;
  return {
    create: write(`Create one of the ${what} upstream`),
    update: (method: 'PATCH' | 'PUT') => write(`Update one of the ${what} upstream (${method})`),
    delete: {
      ...common,
      summary: `Delete one of the ${what} upstream`,
      description:
        "Forwarded to the upstream; its answer is relayed unchanged. On its success the record (and what is listed under it) is marked deleted in the mirror before the answer is sent, as a pass's delete detection marks it: reads no longer serve it, `include_deleted=true` and the change feed show it. A refused delete changes nothing.",
      headers: writeHeaders(projectScoped, false),
      response: {
        204: answer("Deleted (the upstream's answer)."),
        404: errorAnswer("The upstream's answer: no such record, or the source system does not delete it."),
      },
    } satisfies FastifySchema,
    bulk: {
      ...common,
      summary: `Create and update many of the ${def.name.replace(/-/g, ' ')} upstream at once`,
      description:
        '`{creates: [...], updates: [{id, ...}]}`, forwarded to the upstream; its answer (one result per item) is relayed unchanged, and each item it created or updated is in the mirror before the answer is sent. A failed item, or a refused request, changes nothing.',
      headers: writeHeaders(projectScoped, false),
      body: bulkBody,
      response: {
        200: json('One result per item, creates first: `{operation, index, status, object}` or `{..., status, error}`.', forwardedSchema),
        400: errorAnswer("The upstream's refusal of the whole request, with its message."),
      },
    } satisfies FastifySchema,
  };
}

const filesDef = resourceDef('files')!;
const foldersDef = resourceDef('folders')!;

/** A folder's new file (multipart): the create of a file, under the folder's path. */
const uploadSchema = {
  ...writeSchemas(filesDef).create,
  summary: 'Upload a new file into a folder upstream (multipart/form-data, streamed)',
  params: pathParams('id'),
  consumes: ['multipart/form-data'],
  body: readAsItCame(z.looseObject({}).describe('Form fields as the upstream takes them (`name`, `content_type`) and the file in a part named `contents`.')),
} satisfies FastifySchema;

/** The path parameters of a write: the record's id (items), its parent's (children). */
interface WriteRef {
  id?: string;
  parentId?: string;
}

/** What the upstream did, applied to the mirror: where written records live, completed with their source data. */
class MirrorWrites {
  readonly #deps: WriteRouteDeps;
  constructor(deps: WriteRouteDeps) {
    this.#deps = deps;
  }

  /** Where a top-level resource's written record lives; undefined when its project is not mirrored yet. */
  async topPlace(request: FastifyRequest, account: AccountSummary, def: ResourceDef): Promise<Place | undefined> {
    const kind = scopeKindIn(knownProfile(account.sourceSystem), def.name, def.scope);
    if (kind !== 'project') return { scope: '' };
    const ref = header(request, 'project-id')?.trim();
    // The upstream answers a missing or unknown Project-Id itself; nothing to apply then.
    if (!ref || ref === '*') return undefined;
    const projectId = await resolveId(this.#deps.pool, account.id, 'projects', '', ref);
    return projectId ? { scope: formatScope([['project', projectId]]), projectId } : undefined;
  }

  /** Where a child's written record lives: under its parent (`.../ap-invoices=<id>`); undefined when the parent is not mirrored yet. */
  async childPlace(request: FastifyRequest, account: AccountSummary, def: ResourceDef, parentRef: string): Promise<Place | undefined> {
    const parentDef = resourceDef(def.parent!)!;
    const outer = await this.topPlace(request, account, parentDef);
    if (!outer) return undefined;
    const parentId = await resolveId(this.#deps.pool, account.id, parentDef.name, outer.scope, parentRef);
    if (!parentId) return undefined;
    const scope = `${outer.scope ? `${outer.scope}/` : ''}${parentDef.name}=${parentId}`;
    return { scope, ...(outer.projectId ? { projectId: outer.projectId } : {}), parent: { def: parentDef, id: parentId, scope: outer.scope } };
  }

  placeOf(request: FastifyRequest, account: AccountSummary, def: ResourceDef, ref: WriteRef): Promise<Place | undefined> {
    return def.scope === 'child' ? this.childPlace(request, account, def, ref.parentId!) : this.topPlace(request, account, def);
  }

  async readBack(account: AccountSummary, place: Place, path: string): Promise<Json | undefined> {
    try {
      const res = await getObject(this.#deps.upstream, {
        accountToken: await this.#deps.accounts.token(account.id),
        accountId: account.id,
        sourceSystem: account.sourceSystem,
        path,
        ...(place.projectId ? { projectId: place.projectId } : {}),
        includeSourceData: true,
      });
      return res.body;
    } catch {
      return undefined;
    }
  }

  /**
   * The written objects as the mirror keeps them: with their source data. An answer without it
   * (the caller did not ask) is completed by reading each object back; should that read fail, the
   * answer is applied as it is and the next pass completes it.
   */
  async complete(account: AccountSummary, def: ResourceDef, place: Place, objects: Json[]): Promise<Json[]> {
    if (objects.every((o) => 'source_data' in o)) return objects;
    return Promise.all(objects.map(async (o) => (await this.readBack(account, place, objectPath(def, place, String(o.id)))) ?? o));
  }

  /** Keeps the written objects (completed) as records of `resource` at their place. */
  async apply(account: AccountSummary, resource: ResourceDef, place: Place, objects: Json[]): Promise<void> {
    await applyObjects(
      this.#deps.pool,
      { accountId: account.id, resource: resource.name, scope: place.scope },
      await this.complete(account, resource, place, objects),
    );
  }

  /** Marks a deleted record (and what is listed under it) deleted, as a pass's delete detection would. */
  async markDeleted(account: AccountSummary, def: ResourceDef, place: Place, ref: string): Promise<void> {
    const id = await resolveId(this.#deps.pool, account.id, def.name, place.scope, ref);
    if (!id) return;
    const children = childrenOf(def.name).map((c) => c.name);
    await markDeletedWithChildren(this.#deps.pool, { accountId: account.id, resource: def.name, scope: place.scope }, id, {
      resources: children,
      scope: `${place.scope ? `${place.scope}/` : ''}${def.name}=${id}`,
    });
  }

  /** A write under a parent may change the parent as the upstream serves it (an invoice embeds its line items): read it again. */
  async refreshParent(account: AccountSummary, place: Place): Promise<void> {
    const parent = place.parent;
    if (!parent) return;
    const object = await this.readBack(account, place, `${parent.def.path}/${encodeURIComponent(parent.id)}`);
    if (object && hasId(object)) await applyObjects(this.#deps.pool, { accountId: account.id, resource: parent.def.name, scope: parent.scope }, [object]);
  }
}

/** The upstream path of one record: `/vendors/<id>`, `/ap-invoices/<parent>/line-items/<id>`. */
function objectPath(def: ResourceDef, place: Place, id: string): string {
  const base = place.parent ? `${place.parent.def.path}/${encodeURIComponent(place.parent.id)}/${def.path}` : def.path;
  return `${base}/${encodeURIComponent(id)}`;
}

type ApplyAnswer = (account: AccountSummary, place: Place, answer: Buffer) => Promise<void>;

/** The write handlers: each forwards, and on the upstream's success applies what it did. */
class WriteHandlers {
  readonly #deps: WriteRouteDeps;
  readonly #mirror: MirrorWrites;
  constructor(deps: WriteRouteDeps) {
    this.#deps = deps;
    this.#mirror = new MirrorWrites(deps);
  }

  #notApplied(reply: FastifyReply, def: ResourceDef, resource: ResourceDef): void {
    const where = def.scope === 'child' ? `its ${def.parent!.replace(/s$/, '')} is not mirrored yet` : 'its project is not mirrored yet';
    void reply.header(
      `${this.#deps.headerPrefix}-Warnings`,
      `The written ${resource.name} is not applied to the mirror yet (${where}); the next pass brings it.`,
    );
  }

  /**
   * Forwards a write addressed as `def` (its path, its place) of records of `resource` and, on the
   * upstream's success (2xx), applies it with `apply`; a refusal or a failure is relayed and changes
   * nothing.
   */
  async #forwardWrite(request: FastifyRequest, reply: FastifyReply, def: ResourceDef, resource: ResourceDef, ref: WriteRef, apply: ApplyAnswer) {
    const account = await this.#deps.auth.account(request);
    const place = await this.#mirror.placeOf(request, account, def, ref);
    return forward(request, reply, this.#deps.target, {
      account,
      capture: {
        maxBytes: maxAnswerBytes,
        onAnswer: async (status, body) => {
          // A resource this mirror does not keep (MIRROR_RESOURCES) has no copy to update.
          if (status < 200 || status >= 300 || !isMirrored(resource.name)) return;
          if (place === undefined) return this.#notApplied(reply, def, resource);
          await apply(account, place, body);
          // Answered once the account's reads, on any API process, are sure to see the write.
          await this.#deps.router
            ?.wrote(account.id)
            .catch((error: unknown) => request.log.warn({ err: error }, 'could not record the write position of the account'));
        },
      },
    });
  }

  /**
   * A create or an update: the object (or one-item list) the upstream answered, kept as `resource`
   * (a folder's new file is one of the `files`).
   */
  write(request: FastifyRequest, reply: FastifyReply, ref: WriteRef, def: ResourceDef, kind: 'create' | 'update', resource: ResourceDef = def) {
    return this.#forwardWrite(request, reply, def, resource, ref, async (account, place, body) => {
      const parsed = jsonOf(body);
      if (parsed === undefined) return;
      const objects = objectsOf(parsed);
      if (kind === 'update' && objects.length === 0)
        throw new NotFoundError(`The upstream answered the update of ${resource.name} ${ref.id} without the object.`);
      await this.#mirror.apply(account, resource, place, objects);
      await this.#mirror.refreshParent(account, place);
    });
  }

  /** A delete: the record (and what is listed under it) soft-deleted; the answer carries nothing the mirror needs. */
  remove(request: FastifyRequest, reply: FastifyReply, ref: WriteRef, def: ResourceDef) {
    return this.#forwardWrite(request, reply, def, def, ref, async (account, place) => {
      await this.#mirror.markDeleted(account, def, place, ref.id!);
      await this.#mirror.refreshParent(account, place);
    });
  }

  /** A bulk write: each item the upstream created or updated. */
  bulk(request: FastifyRequest, reply: FastifyReply, ref: WriteRef, def: ResourceDef) {
    return this.#forwardWrite(request, reply, def, def, ref, async (account, place, body) => {
      await this.#mirror.apply(account, def, place, bulkObjectsOf(jsonOf(body)));
    });
  }
}

/** The writes of a top-level resource: `/vendors`, `/vendors/:id`. */
function registerTopWrites(scope: RouteApp, h: WriteHandlers, def: ResourceDef): void {
  const schemas = writeSchemas(def);
  const item = { params: pathParams('id') };
  scope.post(def.path, { ...guarded, schema: schemas.create }, (request, reply) => h.write(request, reply, {}, def, 'create'));
  scope.patch(`${def.path}/:id`, { ...guarded, schema: { ...schemas.update('PATCH'), ...item } }, (request, reply) =>
    h.write(request, reply, request.params, def, 'update'),
  );
  scope.put(`${def.path}/:id`, { ...guarded, schema: { ...schemas.update('PUT'), ...item } }, (request, reply) =>
    h.write(request, reply, request.params, def, 'update'),
  );
  scope.delete(`${def.path}/:id`, { ...guarded, schema: { ...schemas.delete, ...item } }, (request, reply) => h.remove(request, reply, request.params, def));
  if (bulkPaths.has(def.path)) scope.patch(def.path, { ...guarded, schema: schemas.bulk }, (request, reply) => h.bulk(request, reply, {}, def));
}

/** The writes of a child resource, under its parent: `/ap-invoices/:parentId/line-items`, `.../:id`. */
function registerChildWrites(scope: RouteApp, h: WriteHandlers, def: ResourceDef): void {
  const base = `${resourceDef(def.parent!)!.path}/:parentId/${def.path}`;
  const schemas = writeSchemas(def);
  const collection = { params: pathParams('parentId') };
  const item = { params: pathParams('parentId', 'id') };
  scope.post(base, { ...guarded, schema: { ...schemas.create, ...collection } }, (request, reply) => h.write(request, reply, request.params, def, 'create'));
  scope.patch(`${base}/:id`, { ...guarded, schema: { ...schemas.update('PATCH'), ...item } }, (request, reply) =>
    h.write(request, reply, request.params, def, 'update'),
  );
  scope.put(`${base}/:id`, { ...guarded, schema: { ...schemas.update('PUT'), ...item } }, (request, reply) =>
    h.write(request, reply, request.params, def, 'update'),
  );
  scope.delete(`${base}/:id`, { ...guarded, schema: { ...schemas.delete, ...item } }, (request, reply) => h.remove(request, reply, request.params, def));
  if (bulkPaths.has(base))
    scope.patch(base, { ...guarded, schema: { ...schemas.bulk, ...collection } }, (request, reply) => h.bulk(request, reply, request.params, def));
}

// A hostile id (dot segments, backslashes, encoded separators, ...) is refused before anything
// else, async or not; forward() applies the whole path rule.
const guarded = { onRequest: refuseHostileTarget };

export function registerWriteRoutes(app: FastifyInstance, deps: WriteRouteDeps): void {
  const h = new WriteHandlers(deps);
  app.register(async (plain) => {
    const scope = typedRoutes(plain);
    // Bodies are forwarded as they came: JSON held as its bytes (an async request stores them),
    // anything else (multipart uploads) streamed.
    scope.removeAllContentTypeParsers();
    scope.addContentTypeParser('application/json', { parseAs: 'buffer' }, (_request, body, done) => done(null, body));
    scope.addContentTypeParser('*', (_request, payload, done) => done(null, payload));
    for (const def of resources) {
      if (def.scope === 'child') registerChildWrites(scope, h, def);
      else registerTopWrites(scope, h, def);
    }
    // A folder's new file (multipart): a file of the folder's project.
    scope.post('/folders/:id/files', { ...guarded, schema: uploadSchema }, (request, reply) =>
      h.write(request, reply, request.params, foldersDef, 'create', filesDef),
    );
  });
}
