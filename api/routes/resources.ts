// Unified reads from the mirror, in the contract's shape: lists with page/per_page and exact
// `has_more_results`, objects by id or `source_id:`, children through their parent, scoped to the
// caller's linked account (and to `Project-Id` for project-scoped resources). The read rule
// (read-plan.ts) decides first whether the mirror can answer a read exactly as the upstream would:
// filters and order_by in every form, equality parameters and Project-Id narrowing are evaluated
// here; anything else is forwarded as it came, with `{Prefix}-Warnings` saying why. The routes of
// the catalog's resources come from one loop over lib/resources.ts, each with its schema; the reads
// themselves are api/resource-reads.ts.
import type { FastifyInstance, FastifyReply, FastifyRequest, FastifySchema } from 'fastify';
import { z } from 'zod';
import { knownProfile } from '../../connectors/source-systems/index.ts';
import { BadRequestError, NotFoundError } from '../../lib/errors.ts';
import { resources, resourceDef, type ResourceDef } from '../../lib/resources.ts';
import { credentialsFirst } from '../auth.ts';
import { planGet, planList, planPagesOnly } from '../read-plan.ts';
import { acrossOrderUnknown, isUpstreamCollection, readGetBody, ResourceReads, sendJson, type ReadScope, type ResourceRouteDeps } from '../resource-reads.ts';
import {
  asyncHeader,
  errorAnswer,
  headersOf,
  json,
  objectSchema,
  pageSchema,
  pathParams,
  projectHeader,
  readAsItCame,
  sourceDataHeaders,
  typedRoutes,
  type RouteRequest,
} from '../route-schema.ts';

/**
 * The list parameters the read rule evaluates (read-plan.ts), read from the query as it came:
 * repeated, unknown or malformed, a parameter decides between a 400, an answer and a forward.
 */
const pageFields = {
  page: z.coerce.number().int().min(1).default(1).describe('Page number, from 1.'),
  per_page: z.coerce.number().int().min(1).max(1000).optional().describe("Records per page, 1 to 1000 (unset: the source system's default)."),
};
const listQuerySchema = readAsItCame(
  z.looseObject({
    ...pageFields,
    include_deleted: z.enum(['true', 'false']).optional().describe('Also list records the upstream deleted (the mirror keeps them, soft-deleted).'),
    modified_after: z.iso.datetime({ offset: true }).optional().describe('Only records the mirror changed after this time.'),
    filters: z
      .string()
      .optional()
      .describe('JSON array of `{field, operator, value}` (also repeated `filters[]=<JSON object>`, or a JSON body `{"filters": [...]}` on the GET).'),
    order_by: z.string().optional().describe("JSON array of `{field, dir}` (also `order_by[]=`, or the body's `order_by`)."),
  }),
);
const pagesQuerySchema = readAsItCame(z.looseObject(pageFields));

/** Headers of a read: evaluated by the read rule with every other header, as they came. */
const readHeaders = (projectScoped: boolean) =>
  readAsItCame(
    headersOf({
      ...(projectScoped ? projectHeader('The project (its id, `source_id:<id>`, or `*` for every project) for project-scoped resources.') : {}),
      ...sourceDataHeaders,
      ...asyncHeader,
    }),
  );
const folderHeaders = readAsItCame(headersOf({ 'project-id': z.string().describe('The project (its id or `source_id:<id>`).'), ...sourceDataHeaders }));

const what = (def: ResourceDef) => def.name.replace(/-/g, ' ');

/** A list's schema (a child resource's list adds its parent's id in the path). */
function listSchema(def: ResourceDef) {
  const parent = def.parent ? resourceDef(def.parent) : undefined;
  return {
    summary: `List ${what(def)}${parent ? ` of a ${parent.name.replace(/s$/, '').replace(/-/g, ' ')}` : ''}`,
    description:
      "Served from the mirror in the upstream's shape, with exact `has_more_results`. A scope the mirror never synced is answered by the upstream (with a warning header) while its sync starts.",
    tags: [def.name],
    access: 'account',
    querystring: listQuerySchema,
    headers: readHeaders((parent ?? def).scope === 'project'),
    response: { 200: json('A page of records.', pageSchema(def)) },
  } satisfies FastifySchema;
}

/** An object's schema: its id in the path, and its parent's for a child resource (`params`). */
function getSchema<P extends z.ZodType>(def: ResourceDef, params: P) {
  const parent = def.parent ? resourceDef(def.parent) : undefined;
  return {
    summary: `Get one of the ${what(def)} by id or \`source_id:<id>\``,
    tags: [def.name],
    access: 'account',
    params,
    headers: readHeaders((parent ?? def).scope === 'project'),
    response: { 200: json('The record.', objectSchema(def)), 404: errorAnswer('No such record in this account.') },
  } satisfies FastifySchema;
}

