// Unified reads from the mirror, in the contract's shape: lists with page/per_page and exact
// `has_more_results`, objects by id or `source_id:`, children through their parent, scoped to the
// caller's linked account (and to `Project-Id` for project-scoped resources). The read rule
// (read-plan.ts) decides first whether the mirror can answer a read exactly as the upstream would:
// filters and order_by in every form, equality parameters and Project-Id narrowing are evaluated
// here; anything else is forwarded as it came, with `{Prefix}-Warnings` saying why.
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { z } from 'zod';
import { isMirrored, knownProfile, perPageFor, scopeKindIn, type SourceSystemProfile } from '../../connectors/source-systems/index.ts';
import { BadRequestError, NotFoundError, PayloadTooLargeError } from '../../lib/errors.ts';
import { formatScope, resources, resourceDef, type ResourceDef } from '../../lib/resources.ts';
import { realServiceCollections } from '../../lib/upstream-surface.ts';
import type { AccountSummary } from '../../mirror/accounts.ts';
import type { Pool } from '../../mirror/pool.ts';
import { changesSince } from '../../mirror/changes.ts';
import { getRecord, listRecords, recordsWhere, resolveId, scopeSynced } from '../../mirror/records-read.ts';
import { idStanding } from '../../mirror/known-ids.ts';
import { assertForwardable, forward, type UpstreamTarget } from '../forward.ts';
import type { SyncControl } from '../sync-control.ts';
import { ProjectIds } from '../project-ids.ts';
import { header, type Authenticator } from '../auth.ts';
import { planGet, planList, planPagesOnly, type ReadRequest } from '../read-plan.ts';
import type { RecordFilter } from '../../mirror/record-filters.ts';
import { needsReshaping, reshape, sourceDataOptions } from '../source-data.ts';
import { linkExpiry, rewriteStorageUrls } from '../storage-proxy.ts';

export interface ResourceRouteDeps {
  pool: Pool;
  auth: Authenticator;
  headerPrefix: string;
  /** Where a scope the mirror has never synced is answered from, while its sync starts. */
  upstream?: UpstreamTarget;
  sync?: SyncControl;
  /** Settles `Project-Id` values (the mirror's projects, else one cached upstream lookup); else the mirror alone. */
  projects?: ProjectIds;
  /** Key of the storage proxy's links; without it URL fields are served as mirrored. */
  storageKey?: Buffer;
  /** Base of those links (PUBLIC_BASE_URL, else the listen address; storage-proxy.ts linkBase). */
  linkBase?: () => string;
}

/** The largest GET body a list read takes (filters and order keys: a few kilobytes at most). */
export const maxGetBodyBytes = 1024 * 1024;

/**
 * Reads the body of a GET (Fastify parses none on a GET): the real service's clients send list
 * filters as a JSON body on the GET. Read before the handler (preValidation), so the request's body
 * deadline (request-timeouts.ts) covers it as it covers any buffered body; kept as the bytes that
 * came, so a forwarded read sends them as they are.
 */
export async function readGetBody(request: FastifyRequest): Promise<void> {
  const h = request.headers;
  const announced = (h['content-length'] !== undefined && h['content-length'] !== '0') || h['transfer-encoding'] !== undefined;
  if (!announced || request.body !== undefined || request.raw.readableEnded) return;
  if (Number(h['content-length']) > maxGetBodyBytes) throw new PayloadTooLargeError(`The body of a read is at most ${maxGetBodyBytes} bytes; send fewer filters.`);
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of request.raw) {
    const b = Buffer.isBuffer(chunk) ? chunk : Buffer.from(chunk as string);
    size += b.length;
    if (size > maxGetBodyBytes) throw new PayloadTooLargeError(`The body of a read is at most ${maxGetBodyBytes} bytes; send fewer filters.`);
    chunks.push(b);
  }
  request.body = Buffer.concat(chunks);
}

/**
 * Paths of the upstream's own collections that an object route of the mirror would take for an id
 * (`/vendors/compliances` is a list of the real service, not the vendor "compliances").
 */
