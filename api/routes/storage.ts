// The storage proxy: a file behind one of the mirror's signed links is streamed from the upstream,
// never held whole. The record's stored upstream URL is used while it works; when the upstream says
// it has expired (403, 404 or 410 from its storage), the record is read again from the upstream for a
// fresh URL, kept, and used. Range, If-None-Match and the file's headers pass both ways; every
// download and preview is recorded.
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { request as undiciRequest, type Dispatcher } from 'undici';
import { getObject } from '../../connectors/operations.ts';
import type { UpstreamClient } from '../../connectors/upstream-client.ts';
import { ForbiddenError, NotFoundError, UpstreamError } from '../../lib/errors.ts';
import { listPath, parseScope, resourceDef } from '../../lib/resources.ts';
import type { AccountStore } from '../../mirror/accounts.ts';
import type { Pool } from '../../mirror/pool.ts';
import type { PrismaClient } from '../../mirror/prisma.ts';
import { refreshUrlFields } from '../../mirror/records-store.ts';
import { verifyLink, type StorageLink } from '../storage-proxy.ts';

export interface StorageRouteDeps {
  pool: Pool;
  prisma: PrismaClient;
  key: Buffer;
  upstream: UpstreamClient;
  accounts: AccountStore;
}

const relayed = ['content-type', 'content-length', 'content-range', 'accept-ranges', 'etag', 'last-modified', 'cache-control'];

function contentDisposition(field: string, filename: string): string {
  const ascii = filename.replace(/[^\x20-\x7e]|"/g, '_');
  return `${field.startsWith('preview') ? 'inline' : 'attachment'}; filename="${ascii}"; filename*=UTF-8''${encodeURIComponent(filename)}`;
}

export function registerStorageRoutes(app: FastifyInstance, deps: StorageRouteDeps): void {
  async function storedRecord(l: StorageLink): Promise<Record<string, unknown>> {
    const { rows } = await deps.pool.query<{ data: Record<string, unknown> }>(
      `SELECT data FROM records WHERE account_id = $1 AND resource = $2 AND scope = $3 AND id = $4 AND deleted_at IS NULL`,
      [l.accountId, l.resource, l.scope, l.id],
    );
    if (!rows[0]) throw new NotFoundError('The file of this link is no longer in the mirror.');
    return rows[0].data;
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

  async function fetchFile(url: unknown, request: FastifyRequest): Promise<Dispatcher.ResponseData | undefined> {
    if (typeof url !== 'string' || !/^https?:\/\//.test(url)) return undefined;
    const headers: Record<string, string> = {};
    for (const h of ['range', 'if-none-match', 'if-range']) {
      const v = request.headers[h];
      if (typeof v === 'string') headers[h] = v;
    }
    try {
      return await undiciRequest(url, { method: 'GET', headers, headersTimeout: 60_000, bodyTimeout: 300_000 });
    } catch (error) {
      throw new UpstreamError(`The upstream's storage could not be reached (${(error as Error).message}).`, undefined, { cause: error });
    }
  }

  app.get<{ Params: { resource: string; id: string; field: string }; Querystring: Record<string, string | undefined> }>(
    '/storage/:resource/:id/:field',
    async (request, reply: FastifyReply) => {
      void reply.header('Access-Control-Allow-Origin', '*');
      void reply.header('Access-Control-Expose-Headers', 'Content-Disposition, Content-Range, ETag');
      const q = request.query;
      const check = verifyLink(deps.key, { ...request.params, account: q.account, scope: q.scope, expiresAt: q.expires_at, signature: q.signature });
      if (!check.ok) throw new ForbiddenError(check.reason);
      const link = check.link;
      const record = async (status: number) => {
        await deps.prisma.storageAccess.create({
          data: {
            accountId: link.accountId,
            resource: link.resource,
            scope: link.scope,
            recordId: link.id,
            field: link.field,
            status,
            range: typeof request.headers.range === 'string' ? request.headers.range.slice(0, 100) : null,
            ip: request.ip,
            userAgent: typeof request.headers['user-agent'] === 'string' ? request.headers['user-agent'].slice(0, 300) : null,
          },
        });
      };
      let data = await storedRecord(link);
      let res = await fetchFile(data[link.field], request);
      if (!res || [401, 403, 404, 410].includes(res.statusCode)) {
        await res?.body.dump();
        data = await refreshed(link);
        res = await fetchFile(data[link.field], request);
      }
      if (!res) throw new NotFoundError(`This ${resourceDef(link.resource)?.name ?? 'record'} has no ${link.field}.`);
      if (res.statusCode >= 400 && res.statusCode !== 416) {
        await res.body.dump();
        await record(res.statusCode);
        throw new UpstreamError(`The upstream's storage answered ${res.statusCode} for this file.`, res.statusCode >= 500 ? 502 : res.statusCode);
      }
      for (const name of relayed) {
        const v = res.headers[name];
        if (v !== undefined) void reply.header(name, v);
      }
      const filename = typeof data.filename === 'string' ? data.filename : typeof data.name === 'string' ? data.name : link.id;
      void reply.header('content-disposition', contentDisposition(link.field, filename));
      await record(res.statusCode);
      return reply.status(res.statusCode).send(res.statusCode === 304 ? undefined : res.body);
    },
  );
}
