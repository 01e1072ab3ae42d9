// The storage proxy: signed download and preview URLs, ETags where the source system has them,
// Range requests, streaming of very large files; and file transfers for files over 100 MB.
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { NotFoundError } from '../../lib/errors.ts';
import type { SandboxContext } from '../context.ts';
import { fileTransferIdOf } from '../data/dataset.ts';
import { accountOf } from '../http/request-state.ts';
import { scopesFor } from '../resources/scope.ts';
import { contentStream, contentTypeOf, etagOf } from './content.ts';
import type { StorageKind } from './signing.ts';

interface StorageAccess {
  kind: StorageKind;
  filename: string;
  at: string;
  status: number;
  range: string | null;
  ip: string;
}

const LARGE_FILE_BYTES = 100 * 1024 * 1024;

function contentDisposition(kind: StorageKind, filename: string): string {
  const ascii = filename.replace(/[^\x20-\x7e]|"/g, '_');
  return `${kind === 'preview' ? 'inline' : 'attachment'}; filename="${ascii}"; filename*=UTF-8''${encodeURIComponent(filename)}`;
}

export function registerStorageRoutes(app: FastifyInstance, ctx: SandboxContext): void {
  const accesses: StorageAccess[] = [];

  const serve = (kind: StorageKind) => async (request: FastifyRequest, reply: FastifyReply) => {
    const { filename } = request.params as { filename: string };
    const q = request.query as Record<string, string | undefined>;
    const range = typeof request.headers.range === 'string' ? request.headers.range : null;
    const track = (status: number) => {
      // Downloads and previews are tracked (who, when), as upstream does.
      accesses.push({ kind, filename, at: new Date().toISOString(), status, range, ip: request.ip });
      if (accesses.length > 10_000) accesses.splice(0, accesses.length - 10_000);
    };
    if (kind === 'preview') void reply.header('Access-Control-Allow-Origin', '*');
    const v = ctx.signer.verify(kind, filename, q.signature, q.expires_at);
    if (!v.ok) {
      track(403);
      return reply.code(403).send({ message: v.reason === 'expired' ? 'This storage URL has expired' : 'Invalid storage URL signature' });
    }
    const ref = v.ref;
    void reply.header('Accept-Ranges', 'bytes');
    void reply.header('Content-Type', contentTypeOf(filename));
    void reply.header('Content-Disposition', contentDisposition(kind, filename));
    void reply.header('Cache-Control', 'private, max-age=3600');
    if (ref.etag) {
      const etag = etagOf(ref);
      void reply.header('ETag', etag);
      const inm = request.headers['if-none-match'];
      if (typeof inm === 'string' && inm.split(',').some((t) => t.trim() === etag || t.trim() === '*')) {
        track(304);
        return reply.code(304).send();
      }
    }
    let start = 0;
    let end = ref.size - 1;
    if (range) {
      const m = /^bytes=(\d*)-(\d*)$/.exec(range.trim());
      const ok = m && (m[1] !== '' || m[2] !== '');
      if (ok) {
        if (m[1] === '') {
          start = Math.max(0, ref.size - Number(m[2]));
        } else {
          start = Number(m[1]);
          if (m[2] !== '') end = Math.min(end, Number(m[2]));
        }
      }
      if (!ok || start > end || start >= ref.size) {
        track(416);
        return reply
          .code(416)
          .header('Content-Range', `bytes */${ref.size}`)
          .type('application/json; charset=utf-8')
          .send({ message: 'Range not satisfiable' });
      }
      void reply.code(206).header('Content-Range', `bytes ${start}-${end}/${ref.size}`);
    }
    void reply.header('Content-Length', String(end - start + 1));
    track(range ? 206 : 200);
    if (request.method === 'HEAD') return reply.send();
    return reply.send(contentStream(ref, start, end));
  };

  const opts = { config: { kind: 'public' as const } };
  app.get('/storage/download/:filename', opts, serve('download'));
  app.get('/storage/preview/:filename', opts, serve('preview'));
  app.options('/storage/preview/:filename', opts, async (_request, reply) =>
    reply
      .code(204)
      .header('Access-Control-Allow-Origin', '*')
      .header('Access-Control-Allow-Methods', 'GET, HEAD, OPTIONS')
      .header('Access-Control-Allow-Headers', 'Range, If-None-Match')
      .send(),
  );

  app.get('/_admin/storage-accesses', { config: { kind: 'admin' as const } }, async () => ({ data: accesses }));

  // File transfers: files over 100 MB carry `file_transfer_id`; the transfer names its file and a
  // download URL. Requires Project-Id like files.
  app.get('/file-transfers/:id', { config: { kind: 'account' as const } }, async (request, reply) => {
    const { id } = request.params as { id: string };
    const account = accountOf(request.svc);
    const [scope] = scopesFor(ctx, account, request, 'files', false);
    const file = ctx.dataset.all(account, 'files', scope!).find((f) => Number(f.size) > LARGE_FILE_BYTES && fileTransferIdOf(String(f.id)) === id);
    if (!file) throw new NotFoundError(`File transfer ${id} not found`);
    void reply.header(ctx.headers.dataRetrievedAt, new Date().toISOString());
    return {
      id,
      file_id: file.id,
      filename: file.filename,
      size: file.size,
      status: 'completed',
      url: file.url,
      source_create_time: file.source_create_time,
      source_update_time: file.source_update_time,
    };
  });
}