const folderSchema = (summary: string, notFound: string) =>
  ({
    summary,
    tags: ['folders'],
    access: 'account',
    headers: folderHeaders,
    response: { 200: json('The folder, with `files` and `folders`.', objectSchema(resourceDef('folders')!)), 404: errorAnswer(notFound) },
  }) satisfies FastifySchema;
const rootFolderSchema = folderSchema("The project's root folder, with its files and subfolders", 'No root folder mirrored for this project.');
const folderByIdSchema = {
  ...folderSchema('One folder by id or `source_id:<id>`, with its files and subfolders', 'No such folder in this account.'),
  params: pathParams('id'),
} satisfies FastifySchema;
const folderContentsSchema = (sub: 'files' | 'folders') =>
  ({
    summary: `The ${sub} of a folder`,
    tags: ['folders'],
    access: 'account',
    params: pathParams('id'),
    querystring: pagesQuerySchema,
    headers: folderHeaders,
    response: { 200: json('A page of records.', pageSchema(resourceDef(sub)!)) },
  }) satisfies FastifySchema;

// Beyond the upstream: a change feed per resource, followed with an opaque cursor.
const changesQuerySchema = z.object({
  cursor: z.string().max(512).optional().describe('`next_cursor` of the previous page; absent for the start of the feed.'),
  limit: z.coerce.number().int().min(1).max(1000).default(100),
});
const changesSchema = {
  summary: "A resource's change feed (beyond the upstream's API)",
  description: 'Every record the mirror created, updated or deleted, in order, followed with an opaque cursor.',
  tags: ['mirror'],
  access: 'account',
  params: pathParams('resource'),
  querystring: changesQuerySchema,
  response: {
    200: json(
      'A page of changes.',
      z.object({
        data: z.array(
          z.object({ event: z.enum(['CREATE', 'UPDATE', 'DELETE']), id: z.string(), scope: z.string(), mirrored_at: z.iso.datetime(), object: z.unknown() }),
        ),
        meta: z.object({ next_cursor: z.string(), has_more_results: z.boolean() }),
      }),
    ),
    404: errorAnswer('No such resource in the catalog.'),
  },
} satisfies FastifySchema;
const cursorSchema = z.object({ at: z.iso.datetime({ offset: true }), key: z.string().max(1000) });

/** The position a cursor names (the start without one); a cursor this endpoint did not issue is a 400. */
function cursorPosition(cursor: string | undefined): { at: Date; key: string } {
  if (!cursor) return { at: new Date(0), key: '' };
  let decoded: unknown;
  try {
    decoded = JSON.parse(Buffer.from(cursor, 'base64url').toString('utf8'));
  } catch {
    decoded = undefined;
  }
  const c = cursorSchema.safeParse(decoded);
  if (!c.success) throw new BadRequestError('cursor is not one this endpoint issued; start without a cursor or pass next_cursor back unchanged.');
  return { at: new Date(c.data.at), key: c.data.key };
}

// The handlers of the read routes: each decides answer or forward, then calls one read. The path
// parameters come from the route, as its schema parsed them.

async function listHandler(reads: ResourceReads, def: ResourceDef, request: FastifyRequest, reply: FastifyReply, parentId: string | undefined) {
  const r = await reads.open(request);
  const unserved = reads.notServed(r.account, def);
  if (unserved) return reads.forwarded(r, reply, unserved);
  const plan = planList(reads.readRequest(request, def), reads.debugIdHeader);
  const scopes = await reads.scopes(r, def, parentId);
  if ('forward' in plan) return reads.forwarded(r, reply, plan.forward);
  const q = plan.serve;
  const profile = knownProfile(r.account.sourceSystem);
  // A source system that does not filter this resource refuses every filter form: its answer is relayed.
  if (q.hasFilterForms && profile?.resources[def.name]?.updateTimeFilter === false)
    return reads.forwarded(r, reply, `${profile.name} does not filter ${def.name}`);
  const narrowing = await reads.projectNarrowing(r, def);
  if (typeof narrowing === 'string') return reads.forwarded(r, reply, narrowing);
  if (await reads.notSyncedYet(r, def.name, scopes)) return reads.fromUpstream(r, reply, def, scopes);
  const tooOld = await reads.tooOld(r, [def.name], scopes);
  if (tooOld) return reads.forwardedTooOld(r, reply, def, scopes, tooOld);
  const page = await reads.readPage(r, def, scopes, narrowing ? { ...q, filters: [...q.filters, narrowing] } : q);
  return page ? sendJson(reply, reads.deps.headerPrefix, page) : reads.forwarded(r, reply, acrossOrderUnknown(def.name));
}

