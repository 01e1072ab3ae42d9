// The storage proxy: a file behind one of the mirror's signed links is streamed from the upstream,
// never held whole. The record's stored upstream URL is used while it works; when the upstream says
// it has expired (403, 404 or 410 from its storage), the record is read again from the upstream for a
// fresh URL, kept, and used. Range, If-None-Match and the file's headers pass both ways; every
// download and preview is recorded. Only URLs under the upstream's storage URL are ever fetched
// (checkStorageUrl): a record holding any other (a write, an upstream answer) is read again from the
// upstream, and refused with a 502 if the upstream still names another address. Redirects are
// answered as errors, never followed. The bytes come through the upstream client's stream mode: its
// governor counts them (the storage's own budget), its deadline and error mapping apply.
import type { FastifyInstance, FastifyReply, FastifyRequest, FastifySchema } from 'fastify';
import { z } from 'zod';
import { getObject } from '../../connectors/operations.ts';
import type { UpstreamClient, UpstreamStream } from '../../connectors/upstream-client.ts';
import { ForbiddenError, NotFoundError, UpstreamError } from '../../lib/errors.ts';
import { listPath, parseScope, resourceDef } from '../../lib/resources.ts';
import type { AccountStore } from '../../mirror/control/accounts.ts';
import type { Pool } from '../../mirror/db/pool.ts';
import type { PrismaClient } from '../../mirror/db/prisma.ts';
import { refreshUrlFields } from '../../mirror/records/object-writes.ts';
import { recordStorageAccess, storedRecordData } from '../../mirror/control/storage-files.ts';
import { checkStorageUrl, storageLocations, verifyLink, type StorageLink } from '../storage-proxy.ts';
import { notFound } from '../errors.ts';
import { answer, errorAnswer, headersOf, pathParams, typedRoutes, type RouteRequest } from '../route-schema.ts';

interface StorageRouteDeps {
  pool: Pool;
  prisma: PrismaClient;
  key: Buffer;
  upstream: UpstreamClient;
  accounts: AccountStore;
  /** The upstream's storage URLs (UPSTREAM_STORAGE_URL): the only places file bytes are fetched from. */
  storageUrls: readonly string[];
}

/**
 * The CORS headers of a link, as the upstream's storage gives them: a preview allows any origin (so
 * viewers and frames can embed it, and a viewer's preflight for its Range and If-None-Match requests
 * is answered); a download carries none, and its preflight is a 404 as the upstream's is.
 */
const previewFields: ReadonlySet<string> = new Set(['preview_url']);
const previewPreflight = {
  'access-control-allow-origin': '*',
  'access-control-allow-methods': 'GET, HEAD, OPTIONS',
  'access-control-allow-headers': 'Range, If-None-Match',
};

const relayed = ['content-type', 'content-length', 'content-range', 'accept-ranges', 'etag', 'last-modified', 'cache-control'];

