// The reads behind the resource routes (api/routes/resources.ts): what a request may read (its
// scopes, Project-Id narrowing), the read functions that answer from the mirror as the bytes Postgres
// assembled (a page, an object, a folder with its contents, the change feed), and the one place a
// read is handed to the upstream instead (not synced yet, not served, not evaluated, with the reason).
import type { FastifyReply, FastifyRequest } from 'fastify';
import { getObject } from '../connectors/operations.ts';
import { isMirrored, knownProfile, perPageFor, scopeKindIn, type SourceSystemProfile } from '../connectors/source-systems/index.ts';
import { BadRequestError, NotFoundError, PayloadTooLargeError, UpstreamNotFoundError } from '../lib/errors.ts';
import { formatScope, parseScope, resourceDef, type ResourceDef } from '../lib/resources.ts';
import { realServiceCollections } from '../lib/upstream-surface.ts';
import type { AccountSummary } from '../mirror/control/accounts.ts';
import type { Pool } from '../mirror/db/pool.ts';
import type { ReadRouter } from '../mirror/reads/read-router.ts';
import { changesSince } from '../mirror/reads/changes.ts';
import { recordsWhere, resolveId, type RecordReader } from '../mirror/reads/records-read.ts';
import { AcrossOrderUnknown } from '../mirror/reads/list-strategies.ts';
import { idStanding } from '../mirror/streams/known-ids.ts';
import type { RecordFilter } from '../mirror/reads/record-filters.ts';
import { applyObjects } from '../mirror/records/object-writes.ts';
import { scopesLastVerifiedAt } from '../mirror/streams/freshness.ts';
import { assertForwardable, forward, forwardPlan, type UpstreamTarget } from './forward.ts';
import { freshEnough, maxAgeOf, ObjectLookups, type ObjectKey, type ObjectLookupsOptions } from './read-freshness.ts';
import type { SyncControl } from './sync-control.ts';
import { ProjectIds } from './project-ids.ts';
import { header, type Authenticator } from './auth.ts';
import type { ListPlan, ReadRequest } from './read-plan.ts';
import { needsReshaping, reshape, sourceDataOptions, type SourceDataOptions } from './source-data.ts';
import { linkExpiry, rewriteStorageUrls } from './storage-proxy.ts';

export interface ResourceRouteDeps {
  /** The primary: writes (an object the upstream answered for a read). */
  pool: Pool;
  /** The reads of the pool's records (one reader per pool, made once by buildApp): every read without a router. */
  reader: RecordReader;
  /** Picks the server of each request's reads: a replica that holds the account's writes, else the primary. */
  router?: ReadRouter;
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
  /** A resource's fields with a text expression index (MIRROR_INDEXED_FIELDS; lib/indexed-fields.ts textIndexed). */
  indexed?: (resource: string) => ReadonlySet<string>;
  /** How long the upstream's not-found answer for an object stands, and how many objects are remembered (read-freshness.ts). */
  objectLookups?: ObjectLookupsOptions;
}

/** The largest GET body a list read takes (filters and order keys: a few kilobytes at most). */
const maxGetBodyBytes = 1024 * 1024;

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
  if (Number(h['content-length']) > maxGetBodyBytes)
    throw new PayloadTooLargeError(`The body of a read is at most ${maxGetBodyBytes} bytes; send fewer filters.`);
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
export const isUpstreamCollection = (def: ResourceDef, id: string): boolean => def.scope !== 'child' && collectionsUnderObjects.has(`${def.path}/${id}`);