const collectionsUnderObjects = new Set(realServiceCollections.map(([path]) => path).filter((path) => !path.includes('{') && path.split('/').length === 3));

/** Page size as the source system serves it: its default when not asked, its largest when asked for more. */
function pageSize(profile: SourceSystemProfile | undefined, resource: string, asked: number | undefined): number {
  if (!profile) return asked ?? 100;
  return Math.min(asked ?? profile.defaultPerPage, perPageFor(profile, resource));
}

function parseQuery<T>(schema: z.ZodType<T>, value: unknown): T {
  const r = schema.safeParse(value);
  if (r.success) return r.data;
  const details = r.error.issues.map((i) => ({ path: i.path.join('.'), message: i.message }));
  throw new BadRequestError(`Invalid query: ${details.map((d) => `${d.path}: ${d.message}`).join('; ')}`, { details });
}

/** The scopes a request may read for a resource, given Project-Id and an optional parent id. */
async function scopesFor(
  pool: Pool,
  projects: ProjectIds,
  account: AccountSummary,
  def: ResourceDef,
  request: FastifyRequest,
  parentRef?: string,
): Promise<string[] | 'all'> {
  const projectHeader = header(request, 'project-id')?.trim();
  const profile = knownProfile(account.sourceSystem);
  const kind = scopeKindIn(profile, def.name, def.scope);
  const parentDef = def.parent ? resourceDef(def.parent) : undefined;
  const parentKind = parentDef ? scopeKindIn(profile, parentDef.name, parentDef.scope) : undefined;
  const needsProject = kind === 'project' || parentKind === 'project';
  let projectScopes: string[] = [''];
  let projectId: string | undefined;
  if (needsProject) {
    if (!projectHeader) throw new BadRequestError(`${def.name} is project-scoped: send a Project-Id header (a project id, source_id:<id>, or *).`);
    if (projectHeader === '*') {
      if (def.scope === 'child') throw new BadRequestError(`Project-Id: * is not accepted for ${def.name}; name one project.`);
      return 'all';
    }
    // A malformed value is a 400 and a project the account does not have a 404, before anything is
    // read, forwarded or started for the scope it would name.
    projectId = await projects.resolve(account, projectHeader);
    projectScopes = [formatScope([['project', projectId]])];
  }
  if (def.scope !== 'child') return projectScopes;
  const parentScope = projectScopes[0]!;
  // Once the parent's list is synced, a parent absent from it does not exist: nothing is forwarded or
  // started for it. Before that the upstream answers (and the sync started is the parent scope's).
  const parent = await idStanding(pool, { accountId: account.id, resource: def.parent!, scope: parentScope, ref: parentRef! });
  const parentId = parent.id ?? (parent.listSynced || parentRef!.startsWith('source_id:') ? undefined : parentRef);
  if (!parentId) throw new NotFoundError(`No ${def.parent} ${parentRef} in this account.`);
  const prefix = parentScope ? `${parentScope}/` : '';
  return [`${prefix}${def.parent}=${parentId}`];
}

const asStored = (json: string) => json;

function sendJson(reply: FastifyReply, prefix: string, retrievedAt: Date | null, body: string): FastifyReply {
  if (retrievedAt) void reply.header(`${prefix}-Data-Retrieved-At`, retrievedAt.toISOString());
  return reply.type('application/json; charset=utf-8').send(body);
}