function contentDisposition(field: string, filename: string): string {
  const ascii = filename.replace(/[^\x20-\x7e]|"/g, '_');
  return `${field.startsWith('preview') ? 'inline' : 'attachment'}; filename="${ascii}"; filename*=UTF-8''${encodeURIComponent(filename)}`;
}

/** A stored URL field: absent, refused by the storage rule, or one the proxy may fetch. */
type Target = { kind: 'none' } | { kind: 'refused'; reason: string } | { kind: 'ok'; url: string };

/** What a signed link carries besides its path (storage-proxy.ts signs them together). */
const linkQuery = z.looseObject({
  account: z.string().optional(),
  scope: z.string().optional(),
  expires_at: z.string().optional(),
  signature: z.string().optional(),
});
const storageSchema = {
  summary: "A file behind one of the mirror's signed links (url, preview_url, file_url)",
  description:
    "Streamed from the upstream (a stored URL that expired is refreshed transparently); `Range` and `If-None-Match` honoured; `Content-Disposition` inline for previews, attachment for downloads; previews allow any origin (`Access-Control-Allow-Origin: *`), as the upstream's do. The links come in the records the mirror serves and expire after an hour; every access is recorded.",
  tags: ['storage'],
  access: 'public',
  params: pathParams('resource', 'id', 'field'),
  querystring: linkQuery,
  headers: headersOf({
    range: z.string().optional().describe('A byte range, as HTTP takes it.'),
    'if-none-match': z.string().optional().describe('The ETag of a copy the caller holds.'),
  }),
  response: {
    200: answer('The bytes.', 'application/octet-stream'),
    206: answer('The requested range.', 'application/octet-stream'),
    304: answer('Not modified (If-None-Match).'),
    403: errorAnswer('A link with a bad signature, or expired.'),
  },
} satisfies FastifySchema;
const preflightSchema = {
  summary: "A browser's CORS preflight for one of the mirror's preview links",
  description: "Previews allow any origin, with `Range` and `If-None-Match`; a download link has no preflight (404), as the upstream's.",
  tags: ['storage'],
  access: 'public',
  params: pathParams('resource', 'id', 'field'),
  querystring: linkQuery,
  response: { 204: answer('Allowed: any origin, GET and HEAD, Range and If-None-Match.'), 404: errorAnswer('Not a preview link.') },
} satisfies FastifySchema;

/** The files behind the links: where a record's stored URL points, and its bytes fetched from the upstream's storage. */
class StorageFiles {
  readonly #deps: StorageRouteDeps;
  readonly #locations: ReturnType<typeof storageLocations>;
  constructor(deps: StorageRouteDeps) {
    this.#deps = deps;
    this.#locations = storageLocations(deps.storageUrls);
  }

  target(value: unknown): Target {
    if (value === undefined || value === null || value === '') return { kind: 'none' };
    const check = checkStorageUrl(value, this.#locations);
    return check.ok ? { kind: 'ok', url: check.url } : { kind: 'refused', reason: check.reason };
  }

  async storedRecord(l: StorageLink): Promise<Record<string, unknown>> {
    const data = await storedRecordData(this.#deps.pool, { accountId: l.accountId, resource: l.resource, scope: l.scope, id: l.id });
    if (!data) throw new NotFoundError('The file of this link is no longer in the mirror.');
    return data;
  }

  /** Reads the record again from the upstream (fresh storage URLs) and keeps it. */
  async refreshed(l: StorageLink): Promise<Record<string, unknown>> {
    const deps = this.#deps;
    const account = await deps.accounts.get(l.accountId);
    const parts = parseScope(l.scope);
    const projectId = parts.find(([k]) => k === 'project')?.[1];
    const parentId = parts.filter(([k]) => k !== 'project').at(-1)?.[1];
    const res = await getObject(deps.upstream, {
      accountToken: await deps.accounts.token(l.accountId),
      accountId: l.accountId,
      sourceSystem: account.sourceSystem,
      path: `${listPath(l.resource, parentId)}/${encodeURIComponent(l.id)}`,
      ...(projectId ? { projectId } : {}),
      includeSourceData: true,
    });
    await refreshUrlFields(deps.pool, { accountId: l.accountId, resource: l.resource, scope: l.scope }, l.id, res.body);
    return res.body;
  }

  /**
   * Fetches a checked storage URL; the body streams (never buffered), redirects are not followed (the
   * client's dispatcher has no redirect interceptor). Only the conditional headers are sent, never a
   * credential.
   */
  async fetchFile(t: Target, request: FastifyRequest, l: StorageLink): Promise<UpstreamStream | undefined> {
    if (t.kind !== 'ok') return undefined;
    const headers: Record<string, string> = {};
    for (const h of ['range', 'if-none-match', 'if-range']) {
      const v = request.headers[h];
      if (typeof v === 'string') headers[h] = v;
    }
    try {
      return await this.#deps.upstream.stream({
        method: 'GET',
        url: t.url,
        headers,
        budget: { account: l.accountId, origin: 'storage' },
        priority: 'interactive',
        bodyTimeoutMs: 300_000,
        what: 'a stored file',
      });
    } catch (error) {
      // A 5xx: the message reaches the logs only.
      throw new UpstreamError(`The upstream's storage could not be reached (${(error as Error).message}).`, undefined, { cause: error });
    }
  }

  /**
   * The record's file as its stored URL serves it. No usable URL, one outside the upstream's storage,
   * or one the storage says has expired: the upstream issues a fresh one, kept, and used.
   */
  async fetchWithRefresh(
    request: FastifyRequest,
    link: StorageLink,
  ): Promise<{ data: Record<string, unknown>; target: Target; res: UpstreamStream | undefined }> {
    let data = await this.storedRecord(link);
    let target = this.target(data[link.field]);
    let res = await this.fetchFile(target, request, link);
    if (!res || [401, 403, 404, 410].includes(res.status)) {
      await res?.discard();
      data = await this.refreshed(link);
      target = this.target(data[link.field]);
      res = await this.fetchFile(target, request, link);
    }
    return { data, target, res };
  }

  /** Records one access to a link's file, with the status it was answered. */
  recordAccess(request: FastifyRequest, link: StorageLink, status: number): Promise<void> {
    return recordStorageAccess(this.#deps.prisma, {
      accountId: link.accountId,
      resource: link.resource,
      scope: link.scope,
      recordId: link.id,
      field: link.field,
      status,
      range: typeof request.headers.range === 'string' ? request.headers.range.slice(0, 100) : null,
      ip: request.ip,
      userAgent: typeof request.headers['user-agent'] === 'string' ? request.headers['user-agent'].slice(0, 300) : null,
    });
  }
}

