// The one mapping from errors to responses: `{message, code, details}`; 5xx hide their internals.
import type { FastifyError, FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { BadRequestError, MirrorError } from '../lib/errors.ts';

/** Deepest JSON body accepted: the contract's objects nest a few levels; thousands only crash recursion. */
const maxBodyDepth = 100;

/** What JSON.parse makes: arrays and plain objects (a streamed body is neither, and is not walked). */
function isJsonContainer(v: unknown): v is object {
  if (v === null || typeof v !== 'object') return false;
  if (Array.isArray(v)) return true;
  const proto = Object.getPrototypeOf(v) as unknown;
  return proto === Object.prototype || proto === null;
}

/** Nesting depth of a parsed JSON body, counted without recursion (so any depth is safe to measure). */
function bodyDepth(value: unknown, limit = maxBodyDepth): number {
  let deepest = 0;
  const stack: [unknown, number][] = [[value, 0]];
  while (stack.length > 0) {
    const [v, d] = stack.pop()!;
    if (!isJsonContainer(v)) continue;
    deepest = Math.max(deepest, d + 1);
    if (deepest > limit) return deepest;
    for (const child of Object.values(v)) stack.push([child, d + 1]);
  }
  return deepest;
}

interface ErrorBody {
  message: string;
  code: string;
  details: { path?: string; message: string }[];
}

/**
 * Postgres refuses text it cannot hold: a NUL character (`%00` in a path, `\u0000` in JSON) or bytes
 * that are not UTF-8. Only a caller's input carries such text, so it is a 400, not a 500.
 */
function unstorableInput(error: unknown): string | undefined {
  for (let e = error as { code?: unknown; cause?: unknown } | undefined, depth = 0; e && depth < 4; e = e.cause as typeof e, depth++) {
    if (e.code === '22021' || e.code === '22P05') {
      return 'The request contains a character the mirror cannot take (a NUL character, \\u0000, or bytes that are not UTF-8): remove it from the path, query, headers or body.';
    }
  }
  return undefined;
}

export function registerErrorHandling(app: FastifyInstance): void {
  // A parsed body nested too deep is refused before any handler re-serialises or walks it.
  app.addHook('preValidation', (request, _reply, done) => {
    if (isJsonContainer(request.body) && bodyDepth(request.body) > maxBodyDepth) {
      done(new BadRequestError(`The JSON body is nested deeper than ${maxBodyDepth} levels; send a flatter document.`));
      return;
    }
    done();
  });
  app.setErrorHandler((error: FastifyError | MirrorError | Error, request, reply) => {
    if (error instanceof MirrorError) {
      const status = error.statusCode;
      if (status >= 500) request.log.error({ err: error }, 'request failed');
      const body: ErrorBody =
        status >= 500
          ? { message: 'The mirror could not complete the request. See its logs with this debug id.', code: error.code, details: [] }
          : { message: error.message, code: error.code, details: error.details };
      if (error.code === 'rate_limited' || error.code === 'upstream_rate_limited') {
        const resetAt = (error as MirrorError & { resetAt?: number }).resetAt;
        if (resetAt) void reply.header('retry-after', String(Math.max(1, Math.ceil((resetAt - Date.now()) / 1000))));
      }
      return reply.status(status).send(body);
    }
    const fe = error as FastifyError;
    if (fe.validation) return reply.status(400).send(invalidInput(fe));
    const unstorable = unstorableInput(error);
    if (unstorable) return reply.status(400).send({ message: unstorable, code: 'invalid_request', details: [] } satisfies ErrorBody);
    if (typeof fe.statusCode === 'number' && fe.statusCode >= 400 && fe.statusCode < 500) {
      return reply.status(fe.statusCode).send({ message: fe.message, code: fe.code?.toLowerCase() ?? 'invalid_request', details: [] } satisfies ErrorBody);
    }
    request.log.error({ err: error }, 'request failed');
    return reply.status(500).send({
      message: 'The mirror could not complete the request. See its logs with this debug id.',
      code: 'internal_error',
      details: [],
    } satisfies ErrorBody);
  });
  app.setNotFoundHandler(notFound);
}

const partNames: Record<string, string> = { querystring: 'query', params: 'path', headers: 'headers', body: 'body' };

/**
 * A route's schema refused the request (api/route-schema.ts): a 400 that names the part and each
 * place to fix, as `Invalid query: limit: Too big: expected number to be <=1000`.
 */
function invalidInput(error: FastifyError): ErrorBody {
  const part = partNames[error.validationContext ?? ''] ?? 'request';
  const details = (error.validation ?? []).map((v) => {
    const keys = v.params?.keys;
    const at = v.instancePath.replace(/^\//, '').replaceAll('/', '.');
    return { path: at || (Array.isArray(keys) ? keys.join(', ') : part), message: v.message ?? 'invalid' };
  });
  const text = (error.validation ?? []).map((v, i) => (v.instancePath.length > 1 ? `${details[i]!.path}: ${details[i]!.message}` : details[i]!.message));
  return { message: `Invalid ${part}: ${text.join('; ')}`, code: 'invalid_request', details };
}

/** The 404 of a route the mirror does not have (and does not forward: off the upstream's surface). */
export function notFound(request: FastifyRequest, reply: FastifyReply): FastifyReply {
  return reply.status(404).send({
    message: `Route ${request.method} ${request.url.split('?')[0]!.slice(0, 200)} not found`,
    code: 'route_not_found',
    details: [],
  } satisfies ErrorBody);
}