export function registerResourceRoutes(app: FastifyInstance, deps: ResourceRouteDeps): void {
  const { pool, auth, headerPrefix } = deps;
  const debugIdHeader = `${headerPrefix}-Debug-Id`;
  const projects = deps.projects ?? new ProjectIds({ pool });

  /** URL fields as the storage proxy's links (resources without URL fields pass through as text). */
  function links(_request: FastifyRequest, accountId: string, resource: string): (json: string, scope: string) => string {
    const key = deps.storageKey;
    if (!key || !deps.linkBase || !resourceDef(resource)?.urlFields?.length) return asStored;
    // Never the request's Host (or X-Forwarded-*) header: the caller chooses it, and links built on it
    // point wherever the caller likes, for everyone a cache hands the answer to.
    const ctx = { base: deps.linkBase(), key, accountId, expiresAt: linkExpiry() };
    return (json: string, scope: string) => rewriteStorageUrls(json, resource, scope, ctx);
  }

  /**
   * A scope never synced: the upstream answers, with a warning, and a sync of it starts (at most once
   * a while per target, see SyncControl.startOnDemand). A child's sync is its parent scope's (the
   * parent's list and all its children), so a parent id the caller names never names a workflow; a
   * resource the source system does not serve starts none (no pass would bring it).
   */
  async function fromUpstream(request: FastifyRequest, reply: FastifyReply, account: AccountSummary, def: ResourceDef, scopes: string[] | 'all'): Promise<FastifyReply> {
    // A target the forwarder refuses (a hostile id, a path the credential may not reach) starts nothing.
    await assertForwardable(request, deps.upstream!, { account });
    void reply.header(`${headerPrefix}-Warnings`, `answered by the upstream: scope not synced yet (${def.name} is not mirrored yet for this scope; the mirror is syncing it)`);
    const profile = knownProfile(account.sourceSystem);
    if (deps.sync && (!profile || def.name in profile.resources)) {
      let scope = scopes === 'all' || scopes.length !== 1 ? undefined : scopes[0] || undefined;
      if (scope && def.scope === 'child') scope = scope.includes('/') ? scope.slice(0, scope.lastIndexOf('/')) : undefined;
      await deps.sync.startOnDemand({ accountId: account.id, mode: 'full', resource: def.name, scope }).catch((error: unknown) => request.log.warn({ err: error }, 'could not start a sync'));
    }
    return forward(request, reply, deps.upstream!, { account });
  }

  /** A read the mirror cannot answer exactly (read-plan.ts): forwarded as it came, saying why. */
  async function forwarded(request: FastifyRequest, reply: FastifyReply, account: AccountSummary, reason: string): Promise<FastifyReply> {
    if (!deps.upstream) throw new BadRequestError(`This read cannot be answered: ${reason}, and this mirror has no upstream to ask.`);
    await assertForwardable(request, deps.upstream, { account });
    void reply.header(`${headerPrefix}-Warnings`, `answered by the upstream: ${reason}`);
    return forward(request, reply, deps.upstream, { account });
  }

  /**
   * A catalog resource the account's source system does not serve, or that this mirror does not keep
   * (MIRROR_RESOURCES), is never mirrored for it: the upstream's own answer is relayed, as it came.
   */
  function notServed(account: AccountSummary, def: ResourceDef): string | undefined {
    if (!isMirrored(def.name)) return `${def.name} is not among the resources this mirror keeps (MIRROR_RESOURCES)`;
    const profile = knownProfile(account.sourceSystem);
    return profile && !(def.name in profile.resources) ? `${profile.name} does not serve ${def.name} (nothing of it is mirrored for this account)` : undefined;
  }

  const readRequest = (request: FastifyRequest, def: ResourceDef): ReadRequest => ({
    url: request.url,
    headers: request.headers,
    body: Buffer.isBuffer(request.body) ? request.body : undefined,
    def,
    ...(deps.upstream ? { apiVersion: deps.upstream.apiVersion } : {}),
  });

  /**
   * `Project-Id` on an account-level list: narrows it to the project's records through their
   * `project_id` (a project the account does not have is a 404, as for project-scoped resources).
   * On a resource whose records carry no project_id the upstream may narrow through links the
   * mirror does not hold: the read is forwarded (the reason is answered).
   */
  async function projectNarrowing(request: FastifyRequest, account: AccountSummary, def: ResourceDef): Promise<RecordFilter | string | undefined> {
    if (def.scope === 'child' || scopeKindIn(knownProfile(account.sourceSystem), def.name, def.scope) !== 'account') return undefined;
    const value = header(request, 'project-id')?.trim();
    if (!value || value === '*') return undefined;
    if (!def.fields.includes('project_id')) return `header Project-Id is not evaluated by the mirror on ${def.name} (its records carry no project_id)`;
    return { field: 'project_id', operator: '=', value: await projects.resolve(account, value) };
  }

  const list = (def: ResourceDef) => async (request: FastifyRequest<{ Params: { parentId?: string } }>, reply: FastifyReply) => {
    const account = await auth.account(request);
    const unserved = notServed(account, def);
    if (unserved) return forwarded(request, reply, account, unserved);
    const plan = planList(readRequest(request, def), debugIdHeader);
    const sd = sourceDataOptions(request.headers);
    const scopes = await scopesFor(pool, projects, account, def, request, request.params.parentId);
    if ('forward' in plan) return forwarded(request, reply, account, plan.forward);
    const q = plan.serve;
    const profile = knownProfile(account.sourceSystem);
    // A source system that does not filter this resource refuses every filter form: its answer is relayed.
    if (q.hasFilterForms && profile?.resources[def.name]?.updateTimeFilter === false) return forwarded(request, reply, account, `${profile.name} does not filter ${def.name}`);
    const narrowing = await projectNarrowing(request, account, def);
    if (typeof narrowing === 'string') return forwarded(request, reply, account, narrowing);
    if (deps.upstream && !(await scopeSynced(pool, account.id, def.name, scopes))) return fromUpstream(request, reply, account, def, scopes);
    const perPage = pageSize(profile, def.name, q.perPage);
    const result = await listRecords(pool, {
      accountId: account.id,
      resource: def.name,
      scopes,
      page: q.page,
      perPage,
      includeSourceData: sd.include,
      includeDeleted: q.includeDeleted,
      modifiedAfter: q.modifiedAfter,
      filters: narrowing ? [...q.filters, narrowing] : q.filters,
      orderBy: q.orderBy,
    });
    const link = links(request, account.id, def.name);
    const rows = result.rows.map((r, i) => link(needsReshaping(sd) ? reshape(r, sd) : r, result.rowScopes[i]!));
    const body = `{"data":[${rows.join(',')}],"meta":{"current_page":${q.page},"has_more_results":${result.hasMore}}}`;
    return sendJson(reply, headerPrefix, result.retrievedAt, body);
  };

  const get = (def: ResourceDef) => async (request: FastifyRequest<{ Params: { id: string; parentId?: string } }>, reply: FastifyReply) => {
    const account = await auth.account(request);
    if (def.scope !== 'child' && collectionsUnderObjects.has(`${def.path}/${request.params.id}`)) {
      return forwarded(request, reply, account, `unknown resource (${def.path}/${request.params.id} is a collection the mirror does not hold)`);
    }
    const unserved = notServed(account, def);
    if (unserved) return forwarded(request, reply, account, unserved);
    const plan = planGet(readRequest(request, def), debugIdHeader);
    const sd = sourceDataOptions(request.headers);
    const scopes = await scopesFor(pool, projects, account, def, request, request.params.parentId);
    if ('forward' in plan) return forwarded(request, reply, account, plan.forward);
    const ref = request.params.id;
    const bySourceId = ref.startsWith('source_id:');
    const found = await getRecord(pool, {
      accountId: account.id,
      resource: def.name,
      scopes,
      id: bySourceId ? ref.slice('source_id:'.length) : ref,
      bySourceId,
      includeSourceData: sd.include,
    });
    if (!found) {
      if (deps.upstream && !(await scopeSynced(pool, account.id, def.name, scopes))) return fromUpstream(request, reply, account, def, scopes);
      throw new NotFoundError(`No ${def.name.replace(/s$/, '')} ${ref} in this account.`);
    }
    return sendJson(reply, headerPrefix, found.retrievedAt, links(request, account.id, def.name)(needsReshaping(sd) ? reshape(found.json, sd) : found.json, found.scope));
  };

  // Folders as the contract serves them: a folder object carries its files and subfolders, and the
  // project's root folder (the one without a parent) is `/root-folder`.
  const foldersDef = resourceDef('folders')!;
  async function folderView(request: FastifyRequest, accountId: string, scope: string, folderJson: string): Promise<string> {
    const sd = sourceDataOptions(request.headers);
    const folder = JSON.parse(folderJson) as { id: string };
    const [files, folders] = await Promise.all(
      (['files', 'folders'] as const).map((resource) =>
        recordsWhere(pool, { accountId, resource, scope, field: resource === 'files' ? 'folder_id' : 'parent_id', value: folder.id, includeSourceData: sd.include }),
      ),
    );
    const fileLinks = links(request, accountId, 'files');
    const shape = (rows: string[], resource: 'files' | 'folders') =>
      rows.map((r) => {
        const shaped = needsReshaping(sd) ? reshape(r, sd) : r;
        return resource === 'files' ? fileLinks(shaped, scope) : shaped;
      });
    const own = needsReshaping(sd) ? reshape(folderJson, sd) : folderJson;
    return `${own.slice(0, -1)}${own.length > 2 ? ',' : ''}"files":[${shape(files!, 'files').join(',')}],"folders":[${shape(folders!, 'folders').join(',')}]}`;
  }

  async function oneScope(request: FastifyRequest, account: AccountSummary): Promise<string> {
    const scopes = await scopesFor(pool, projects, account, foldersDef, request);
    if (scopes === 'all' || scopes.length !== 1) throw new BadRequestError('Folders are read one project at a time: send a Project-Id header naming one project.');
    return scopes[0]!;
  }

  app.get('/root-folder', { preValidation: readGetBody }, async (request, reply) => {
    const account = await auth.account(request);
    const plan = planGet(readRequest(request, foldersDef), debugIdHeader);
    const scope = await oneScope(request, account);
    if ('forward' in plan) return forwarded(request, reply, account, plan.forward);
    const sd = sourceDataOptions(request.headers);
    if (deps.upstream && !(await scopeSynced(pool, account.id, 'folders', [scope]))) return fromUpstream(request, reply, account, foldersDef, [scope]);
    const [root] = await recordsWhere(pool, { accountId: account.id, resource: 'folders', scope, field: 'parent_id', value: null, includeSourceData: sd.include });
    if (!root) throw new NotFoundError('This project has no root folder in the mirror.');
    return sendJson(reply, headerPrefix, null, await folderView(request, account.id, scope, root));
  });

  app.get<{ Params: { id: string } }>('/folders/:id', { preValidation: readGetBody }, async (request, reply) => {
    const account = await auth.account(request);
    const plan = planGet(readRequest(request, foldersDef), debugIdHeader);
    const scope = await oneScope(request, account);
    if ('forward' in plan) return forwarded(request, reply, account, plan.forward);
    const sd = sourceDataOptions(request.headers);
    const ref = request.params.id;
    const bySourceId = ref.startsWith('source_id:');
    const found = await getRecord(pool, { accountId: account.id, resource: 'folders', scopes: [scope], id: bySourceId ? ref.slice('source_id:'.length) : ref, bySourceId, includeSourceData: sd.include });
    if (!found) {
      if (deps.upstream && !(await scopeSynced(pool, account.id, 'folders', [scope]))) return fromUpstream(request, reply, account, foldersDef, [scope]);
      throw new NotFoundError(`No folder ${ref} in this account.`);
    }
    return sendJson(reply, headerPrefix, found.retrievedAt, await folderView(request, account.id, scope, found.json));
  });

  for (const sub of ['files', 'folders'] as const) {
    app.get<{ Params: { id: string } }>(`/folders/:id/${sub}`, { preValidation: readGetBody }, async (request, reply) => {
      const account = await auth.account(request);
      const plan = planPagesOnly(readRequest(request, foldersDef), debugIdHeader);
      const scope = await oneScope(request, account);
      if ('forward' in plan) return forwarded(request, reply, account, plan.forward);
      const q = plan.serve;
      // Not synced (or not served by the account's source system at all): the upstream answers.
      if (deps.upstream && !(await scopeSynced(pool, account.id, sub, [scope]))) return fromUpstream(request, reply, account, resourceDef(sub)!, [scope]);
      const perPage = pageSize(knownProfile(account.sourceSystem), sub, q.perPage);
      const sd = sourceDataOptions(request.headers);
      const folderId = await resolveId(pool, account.id, 'folders', scope, request.params.id);
      if (!folderId) throw new NotFoundError(`No folder ${request.params.id} in this account.`);
      const field = sub === 'files' ? 'folder_id' : 'parent_id';
      const result = await listRecords(pool, {
        accountId: account.id,
        resource: sub,
        scopes: [scope],
        page: q.page,
        perPage,
        includeSourceData: sd.include,
        filters: [{ field, operator: '=', value: folderId }],
      });
      const link = links(request, account.id, sub);
      const rows = result.rows.map((r, i) => link(needsReshaping(sd) ? reshape(r, sd) : r, result.rowScopes[i]!));
      return sendJson(reply, headerPrefix, result.retrievedAt, `{"data":[${rows.join(',')}],"meta":{"current_page":${q.page},"has_more_results":${result.hasMore}}}`);
    });
  }

  // Beyond the upstream: a change feed per resource, followed with an opaque cursor.
  const changesQuery = z.object({
    cursor: z.string().max(512).optional(),
    limit: z.coerce.number().int().min(1).max(1000).default(100),
  });
  const cursorSchema = z.object({ at: z.iso.datetime({ offset: true }), key: z.string().max(1000) });
  app.get<{ Params: { resource: string } }>('/mirror/changes/:resource', async (request, reply) => {
    const account = await auth.account(request);
    const def = resourceDef(request.params.resource);
    if (!def) throw new NotFoundError(`No resource ${request.params.resource.slice(0, 64)}; resources: ${resources.map((r) => r.name).join(', ')}.`);
    const q = parseQuery(changesQuery, request.query);
    let after = { at: new Date(0), key: '' };
    if (q.cursor) {
      let decoded: unknown;
      try {
        decoded = JSON.parse(Buffer.from(q.cursor, 'base64url').toString('utf8'));
      } catch {
        decoded = undefined;
      }
      const c = cursorSchema.safeParse(decoded);
      if (!c.success) throw new BadRequestError('cursor is not one this endpoint issued; start without a cursor or pass next_cursor back unchanged.');
      after = { at: new Date(c.data.at), key: c.data.key };
    }
    const changes = await changesSince(pool, { accountId: account.id, resource: def.name, after, limit: q.limit });
    const last = changes.at(-1)?.cursor ?? { at: after.at, key: after.key };
    const nextCursor = Buffer.from(JSON.stringify({ at: last.at.toISOString(), key: last.key })).toString('base64url');
    return reply.send({
      data: changes.map((c) => ({ event: c.event, id: c.id, scope: c.scope, mirrored_at: c.mirroredAt.toISOString(), object: c.data })),
      meta: { next_cursor: nextCursor, has_more_results: changes.length === q.limit },
    });
  });

  const reads = { preValidation: readGetBody };
  for (const def of resources) {
    if (def.scope === 'child') {
      const parent = resourceDef(def.parent!)!;
      app.get<{ Params: { parentId: string } }>(`${parent.path}/:parentId/${def.path}`, reads, list(def));
      app.get<{ Params: { id: string; parentId: string } }>(`${parent.path}/:parentId/${def.path}/:id`, reads, get(def));
    } else {
      app.get<{ Params: { parentId?: string } }>(def.path, reads, list(def));
      // A folder is served with its files and subfolders (above).
      if (def.name !== 'folders') app.get<{ Params: { id: string } }>(`${def.path}/:id`, reads, get(def));
    }
  }
}
