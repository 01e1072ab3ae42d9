// Bodies beyond JSON: XML for the XML pass-through, multipart and binary uploads, and the Link
// page's form posts.
import type { FastifyInstance } from 'fastify';

export function registerBodyParsers(app: FastifyInstance): void {
  app.addContentTypeParser(['text/xml', 'application/xml'], { parseAs: 'string' }, (_req, body, done) => done(null, body));
  app.addContentTypeParser('application/x-www-form-urlencoded', { parseAs: 'string' }, (_req, body, done) => {
    done(null, Object.fromEntries(new URLSearchParams(String(body))));
  });
  app.addContentTypeParser(['multipart/form-data', 'application/octet-stream'], { parseAs: 'buffer' }, (_req, body, done) => done(null, body));
}