async function getHandler(reads: ResourceReads, def: ResourceDef, request: FastifyRequest, reply: FastifyReply, params: { id: string; parentId?: string }) {
  const prefix = reads.deps.headerPrefix;
  const r = await reads.open(request);
  const ref = params.id;
  if (isUpstreamCollection(def, ref)) return reads.forwarded(r, reply, `unknown resource (${def.path}/${ref} is a collection the mirror does not hold)`);
  const unserved = reads.notServed(r.account, def);
  if (unserved) return reads.forwarded(r, reply, unserved);
  const plan = planGet(reads.readRequest(request, def), reads.debugIdHeader);
  const scopes = await reads.scopes(r, def, params.parentId);
  if ('forward' in plan) return reads.forwarded(r, reply, plan.forward);
  // An object is read in one project: the upstream's own answer to `Project-Id: *` is relayed.
  if (scopes === 'all') return reads.forwarded(r, reply, `Project-Id: * names no one project, and a single ${def.name} is read in its own`);
  const found = await reads.readObject(r, def, scopes, ref);
  if (found && reads.objectFreshEnough(r, def, scopes, ref, found)) return sendJson(reply, prefix, found);
  if (!found && (await reads.notSyncedYet(r, def.name, scopes))) return reads.fromUpstream(r, reply, def, scopes);
  // Not in the mirror's copy of a synced scope, or not verified as recently as asked: the upstream's answer.
  if (reads.deps.upstream) return reads.objectFromUpstream(r, reply, def, scopes, ref);
  if (found) return sendJson(reply, prefix, found);
  throw new NotFoundError(`No ${def.name.replace(/s$/, '')} ${ref} in this account.`);
}

// Folders as the contract serves them: a folder object carries its files and subfolders, and the
// project's root folder (the one without a parent) is `/root-folder`.
const foldersDef = resourceDef('folders')!;

/**
 * A source system that does not serve folders (or their files) answers its own refusal, whatever
 * Project-Id says: relayed as for lists, before the one project a folder read needs is asked for.
 */
const unservedFolders = (reads: ResourceReads, r: ReadScope, sub?: 'files' | 'folders'): string | undefined =>
  reads.notServed(r.account, foldersDef) ?? (sub ? reads.notServed(r.account, resourceDef(sub)!) : undefined);

const allProjects = 'Project-Id: * names no one project, and folders are read one project at a time';

/**
 * What every folder read settles first, in order, each answered by the upstream: a source system that
 * does not serve folders (or `sub`), a read the mirror does not evaluate, a read of no one project, a
 * project whose folders (or `sub`) are not synced yet, and a copy older than the read allows. Else the
 * read's scope, its project and its plan, to be served from the mirror.
 */
async function folderRead<T>(
  reads: ResourceReads,
  request: FastifyRequest,
  reply: FastifyReply,
  o: { sub?: 'files' | 'folders'; plan: (r: Parameters<typeof planGet>[0], debugIdHeader: string) => { serve: T } | { forward: string } },
): Promise<{ answered: FastifyReply } | { r: ReadScope; scope: string; serve: T }> {
  const r = await reads.open(request);
  const unserved = unservedFolders(reads, r, o.sub);
  if (unserved) return { answered: await reads.forwarded(r, reply, unserved) };
  const plan = o.plan(reads.readRequest(request, foldersDef), reads.debugIdHeader);
  const scope = await reads.oneProject(r);
  if ('forward' in plan) return { answered: await reads.forwarded(r, reply, plan.forward) };
  if (scope === undefined) return { answered: await reads.forwarded(r, reply, allProjects) };
  const def = o.sub ? resourceDef(o.sub)! : foldersDef;
  // Not synced (or not served by the account's source system at all): the upstream answers.
  if (await reads.notSyncedYet(r, def.name, [scope])) return { answered: await reads.fromUpstream(r, reply, def, [scope]) };
  // A folder is answered with its files and subfolders: its copy is as old as theirs.
  const tooOld = await reads.tooOld(r, ['folders', o.sub ?? 'files'], [scope]);
  if (tooOld) return { answered: await reads.forwardedTooOld(r, reply, def, [scope], tooOld) };
  return { r, scope, serve: plan.serve };
}

async function rootFolderHandler(reads: ResourceReads, request: FastifyRequest, reply: FastifyReply): Promise<FastifyReply> {
  const read = await folderRead(reads, request, reply, { plan: planGet });
  if ('answered' in read) return read.answered;
  const root = await reads.readRootFolder(read.r, read.scope);
  if (!root) throw new NotFoundError('This project has no root folder in the mirror.');
  return sendJson(reply, reads.deps.headerPrefix, await reads.readFolderView(read.r, read.scope, root, null));
}

