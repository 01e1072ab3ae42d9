// List answers leave as JSON already written into a buffer (see json-writer.ts): byte for byte what
// Fastify's serializer would make of the object, without its second walk over the page and without
// counting and encoding a megabyte-sized string again on the way out.
import type { FastifyReply } from 'fastify';

/** The content type Fastify's serializer gives JSON answers. */
export const JSON_CONTENT_TYPE = 'application/json; charset=utf-8';

/** The buffers sent as JSON text: the body faults corrupt text and leave other bytes alone. */
const pages = new WeakSet<Buffer>();

export function isJsonPage(payload: unknown): payload is Buffer {
  return Buffer.isBuffer(payload) && pages.has(payload);
}

/** Answers with JSON text already in a buffer (the handler returns what this returns). */
export function sendJson(reply: FastifyReply, json: Buffer): Buffer {
  void reply.header('content-type', JSON_CONTENT_TYPE);
  pages.add(json);
  return json;
}