/** Page size as the source system serves it: its default when not asked, its largest when asked for more. */
function pageSize(profile: SourceSystemProfile | undefined, resource: string, asked: number | undefined): number {
  if (!profile) return asked ?? 100;
  return Math.min(asked ?? profile.defaultPerPage, perPageFor(profile, resource));
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
    projectId = await projects.resolve(account, projectHeader, pool);
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

/**
 * The envelope of every page a read answers, built here only: the rows are the JSON Postgres
 * assembled, joined as they are (never parsed, never serialised again).
 */
function pageBody(rows: readonly string[], page: number, hasMore: boolean): string {
  return `{"data":[${rows.join(',')}],"meta":{"current_page":${page},"has_more_results":${hasMore}}}`;
}

/** Why a list across projects is forwarded when the mirror does not know its order (ResourceReads.readPage). */
export const acrossOrderUnknown = (resource: string): string =>
  `the order of ${resource} across projects (Project-Id: *) is the upstream's, and the mirror knows it only from a full pass across projects that no change has followed since`;

/** A read's answer: its JSON text and when the mirror last retrieved what it holds (a header). */
interface Answer {
  body: string;
  retrievedAt: Date | null;
}

export function sendJson(reply: FastifyReply, prefix: string, answer: Answer): FastifyReply {
  if (answer.retrievedAt) void reply.header(`${prefix}-Data-Retrieved-At`, answer.retrievedAt.toISOString());
  return reply.type('application/json; charset=utf-8').send(answer.body);
}

/** An object reference as callers send it: an id, or `source_id:<id>`. */
function objectRef(ref: string): { id: string; bySourceId: boolean } {
  const bySourceId = ref.startsWith('source_id:');
  return { id: bySourceId ? ref.slice('source_id:'.length) : ref, bySourceId };
}

const asStored = (json: string) => json;

/** What every read of one request shares: the caller's account, its source-data options, its links. */
export interface ReadScope {
  request: FastifyRequest;
  account: AccountSummary;
  sd: SourceDataOptions;
  /** The server every read of this request runs on (its reader; its `pool` for the other reads), chosen at the first. */
  reader(): Promise<RecordReader>;
}

/**
 * The reads of the resource routes over one set of dependencies: the read functions answer from the
 * mirror; `forwarded` and `fromUpstream` hand a read to the upstream, saying why.
 */
export class ResourceReads {
  readonly deps: ResourceRouteDeps;
  readonly projects: ProjectIds;
  readonly debugIdHeader: string;
  /** What the upstream said lately about single objects the mirror did not hold or had not verified recently enough. */
  readonly lookups: ObjectLookups;

  constructor(deps: ResourceRouteDeps) {
    this.deps = deps;
    this.projects = deps.projects ?? new ProjectIds({ pool: deps.pool });
    this.debugIdHeader = `${deps.headerPrefix}-Debug-Id`;
    this.lookups = new ObjectLookups(deps.objectLookups);
  }

  /** Opens a read: the caller's account (401 otherwise) and its source-data options. */
  async open(request: FastifyRequest): Promise<ReadScope> {
    const account = await this.deps.auth.account(request);
    return { request, account, sd: sourceDataOptions(request.headers), reader: this.readerOf(account) };
  }

  /**
   * The server of an account's reads, chosen once per request when it first reads (a read that is
   * forwarded never asks): one server answers the freshness checks and the records alike, so
   * `{Prefix}-Data-Retrieved-At` and `Cache-Control: max-age` hold for what that server holds.
   */
  readerOf(account: AccountSummary): () => Promise<RecordReader> {
    const router = this.deps.router;
    if (!router) return () => Promise.resolve(this.deps.reader);
    let chosen: Promise<RecordReader> | undefined;
    return () => (chosen ??= router.readerFor(account.id));
  }

  /** The request as the read rule (read-plan.ts) sees it. */
  readRequest(request: FastifyRequest, def: ResourceDef): ReadRequest {
    return {
      url: request.url,
      headers: request.headers,
      body: Buffer.isBuffer(request.body) ? request.body : undefined,
      def,
      ...(this.deps.upstream ? { apiVersion: this.deps.upstream.apiVersion } : {}),
    };
  }

  async scopes(r: ReadScope, def: ResourceDef, parentRef?: string): Promise<string[] | 'all'> {
    return scopesFor((await r.reader()).pool, this.projects, r.account, def, r.request, parentRef);
  }

  /**
   * Folders are read one project at a time: the one scope Project-Id names, or undefined for
   * `Project-Id: *`, whose answer is the upstream's (the caller forwards it).
   */
  async oneProject(r: ReadScope): Promise<string | undefined> {
    const scopes = await this.scopes(r, foldersDef());
    if (scopes === 'all') return undefined;
    if (scopes.length !== 1) throw new BadRequestError('Folders are read one project at a time: send a Project-Id header naming one project.');
    return scopes[0]!;
  }

  /** Whether the upstream answers this read because the mirror never synced its scope. */
  async notSyncedYet(r: ReadScope, resource: string, scopes: string[] | 'all'): Promise<boolean> {
    return this.deps.upstream !== undefined && !(await (await r.reader()).scopeSynced(r.account.id, resource, scopes));
  }

  /**
   * A catalog resource the account's source system does not serve, or that this mirror does not keep
   * (MIRROR_RESOURCES), is never mirrored for it: the upstream's own answer is relayed, as it came.
   */
  notServed(account: AccountSummary, def: ResourceDef): string | undefined {
    if (!isMirrored(def.name)) return `${def.name} is not among the resources this mirror keeps (MIRROR_RESOURCES)`;
    const profile = knownProfile(account.sourceSystem);
    return profile && !(def.name in profile.resources) ? `${profile.name} does not serve ${def.name} (nothing of it is mirrored for this account)` : undefined;
  }

  /** A read the mirror cannot answer exactly (read-plan.ts): forwarded as it came, saying why. */
  async forwarded(r: ReadScope, reply: FastifyReply, reason: string): Promise<FastifyReply> {
    const upstream = this.deps.upstream;
    if (!upstream) throw new BadRequestError(`This read cannot be answered: ${reason}, and this mirror has no upstream to ask.`);
    await assertForwardable(r.request, upstream, { account: r.account });
    void reply.header(`${this.deps.headerPrefix}-Warnings`, `answered by the upstream: ${reason}`);
    return forward(r.request, reply, upstream, { account: r.account });
  }

  /**
   * Why the mirror's copy of these scopes is older than the request accepts (`Cache-Control:
   * max-age=N` or `no-cache`), or undefined when it is recent enough or no bound was asked. The copy's
   * age is its verification's (mirror/streams/freshness.ts): the start of the last pass that completed each
   * scope; a scope never completed is as old as can be.
   */
  async tooOld(r: ReadScope, resources: readonly string[], scopes: readonly string[] | 'all'): Promise<string | undefined> {
    const maxAge = maxAgeOf(r.request.headers);
    if (maxAge === undefined || !this.deps.upstream) return undefined;
    for (const resource of resources) {
      const v = await scopesLastVerifiedAt((await r.reader()).pool, { accountId: r.account.id, resource, scopes });
      if (!v.complete || !freshEnough(v.at, maxAge)) {
        const age = v.at ? `${Math.round((Date.now() - v.at.getTime()) / 1000)} s ago` : 'never completely';
        return `the request accepts data at most ${maxAge} s old; the mirror last verified ${resource} for this scope ${age}`;
      }
    }
    return undefined;
  }

  /**
   * A read whose scopes the mirror verified longer ago than the request accepts: forwarded as it came
   * (the upstream's answer is the exact, fresh one, at the cost of one request of the interactive
   * budget, as the caller would spend asking the upstream itself), and a refresh of the scope starts
   * (at most once a while per scope, SyncControl.startOnDemand), so the reads after it are answered
   * from a fresh copy again.
   */
  async forwardedTooOld(r: ReadScope, reply: FastifyReply, def: ResourceDef, scopes: string[] | 'all', reason: string): Promise<FastifyReply> {
    await assertForwardable(r.request, this.deps.upstream!, { account: r.account });
    this.startRefresh(r, def, scopes, 'incremental');
    return this.forwarded(r, reply, reason);
  }

  /** Starts a pass of the scope a read named (its parent scope for a child), without waiting for it. */
  private startRefresh(r: ReadScope, def: ResourceDef, scopes: string[] | 'all', mode: 'full' | 'incremental'): void {
    const sync = this.deps.sync;
    const profile = knownProfile(r.account.sourceSystem);
    if (!sync || (profile && !(def.name in profile.resources))) return;
    let scope = scopes === 'all' || scopes.length !== 1 ? undefined : scopes[0] || undefined;
    if (scope && def.scope === 'child') scope = scope.includes('/') ? scope.slice(0, scope.lastIndexOf('/')) : undefined;
    void sync
      .startOnDemand({ accountId: r.account.id, mode, resource: def.name, scope })
      .catch((error: unknown) => r.request.log.warn({ err: error }, 'could not start a sync'));
  }

  /**
   * Whether an object the mirror holds may be answered from its copy: no age bound was asked, or the
   * copy (or the upstream's answer for it, fetched by an earlier read) is recent enough.
   */
  objectFreshEnough(r: ReadScope, def: ResourceDef, scopes: readonly string[] | 'all', ref: string, found: Answer): boolean {
    const maxAge = maxAgeOf(r.request.headers);
    if (maxAge === undefined || !this.deps.upstream || freshEnough(found.retrievedAt, maxAge)) return true;
    const known = this.lookups.recent(this.objectKey(r, def, scopes, ref));
    return known !== undefined && known.found && freshEnough(known.at, maxAge);
  }

  private objectKey(r: ReadScope, def: ResourceDef, scopes: readonly string[] | 'all', ref: string): ObjectKey {
    return { accountId: r.account.id, resource: def.name, scope: scopes === 'all' ? '*' : scopes.join('\u0001'), ref };
  }

  /**
   * A single object the mirror cannot answer from its copy: it holds no such id in a synced scope (a
   * record created upstream since the scope's last pass would otherwise be a false 404), or its copy
   * is older than the request accepts. The upstream is asked for the object (with its source data,
   * the path and credential a forward would send), what it answers is applied to the mirror and the
   * read is answered from there, so the next read of it is the mirror's. A not-found answer stands
   * for a while per object (ObjectLookups), and concurrent reads of one object share one request: a
   * flood of reads of unknown ids costs one upstream request per id per window. A read the mirror
   * cannot place (several scopes, a link session's credential) is forwarded as it came instead.
   */
  async objectFromUpstream(r: ReadScope, reply: FastifyReply, def: ResourceDef, scopes: string[] | 'all', ref: string): Promise<FastifyReply> {
    const upstream = this.deps.upstream!;
    const key = this.objectKey(r, def, scopes, ref);
    const what = `${def.name.replace(/s$/, '')} ${ref}`;
    const plan = await forwardPlan(r.request, upstream, { account: r.account });
    const maxAge = maxAgeOf(r.request.headers);
    const known = this.lookups.recent(key);
    if (known && !known.found && freshEnough(known.at, maxAge)) throw new NotFoundError(`No ${what} in this account.`);
    if (scopes === 'all' || scopes.length !== 1 || plan.auth.kind !== 'account' || !upstream.client) {
      // A reply is thenable: the shared result names it inside an object.
      const answered = await this.lookups.once(key, async () => {
        await this.forwarded(r, reply, `${what} is not in the mirror's copy, or not verified recently enough`);
        const status = reply.statusCode;
        if (status === 404 || (status >= 200 && status < 300)) this.lookups.remember(key, status !== 404);
        return { reply };
      });
      if (answered.reply === reply) return reply;
      // A read that shared another's forward answers from what that one learnt.
      return this.objectFromUpstream(r, reply, def, scopes, ref);
    }
    const scope = scopes[0]!;
    const client = upstream.client;
    const token = plan.auth.accountToken;
    const outcome = await this.lookups.once(key, async () => {
      const projectId = parseScope(scope).find(([k]) => k === 'project')?.[1];
      try {
        const res = await getObject(client, {
          accountToken: token,
          accountId: r.account.id,
          sourceSystem: r.account.sourceSystem,
          path: plan.path.split('?')[0]!,
          ...(projectId ? { projectId } : {}),
          includeSourceData: true,
        });
        const at = Math.min(Date.now(), res.retrievedAt.getTime());
        await applyObjects(this.deps.pool, { accountId: r.account.id, resource: def.name, scope }, [res.body]);
        // The caller reads it right after, wherever its reads go.
        await this.deps.router?.wrote(r.account.id);
        this.lookups.remember(key, true, at);
        return { found: true, at };
      } catch (error) {
        if (!(error instanceof UpstreamNotFoundError)) throw error;
        this.lookups.remember(key, false);
        return { found: false, at: Date.now() };
      }
    });
    if (!outcome.found) throw new NotFoundError(`No ${what} in this account.`);
    // Read where it was written: the primary.
    const found = await this.readObject({ ...r, reader: () => Promise.resolve(this.deps.reader) }, def, scopes, ref);
    // The upstream's object is not where the read looks (its answer named another id): its own answer, as it came.
    if (!found) return this.forwarded(r, reply, `the upstream's ${what} is not kept by the mirror under this reference`);
    const at = new Date(outcome.at);
    return sendJson(reply, this.deps.headerPrefix, { ...found, retrievedAt: !found.retrievedAt || found.retrievedAt < at ? at : found.retrievedAt });
  }

  /**
   * A scope never synced: the upstream answers, with a warning, and a sync of it starts (at most once
   * a while per target, see SyncControl.startOnDemand). A child's sync is its parent scope's (the
   * parent's list and all its children), so a parent id the caller names never names a workflow; a
   * resource the source system does not serve starts none (no pass would bring it).
   */
  async fromUpstream(r: ReadScope, reply: FastifyReply, def: ResourceDef, scopes: string[] | 'all'): Promise<FastifyReply> {
    const { request, account } = r;
    const upstream = this.deps.upstream!;
    // A target the forwarder refuses (a hostile id, a path the credential may not reach) starts nothing.
    await assertForwardable(request, upstream, { account });
    void reply.header(
      `${this.deps.headerPrefix}-Warnings`,
      `answered by the upstream: scope not synced yet (${def.name} is not mirrored yet for this scope; the mirror is syncing it)`,
    );
    const profile = knownProfile(account.sourceSystem);
    const sync = this.deps.sync;
    if (sync && (!profile || def.name in profile.resources)) {
      let scope = scopes === 'all' || scopes.length !== 1 ? undefined : scopes[0] || undefined;
      if (scope && def.scope === 'child') scope = scope.includes('/') ? scope.slice(0, scope.lastIndexOf('/')) : undefined;
      await sync
        .startOnDemand({ accountId: account.id, mode: 'full', resource: def.name, scope })
        .catch((error: unknown) => request.log.warn({ err: error }, 'could not start a sync'));
    }
    return forward(request, reply, upstream, { account });
  }

  /**
   * `Project-Id` on an account-level list: narrows it to the project's records through their
   * `project_id` (a project the account does not have is a 404, as for project-scoped resources).
   * On a resource whose records carry no project_id the upstream may narrow through links the
   * mirror does not hold: the read is forwarded (the reason is answered).
   */
  async projectNarrowing(r: ReadScope, def: ResourceDef): Promise<RecordFilter | string | undefined> {
    if (def.scope === 'child' || scopeKindIn(knownProfile(r.account.sourceSystem), def.name, def.scope) !== 'account') return undefined;
    const value = header(r.request, 'project-id')?.trim();
    if (!value || value === '*') return undefined;
    if (!def.fields.includes('project_id')) return `header Project-Id is not evaluated by the mirror on ${def.name} (its records carry no project_id)`;
    return { field: 'project_id', operator: '=', value: await this.projects.resolve(r.account, value, (await r.reader()).pool) };
  }

  /** A record as served: reshaped for the source-data headers, URL fields as the storage proxy's links. */
  private shaper(r: ReadScope, resource: string): (json: string, scope: string) => string {
    const reshaped = needsReshaping(r.sd) ? (json: string) => reshape(json, r.sd) : asStored;
    const key = this.deps.storageKey;
    if (!key || !this.deps.linkBase || !resourceDef(resource)?.urlFields?.length) return reshaped;
    // Never the request's Host (or X-Forwarded-*) header: the caller chooses it, and links built on it
    // point wherever the caller likes, for everyone a cache hands the answer to.
    const ctx = { base: this.deps.linkBase(), key, accountId: r.account.id, expiresAt: linkExpiry() };
    return (json: string, scope: string) => rewriteStorageUrls(reshaped(json), resource, scope, ctx);
  }

  /**
   * One page of a list, as the plan asks it (filters, order, paging), in the envelope; undefined for a
   * list across projects whose order the mirror does not know to be the upstream's (mirror/reads/list-strategies.ts):
   * the caller forwards it ({@link acrossOrderUnknown}).
   */
  async readPage(r: ReadScope, def: ResourceDef, scopes: string[] | 'all', q: Omit<ListPlan, 'hasFilterForms'>): Promise<Answer | undefined> {
    const result = await (
      await r.reader()
    )
      .listRecords({
        accountId: r.account.id,
        resource: def.name,
        scopes,
        page: q.page,
        perPage: pageSize(knownProfile(r.account.sourceSystem), def.name, q.perPage),
        includeSourceData: r.sd.include,
        includeDeleted: q.includeDeleted,
        modifiedAfter: q.modifiedAfter,
        filters: q.filters,
        orderBy: q.orderBy,
        ...(this.deps.indexed ? { indexed: this.deps.indexed(def.name) } : {}),
      })
      .catch((error: unknown) => {
        if (error instanceof AcrossOrderUnknown) return undefined;
        throw error;
      });
    if (result === undefined) return undefined;
    const shape = this.shaper(r, def.name);
    return {
      body: pageBody(
        result.rows.map((row, i) => shape(row, result.rowScopes[i]!)),
        q.page,
        result.hasMore,
      ),
      retrievedAt: result.retrievedAt,
    };
  }

  /** One record by id or `source_id:`; undefined when the mirror has none. */
  async readObject(r: ReadScope, def: ResourceDef, scopes: string[] | 'all', ref: string): Promise<(Answer & { scope: string; json: string }) | undefined> {
    const found = await (
      await r.reader()
    ).getRecord({ accountId: r.account.id, resource: def.name, scopes, ...objectRef(ref), includeSourceData: r.sd.include });
    if (!found) return undefined;
    return { body: this.shaper(r, def.name)(found.json, found.scope), retrievedAt: found.retrievedAt, scope: found.scope, json: found.json };
  }

  /** A project's root folder (the one without a parent), as stored; undefined when it has none. */
  async readRootFolder(r: ReadScope, scope: string): Promise<string | undefined> {
    const [root] = await recordsWhere((await r.reader()).pool, {
      accountId: r.account.id,
      resource: 'folders',
      scope,
      field: 'parent_id',
      value: null,
      includeSourceData: r.sd.include,
    });
    return root;
  }

  /** Folders as the contract serves them: a folder object carries its files and subfolders. */
  async readFolderView(r: ReadScope, scope: string, folderJson: string, retrievedAt: Date | null): Promise<Answer> {
    const folder = JSON.parse(folderJson) as { id: string };
    const { pool } = await r.reader();
    const [files, folders] = await Promise.all(
      (['files', 'folders'] as const).map((resource) =>
        recordsWhere(pool, {
          accountId: r.account.id,
          resource,
          scope,
          field: resource === 'files' ? 'folder_id' : 'parent_id',
          value: folder.id,
          includeSourceData: r.sd.include,
        }),
      ),
    );
    const shape = (rows: string[], resource: 'files' | 'folders') => {
      const one = this.shaper(r, resource);
      return rows.map((row) => one(row, scope)).join(',');
    };
    const own = needsReshaping(r.sd) ? reshape(folderJson, r.sd) : folderJson;
    return {
      body: `${own.slice(0, -1)}${own.length > 2 ? ',' : ''}"files":[${shape(files!, 'files')}],"folders":[${shape(folders!, 'folders')}]}`,
      retrievedAt,
    };
  }

  /** The mirror's id of a folder reference; 404 when the project has no such folder. */
  async folderId(r: ReadScope, scope: string, ref: string): Promise<string> {
    const id = await resolveId((await r.reader()).pool, r.account.id, 'folders', scope, ref);
    if (!id) throw new NotFoundError(`No folder ${ref} in this account.`);
    return id;
  }

  /** A page of the change feed after a position: the changes, and whether more follow. */
  async readChanges(account: AccountSummary, def: ResourceDef, after: { at: Date; key: string }, limit: number) {
    return changesSince((await this.readerOf(account)()).pool, { accountId: account.id, resource: def.name, after, limit });
  }
}

let folders: ResourceDef | undefined;
const foldersDef = (): ResourceDef => (folders ??= resourceDef('folders')!);