async function folderHandler(reads: ResourceReads, request: FastifyRequest, reply: FastifyReply, id: string) {
  const read = await folderRead(reads, request, reply, { plan: planGet });
  if ('answered' in read) return read.answered;
  const { r, scope } = read;
  const found = await reads.readObject(r, foldersDef, [scope], id);
  if (found) return sendJson(reply, reads.deps.headerPrefix, await reads.readFolderView(r, scope, found.json, found.retrievedAt));
  // A folder created upstream since the last pass: the upstream's answer, never a false 404.
  if (reads.deps.upstream) return reads.forwarded(r, reply, `folder ${id} is not in the mirror's copy yet`);
  throw new NotFoundError(`No folder ${id} in this account.`);
}

async function folderContentsHandler(reads: ResourceReads, sub: 'files' | 'folders', request: FastifyRequest, reply: FastifyReply, id: string) {
  const read = await folderRead(reads, request, reply, { sub, plan: planPagesOnly });
  if ('answered' in read) return read.answered;
  const { r, scope } = read;
  const folderId = await reads.folderId(r, scope, id);
  const field = sub === 'files' ? 'folder_id' : 'parent_id';
  const q = { ...read.serve, includeDeleted: false, modifiedAfter: undefined, filters: [{ field, operator: '=' as const, value: folderId }], orderBy: [] };
  const page = await reads.readPage(r, resourceDef(sub)!, [scope], q);
  return page ? sendJson(reply, reads.deps.headerPrefix, page) : reads.forwarded(r, reply, acrossOrderUnknown(sub));
}

async function changesHandler(reads: ResourceReads, request: RouteRequest<typeof changesSchema>, reply: FastifyReply) {
  const account = await reads.deps.auth.account(request);
  const def = resourceDef(request.params.resource);
  if (!def) throw new NotFoundError(`No resource ${request.params.resource.slice(0, 64)}; resources: ${resources.map((d) => d.name).join(', ')}.`);
  const { cursor, limit } = request.query;
  const after = cursorPosition(cursor);
  const page = await reads.readChanges(account, def, after, limit);
  const last = page.at(-1)?.cursor ?? after;
  const nextCursor = Buffer.from(JSON.stringify({ at: last.at.toISOString(), key: last.key })).toString('base64url');
  return reply.send({
    data: page.map((c) => ({ event: c.event, id: c.id, scope: c.scope, mirrored_at: c.mirroredAt.toISOString(), object: c.data })),
    meta: { next_cursor: nextCursor, has_more_results: page.length === limit },
  });
}

export function registerResourceRoutes(fastify: FastifyInstance, deps: ResourceRouteDeps): void {
  const app = typedRoutes(fastify);
  const reads = new ResourceReads(deps);
  const hooks = { preValidation: readGetBody };

  app.get('/root-folder', { ...hooks, schema: rootFolderSchema }, (request, reply) => rootFolderHandler(reads, request, reply));
  app.get('/folders/:id', { ...hooks, schema: folderByIdSchema }, (request, reply) => folderHandler(reads, request, reply, request.params.id));
  for (const sub of ['files', 'folders'] as const) {
    app.get(`/folders/:id/${sub}`, { ...hooks, schema: folderContentsSchema(sub) }, (request, reply) =>
      folderContentsHandler(reads, sub, request, reply, request.params.id),
    );
  }
  app.get('/mirror/changes/:resource', { preValidation: credentialsFirst(deps.auth, 'account'), schema: changesSchema }, (request, reply) =>
    changesHandler(reads, request, reply),
  );

  // Every resource of the catalog: its list and its objects (children through their parent).
  for (const def of resources) {
    if (def.scope === 'child') {
      const base = `${resourceDef(def.parent!)!.path}/:parentId/${def.path}`;
      app.get(base, { ...hooks, schema: { ...listSchema(def), params: pathParams('parentId') } }, (request, reply) =>
        listHandler(reads, def, request, reply, request.params.parentId),
      );
      app.get(`${base}/:id`, { ...hooks, schema: getSchema(def, pathParams('parentId', 'id')) }, (request, reply) =>
        getHandler(reads, def, request, reply, request.params),
      );
    } else {
      app.get(def.path, { ...hooks, schema: listSchema(def) }, (request, reply) => listHandler(reads, def, request, reply, undefined));
      // A folder is served with its files and subfolders (above).
      if (def.name !== 'folders')
        app.get(`${def.path}/:id`, { ...hooks, schema: getSchema(def, pathParams('id')) }, (request, reply) =>
          getHandler(reads, def, request, reply, request.params),
        );
    }
  }
}
