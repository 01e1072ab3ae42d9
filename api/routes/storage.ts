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
import { answer, errorAnswer, headersOf, pathParams } from '../route-schema.ts';

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

export function registerStorageRoutes(app: FastifyInstance, deps: StorageRouteDeps): void {
  const locations = storageLocations(deps.storageUrls);

  function target(value: unknown): Target {
    if (value === undefined || value === null || value === '') return { kind: 'none' };
    const check = checkStorageUrl(value, locations);
    return check.ok ? { kind: 'ok', url: check.url } : { kind: 'refused', reason: check.reason };
  }

  async function storedRecord(l: StorageLink): Promise<Record<string, unknown>> {
    const data = await storedRecordData(deps.pool, { accountId: l.accountId, resource: l.resource, scope: l.scope, id: l.id });
    if (!data) throw new NotFoundError('The file of this link is no longer in the mirror.');
    return data;
  }

  /** Reads the record again from the upstream (fresh storage URLs) and keeps it. */
  async function refreshed(l: StorageLink): Promise<Record<string, unknown>> {
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
  async function fetchFile(t: Target, request: FastifyRequest, l: StorageLink): Promise<UpstreamStream | undefined> {
    if (t.kind !== 'ok') return undefined;
    const headers: Record<string, string> = {};
    for (const h of ['range', 'if-none-match', 'if-range']) {
      const v = request.headers[h];
      if (typeof v === 'string') headers[h] = v;
    }
    try {
      return await deps.upstream.stream({
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

  /** A 502 whose message the caller sees (the error handler hides 5xx messages); it names no address. */
  function badGateway(reply: FastifyReply, code: string, message: string): FastifyReply {
    return reply.status(502).send({ message, code, details: [] });
  }

  app.get<{ Params: { resource: string; id: string; field: string }; Querystring: z.infer<typeof linkQuery> }>(
    '/storage/:resource/:id/:field',
    { schema: storageSchema },
    async (request, reply: FastifyReply) => {
      if (previewFields.has(request.params.field)) void reply.header('access-control-allow-origin', '*');
      const q = request.query;
      const check = verifyLink(deps.key, { ...request.params, account: q.account, scope: q.scope, expiresAt: q.expires_at, signature: q.signature });
      if (!check.ok) throw new ForbiddenError(check.reason);
      const link = check.link;
      const record = (status: number) =>
        recordStorageAccess(deps.prisma, {
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
      let data = await storedRecord(link);
      let t = target(data[link.field]);
      let res = await fetchFile(t, request, link);
      // No usable URL, one outside the upstream's storage, or one the storage says has expired: the
      // upstream issues a fresh one.
      if (!res || [401, 403, 404, 410].includes(res.status)) {
        await res?.discard();
        data = await refreshed(link);
        t = target(data[link.field]);
        res = await fetchFile(t, request, link);
      }
      if (t.kind === 'refused') {
        request.log.warn(
          { resource: link.resource, id: link.id, field: link.field, reason: t.reason },
          'storage proxy: the upstream gave a URL outside its storage; not fetched',
        );
        await record(502);
        return badGateway(
          reply,
          'storage_url_refused',
          `The upstream gave this file a URL outside its storage, so the mirror did not fetch it. The operator can check UPSTREAM_STORAGE_URL against the upstream's storage URL.`,
        );
      }
      if (!res) throw new NotFoundError(`This ${resourceDef(link.resource)?.name ?? 'record'} has no ${link.field}.`);
      if (res.status >= 300 && res.status < 400 && res.status !== 304) {
        // A redirect would send the mirror (or, relayed, the caller) to an address nobody checked.
        await res.discard();
        request.log.warn(
          { resource: link.resource, id: link.id, field: link.field, status: res.status },
          'storage proxy: the upstream storage answered a redirect; not followed',
        );
        await record(502);
        return badGateway(
          reply,
          'storage_redirect_refused',
          `The upstream's storage answered a redirect (${res.status}) for this file; the mirror does not follow redirects and did not fetch it.`,
        );
      }
      if (res.status >= 400 && res.status !== 416) {
        await res.discard();
        await record(res.status);
        throw new UpstreamError(`The upstream's storage answered ${res.status} for this file.`, res.status >= 500 ? 502 : res.status);
      }
      for (const name of relayed) {
        const v = res.headers[name];
        if (v !== undefined) void reply.header(name, v);
      }
      const filename = typeof data.filename === 'string' ? data.filename : typeof data.name === 'string' ? data.name : link.id;
      void reply.header('content-disposition', contentDisposition(link.field, filename));
      await record(res.status).catch(async (error: unknown) => {
        await res.discard();
        throw error;
      });
      if (res.status === 304) {
        await res.discard();
        return reply.status(304).send();
      }
      return reply.status(res.status).send(res.body);
    },
  );

  // The signature is not checked: a preflight carries no credential and answers nothing of the file.
  app.options<{ Params: { resource: string; id: string; field: string } }>(
    '/storage/:resource/:id/:field',
    { schema: preflightSchema },
    async (request, reply: FastifyReply) => {
      const { resource, field } = request.params;
      if (!previewFields.has(field) || !resourceDef(resource)?.urlFields?.includes(field)) return notFound(request, reply);
      return reply.status(204).headers(previewPreflight).send();
    },
  );
}
