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
import { resolveId } from '../../mirror/reads/records-read.ts';
import { markDeletedWithChildren } from '../../mirror/records/deletes.ts';
import { applyObjects } from '../../mirror/records/object-writes.ts';
import { header, type Authenticator } from '../auth.ts';
import { forward, jsonOf, refuseHostileTarget, type UpstreamTarget } from '../forward.ts';
import { answer, asyncHeader, errorAnswer, forwardedSchema, headersOf, json, objectSchema, pathParams, readAsItCame } from '../route-schema.ts';

interface WriteRouteDeps {
  pool: Pool;
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

type Params = { id?: string; parentId?: string };

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

/** The schemas of the writes of one catalog resource (its place: top level, or under its parent). */
function writeSchemas(def: ResourceDef) {
  const parent = def.parent ? resourceDef(def.parent)! : undefined;
  const projectScoped = (parent ?? def).scope === 'project';
  const what = parent ? `${def.name.replace(/-/g, ' ')} of one of the ${parent.name.replace(/-/g, ' ')}` : def.name.replace(/-/g, ' ');
  const collection = parent ? pathParams('parentId') : undefined;
  const item = parent ? pathParams('parentId', 'id') : pathParams('id');
  const common = { tags: [def.name], access: 'account' } as const;
  const write = (summary: string, params: FastifySchema['params']): FastifySchema => ({
    ...common,
    summary,
    description: writeDescription,
    ...(params ? { params } : {}),
    headers: writeHeaders(projectScoped, true),
    body: recordBody,
    response: {
      200: json("The updated record (the upstream's answer).", objectSchema(def)),
      201: json("The created record (the upstream's answer; a one-item list for budget line items).", forwardedSchema),
      400: errorAnswer("The upstream's refusal, with its message."),
    },
  });
  return {
    create: write(`Create one of the ${what} upstream`, collection),
    update: (method: 'PATCH' | 'PUT') => write(`Update one of the ${what} upstream (${method})`, item),
    delete: {
      ...common,
      summary: `Delete one of the ${what} upstream`,
      description:
        "Forwarded to the upstream; its answer is relayed unchanged. On its success the record (and what is listed under it) is marked deleted in the mirror before the answer is sent, as a pass's delete detection marks it: reads no longer serve it, `include_deleted=true` and the change feed show it. A refused delete changes nothing.",
      params: item,
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
      ...(collection ? { params: collection } : {}),
      headers: writeHeaders(projectScoped, false),
      body: bulkBody,
      response: {
        200: json('One result per item, creates first: `{operation, index, status, object}` or `{..., status, error}`.', forwardedSchema),
        400: errorAnswer("The upstream's refusal of the whole request, with its message."),
      },
    } satisfies FastifySchema,
  };
}

export function registerWriteRoutes(app: FastifyInstance, deps: WriteRouteDeps): void {
  const { pool, auth } = deps;

  /** Where a top-level resource's written record lives; undefined when its project is not mirrored yet. */
  async function topPlace(request: FastifyRequest, account: AccountSummary, def: ResourceDef): Promise<Place | undefined> {
    const kind = scopeKindIn(knownProfile(account.sourceSystem), def.name, def.scope);
    if (kind !== 'project') return { scope: '' };
    const ref = header(request, 'project-id')?.trim();
    // The upstream answers a missing or unknown Project-Id itself; nothing to apply then.
    if (!ref || ref === '*') return undefined;
    const projectId = await resolveId(pool, account.id, 'projects', '', ref);
    return projectId ? { scope: formatScope([['project', projectId]]), projectId } : undefined;
  }

  /** Where a child's written record lives: under its parent (`.../ap-invoices=<id>`); undefined when the parent is not mirrored yet. */
  async function childPlace(request: FastifyRequest, account: AccountSummary, def: ResourceDef, parentRef: string): Promise<Place | undefined> {
    const parentDef = resourceDef(def.parent!)!;
    const outer = await topPlace(request, account, parentDef);
    if (!outer) return undefined;
    const parentId = await resolveId(pool, account.id, parentDef.name, outer.scope, parentRef);
    if (!parentId) return undefined;
    const scope = `${outer.scope ? `${outer.scope}/` : ''}${parentDef.name}=${parentId}`;
    return { scope, ...(outer.projectId ? { projectId: outer.projectId } : {}), parent: { def: parentDef, id: parentId, scope: outer.scope } };
  }

  function placeOf(request: FastifyRequest<{ Params: Params }>, account: AccountSummary, def: ResourceDef): Promise<Place | undefined> {
    return def.scope === 'child' ? childPlace(request, account, def, request.params.parentId!) : topPlace(request, account, def);
  }

  /** The upstream path of one record: `/vendors/<id>`, `/ap-invoices/<parent>/line-items/<id>`. */
  function objectPath(def: ResourceDef, place: Place, id: string): string {
    const base = place.parent ? `${place.parent.def.path}/${encodeURIComponent(place.parent.id)}/${def.path}` : def.path;
    return `${base}/${encodeURIComponent(id)}`;
  }

  async function readBack(account: AccountSummary, place: Place, path: string): Promise<Json | undefined> {
    try {
      const res = await getObject(deps.upstream, {
        accountToken: await deps.accounts.token(account.id),
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
  async function complete(account: AccountSummary, def: ResourceDef, place: Place, objects: Json[]): Promise<Json[]> {
    if (objects.every((o) => 'source_data' in o)) return objects;
    return Promise.all(objects.map(async (o) => (await readBack(account, place, objectPath(def, place, String(o.id)))) ?? o));
  }

  /** A write under a parent may change the parent as the upstream serves it (an invoice embeds its line items): read it again. */
  async function refreshParent(account: AccountSummary, place: Place): Promise<void> {
    const parent = place.parent;
    if (!parent) return;
    const object = await readBack(account, place, `${parent.def.path}/${encodeURIComponent(parent.id)}`);
    if (object && hasId(object)) await applyObjects(pool, { accountId: account.id, resource: parent.def.name, scope: parent.scope }, [object]);
  }

  function notApplied(reply: FastifyReply, def: ResourceDef, resource: ResourceDef): void {
    const where = def.scope === 'child' ? `its ${def.parent!.replace(/s$/, '')} is not mirrored yet` : 'its project is not mirrored yet';
    void reply.header(`${deps.headerPrefix}-Warnings`, `The written ${resource.name} is not applied to the mirror yet (${where}); the next pass brings it.`);
  }

  /**
   * Forwards a write addressed as `def` (its path, its place) of records of `resource` and, on the
   * upstream's success (2xx), applies it with `apply`; a refusal or a failure is relayed and changes
   * nothing.
   */
  function forwardWrite(
    def: ResourceDef,
    resource: ResourceDef,
    apply: (request: FastifyRequest<{ Params: Params }>, account: AccountSummary, place: Place, answer: Buffer) => Promise<void>,
  ) {
    return async (request: FastifyRequest<{ Params: Params }>, reply: FastifyReply) => {
      const account = await auth.account(request);
      const place = await placeOf(request, account, def);
      return forward(request, reply, deps.target, {
        account,
        capture: {
          maxBytes: maxAnswerBytes,
          async onAnswer(status, body) {
            // A resource this mirror does not keep (MIRROR_RESOURCES) has no copy to update.
            if (status < 200 || status >= 300 || !isMirrored(resource.name)) return;
            if (place === undefined) return notApplied(reply, def, resource);
            await apply(request, account, place, body);
          },
        },
      });
    };
  }

  /**
   * A create or an update: the object (or one-item list) the upstream answered, kept as `resource`
   * (a folder's new file is one of the `files`).
   */
  const write = (def: ResourceDef, kind: 'create' | 'update', resource: ResourceDef = def) =>
    forwardWrite(def, resource, async (request, account, place, body) => {
      const parsed = jsonOf(body);
      if (parsed === undefined) return;
      const objects = objectsOf(parsed);
      if (kind === 'update' && objects.length === 0)
        throw new NotFoundError(`The upstream answered the update of ${resource.name} ${request.params.id} without the object.`);
      await applyObjects(pool, { accountId: account.id, resource: resource.name, scope: place.scope }, await complete(account, resource, place, objects));
      await refreshParent(account, place);
    });

  /** A delete: the record (and what is listed under it) soft-deleted; the answer carries nothing the mirror needs. */
  const remove = (def: ResourceDef) =>
    forwardWrite(def, def, async (request, account, place) => {
      const id = await resolveId(pool, account.id, def.name, place.scope, request.params.id!);
      if (id) {
        const children = childrenOf(def.name).map((c) => c.name);
        await markDeletedWithChildren(pool, { accountId: account.id, resource: def.name, scope: place.scope }, id, {
          resources: children,
          scope: `${place.scope ? `${place.scope}/` : ''}${def.name}=${id}`,
        });
      }
      await refreshParent(account, place);
    });

  /** A bulk write: each item the upstream created or updated. */
  const bulk = (def: ResourceDef) =>
    forwardWrite(def, def, async (_request, account, place, body) => {
      const objects = bulkObjectsOf(jsonOf(body));
      await applyObjects(pool, { accountId: account.id, resource: def.name, scope: place.scope }, await complete(account, def, place, objects));
    });

  app.register(async (scope) => {
    // Bodies are forwarded as they came: JSON held as its bytes (an async request stores them),
    // anything else (multipart uploads) streamed.
    scope.removeAllContentTypeParsers();
    scope.addContentTypeParser('application/json', { parseAs: 'buffer' }, (_request, body, done) => done(null, body));
    scope.addContentTypeParser('*', (_request, payload, done) => done(null, payload));
    // A hostile id (dot segments, backslashes, encoded separators, ...) is refused before anything
    // else, async or not; forward() applies the whole path rule.
    const guarded = { onRequest: refuseHostileTarget };
    for (const def of resources) {
      const base = def.scope === 'child' ? `${resourceDef(def.parent!)!.path}/:parentId/${def.path}` : def.path;
      const schemas = writeSchemas(def);
      scope.post<{ Params: Params }>(base, { ...guarded, schema: schemas.create }, write(def, 'create'));
      scope.patch<{ Params: Params }>(`${base}/:id`, { ...guarded, schema: schemas.update('PATCH') }, write(def, 'update'));
      scope.put<{ Params: Params }>(`${base}/:id`, { ...guarded, schema: schemas.update('PUT') }, write(def, 'update'));
      scope.delete<{ Params: Params }>(`${base}/:id`, { ...guarded, schema: schemas.delete }, remove(def));
      if (bulkPaths.has(base)) scope.patch<{ Params: Params }>(base, { ...guarded, schema: schemas.bulk }, bulk(def));
    }
    // A folder's new file (multipart): a file of the folder's project.
    const files = resourceDef('files')!;
    const upload: FastifySchema = {
      ...writeSchemas(files).create,
      summary: 'Upload a new file into a folder upstream (multipart/form-data, streamed)',
      params: pathParams('id'),
      consumes: ['multipart/form-data'],
      body: readAsItCame(
        z.looseObject({}).describe('Form fields as the upstream takes them (`name`, `content_type`) and the file in a part named `contents`.'),
      ),
    };
    scope.post<{ Params: Params }>('/folders/:id/files', { ...guarded, schema: upload }, write(resourceDef('folders')!, 'create', files));
  });
}