/** A 502 whose message the caller sees (the error handler hides 5xx messages); it names no address. */
function badGateway(reply: FastifyReply, code: string, message: string): FastifyReply {
  return reply.status(502).send({ message, code, details: [] });
}

/** The link's signature and expiry checked: the link it names, or a 403. */
function checkedLink(key: Buffer, request: RouteRequest<typeof storageSchema>): StorageLink {
  const q = request.query;
  const check = verifyLink(key, { ...request.params, account: q.account, scope: q.scope, expiresAt: q.expires_at, signature: q.signature });
  if (!check.ok) throw new ForbiddenError(check.reason);
  return check.link;
}

/**
 * What the storage answered that the mirror does not relay: a URL outside the storage (502), a
 * redirect (502, never followed), an error (its status). Undefined: the answer is relayed.
 */
async function refusedAnswer(
  files: StorageFiles,
  request: FastifyRequest,
  reply: FastifyReply,
  link: StorageLink,
  target: Target,
  res: UpstreamStream | undefined,
): Promise<FastifyReply | undefined> {
  // Refused with a 502: logged with what was refused, the access recorded.
  const refuse = async (logged: Record<string, unknown>, why: string, code: string, message: string) => {
    request.log.warn({ resource: link.resource, id: link.id, field: link.field, ...logged }, `storage proxy: ${why}`);
    await files.recordAccess(request, link, 502);
    return badGateway(reply, code, message);
  };
  if (target.kind === 'refused') {
    return refuse(
      { reason: target.reason },
      'the upstream gave a URL outside its storage; not fetched',
      'storage_url_refused',
      `The upstream gave this file a URL outside its storage, so the mirror did not fetch it. The operator can check UPSTREAM_STORAGE_URL against the upstream's storage URL.`,
    );
  }
  if (!res) throw new NotFoundError(`This ${resourceDef(link.resource)?.name ?? 'record'} has no ${link.field}.`);
  if (res.status >= 300 && res.status < 400 && res.status !== 304) {
    // A redirect would send the mirror (or, relayed, the caller) to an address nobody checked.
    await res.discard();
    return refuse(
      { status: res.status },
      'the upstream storage answered a redirect; not followed',
      'storage_redirect_refused',
      `The upstream's storage answered a redirect (${res.status}) for this file; the mirror does not follow redirects and did not fetch it.`,
    );
  }
  if (res.status >= 400 && res.status !== 416) {
    await res.discard();
    await files.recordAccess(request, link, res.status);
    throw new UpstreamError(`The upstream's storage answered ${res.status} for this file.`, res.status >= 500 ? 502 : res.status);
  }
  return undefined;
}

/** Relays the storage's answer: its headers, the file's name, its bytes streamed (or a 304). */
async function relayFile(
  files: StorageFiles,
  request: FastifyRequest,
  reply: FastifyReply,
  link: StorageLink,
  data: Record<string, unknown>,
  res: UpstreamStream,
): Promise<FastifyReply> {
  for (const name of relayed) {
    const v = res.headers[name];
    if (v !== undefined) void reply.header(name, v);
  }
  const filename = typeof data.filename === 'string' ? data.filename : typeof data.name === 'string' ? data.name : link.id;
  void reply.header('content-disposition', contentDisposition(link.field, filename));
  await files.recordAccess(request, link, res.status).catch(async (error: unknown) => {
    await res.discard();
    throw error;
  });
  if (res.status === 304) {
    await res.discard();
    return reply.status(304).send();
  }
  return reply.status(res.status).send(res.body);
}

async function serveFile(files: StorageFiles, key: Buffer, request: RouteRequest<typeof storageSchema>, reply: FastifyReply): Promise<FastifyReply> {
  if (previewFields.has(request.params.field)) void reply.header('access-control-allow-origin', '*');
  const link = checkedLink(key, request);
  const { data, target, res } = await files.fetchWithRefresh(request, link);
  const refused = await refusedAnswer(files, request, reply, link, target, res);
  return refused ?? relayFile(files, request, reply, link, data, res!);
}

export function registerStorageRoutes(fastify: FastifyInstance, deps: StorageRouteDeps): void {
  const app = typedRoutes(fastify);
  const files = new StorageFiles(deps);
  app.get('/storage/:resource/:id/:field', { schema: storageSchema }, (request, reply) => serveFile(files, deps.key, request, reply));

  // The signature is not checked: a preflight carries no credential and answers nothing of the file.
  app.options('/storage/:resource/:id/:field', { schema: preflightSchema }, async (request, reply) => {
    const { resource, field } = request.params;
    if (!previewFields.has(field) || !resourceDef(resource)?.urlFields?.includes(field)) return notFound(request, reply);
    return reply.status(204).headers(previewPreflight).send();
  });
}
