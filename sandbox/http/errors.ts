// One place maps errors to upstream-style answers: `{"message": ...}` with the right status.
import type { FastifyError, FastifyInstance } from 'fastify';
import { isMirrorError, MirrorError } from '../../lib/errors.ts';

/** A 404 for a resource the linked source system does not offer (documented in sandbox/README.md). */
export class NotSupportedError extends MirrorError {
  override readonly statusCode = 404;
  override readonly code = 'not_supported';
}

export function installErrorHandlers(app: FastifyInstance): void {
  app.setErrorHandler((error: FastifyError | Error, request, reply) => {
    if (isMirrorError(error)) {
      if (error.statusCode >= 500) request.log.warn({ err: error }, 'sandbox 5xx');
      return reply.code(error.statusCode).send({ message: error.message });
    }
    const status = (error as FastifyError).statusCode;
    if (typeof status === 'number' && status >= 400 && status < 500) {
      return reply.code(status).send({ message: error.message });
    }
    request.log.error({ err: error }, 'sandbox internal error');
    return reply.code(500).send({ message: 'Internal server error' });
  });
  app.setNotFoundHandler((request, reply) => {
    const path = request.url.split('?')[0];
    return reply.code(404).send({ message: `Route ${request.method} ${path} not found` });
  });
}
