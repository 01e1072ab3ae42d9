// Pass-through endpoints: forward a native request to the source system and answer the contract's
// pass-through object {body, content_type, headers, path, status}. The variant follows the source
// system: JSON (REST systems), XML (`Content-Type: text/xml`), SQL, GraphQL; plus binary download,
// multipart and single-file uploads.
import { createHash, randomUUID } from 'node:crypto';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { BadRequestError } from '../../lib/errors.ts';
import type { SandboxContext } from '../context.ts';
import { accountOf } from '../http/request-state.ts';
import { headerValue, parseInput } from '../http/validate.ts';
import { contentStream } from '../storage/content.ts';
import { graphqlSchema, runGraphql } from './graphql.ts';
import { boundaryOf, parseMultipart } from './multipart.ts';
import { jsonPassthroughSchema, runNativeJson } from './native-json.ts';
import { runSql, sqlPassthroughSchema, type SourceAnswer } from './sql.ts';
import { runXml } from './xml.ts';
import { z } from 'zod';

const passthroughWriteHeadersSchema = z.object({
  method: z.enum(['PATCH', 'POST', 'PUT']),
  path: z.string().min(1).startsWith('/'),
});

function passthroughObject(a: SourceAnswer) {
  return {
    body: a.body,
    content_type: a.contentType,
    headers: { 'content-type': a.contentType, 'x-request-id': randomUUID() },
    path: a.path,
    status: a.status,
  };
}

function isXml(request: FastifyRequest): boolean {
  return /^(text|application)\/xml\b/i.test(request.headers['content-type'] ?? '');
}

export function registerPassthroughRoutes(app: FastifyInstance, ctx: SandboxContext): void {
  const opts = { config: { kind: 'account' as const } };

  app.post('/passthrough', opts, async (request, reply) => {
    const account = accountOf(request.svc);
    void reply.header(ctx.headers.dataRetrievedAt, new Date().toISOString());
    const profile = account.profile;
    if (isXml(request)) {
      if (profile.passthrough !== 'xml') throw new BadRequestError(`${profile.name} does not accept XML pass-through`);
      return passthroughObject(runXml(ctx, account, String(request.body)));
    }
    switch (profile.passthrough) {
      case 'xml':
        throw new BadRequestError(`${profile.name} accepts XML pass-through only: send the native XML message with Content-Type: text/xml`);
      case 'sql':
        return passthroughObject(runSql(ctx, account, parseInput(sqlPassthroughSchema, request.body)));
      case 'graphql':
        return passthroughObject(runGraphql(ctx, account, parseInput(graphqlSchema, request.body)));
      case 'json':
        return passthroughObject(runNativeJson(ctx, account, parseInput(jsonPassthroughSchema, request.body)));
    }
  });

  app.post('/passthrough-download', opts, async (request, reply) => {
    const account = accountOf(request.svc);
    const body = parseInput(jsonPassthroughSchema, request.body);
    // A deterministic binary per path, as a source system's file endpoint would serve it; `data.bytes`
    // asks for a given size (up to 2 GiB, generated as it streams) to exercise large downloads.
    const asked = body.data?.bytes;
    if (asked !== undefined && !(Number.isInteger(asked) && (asked as number) >= 0 && (asked as number) <= 2 ** 31))
      throw new BadRequestError('data.bytes must be a whole number of bytes up to 2147483648');
    const size = typeof asked === 'number' ? asked : 16 * 1024 + (createHash('sha256').update(`${account.key}|${body.path}`).digest().readUInt16BE(0) % 4096);
    const filename = body.path.split('?')[0]!.split('/').filter(Boolean).pop() ?? 'download';
    void reply.header('Content-Type', 'application/octet-stream');
    void reply.header('Content-Disposition', `attachment; filename="${filename.replace(/"/g, '_')}"`);
    void reply.header('Content-Length', String(size));
    const ref = { owner: account.key, resource: 'files' as const, scope: `passthrough:${body.path}`, index: 0, size, filename, etag: false };
    return reply.send(size === 0 ? '' : contentStream(ref, 0, size - 1));
  });

  function writeHeaders(request: FastifyRequest) {
    return parseInput(
      passthroughWriteHeadersSchema,
      { method: headerValue(request.headers, 'passthrough-method')?.toUpperCase(), path: headerValue(request.headers, 'passthrough-path') },
      'Passthrough-Method / Passthrough-Path headers',
    );
  }

  app.post('/passthrough-multipart', opts, async (request) => {
    const target = writeHeaders(request);
    const boundary = boundaryOf(request.headers['content-type']);
    if (!boundary || !Buffer.isBuffer(request.body)) throw new BadRequestError('The body must be multipart/form-data');
    const parts = parseMultipart(request.body, boundary);
    if (parts.length === 0) throw new BadRequestError('The multipart body has no parts');
    const fields = Object.fromEntries(parts.filter((p) => p.filename === null).map((p) => [p.name, p.data.toString('utf8')]));
    const files = parts
      .filter((p) => p.filename !== null)
      .map((p) => ({
        field: p.name,
        filename: p.filename,
        content_type: p.contentType,
        size: p.data.length,
        sha256: createHash('sha256').update(p.data).digest('hex'),
      }));
    return passthroughObject({
      status: target.method === 'POST' ? 201 : 200,
      body: { id: randomUUID(), fields, files },
      path: target.path,
      contentType: 'application/json',
    });
  });

  app.post('/passthrough-upload', opts, async (request) => {
    const target = writeHeaders(request);
    if (!Buffer.isBuffer(request.body)) throw new BadRequestError('The body must be application/octet-stream: exactly one file');
    const data = request.body;
    return passthroughObject({
      status: target.method === 'POST' ? 201 : 200,
      body: { id: randomUUID(), size: data.length, sha256: createHash('sha256').update(data).digest('hex') },
      path: target.path,
      contentType: 'application/json',
    });
  });
}
