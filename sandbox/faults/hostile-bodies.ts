// Bodies a hostile or broken upstream sends, for the faults that test how much of an answer a client
// takes in: one far too big (streamed, with no length to refuse it by), a small gzip body that
// inflates to far more (a gzip bomb), a body that trickles forever, and full list pages that never
// end. Each valid JSON as far as it goes, so only its size or its time can stop a client.
import { createGzip } from 'node:zlib';
import type { FastifyReply } from 'fastify';
import { JSON_CONTENT_TYPE } from '../resources/json-page.ts';

const defaultBytes = 256 * 1024 * 1024;
const blanks = Buffer.alloc(1024 * 1024, 0x20);
const head = '{"data":[';
const tail = (page: number) => `],"meta":{"current_page":${page},"has_more_results":false}}`;

/** Resolves once the response can take more (`drain`) or is gone (`close`); true when gone. */
function writable(raw: FastifyReply['raw']): Promise<boolean> {
  return new Promise((resolve) => {
    const done = (closed: boolean) => () => {
      raw.off('drain', onDrain);
      raw.off('close', onClose);
      resolve(closed);
    };
    const onDrain = done(false);
    const onClose = done(true);
    raw.on('drain', onDrain);
    raw.on('close', onClose);
  });
}

/** `oversized-page`: a list body of `bytes` (blanks inside its array), sent chunked as fast as the client reads. */
export async function sendOversizedPage(reply: FastifyReply, bytes = defaultBytes): Promise<void> {
  reply.hijack();
  const raw = reply.raw;
  raw.writeHead(200, { 'content-type': JSON_CONTENT_TYPE });
  let closed = false;
  raw.once('close', () => (closed = true));
  raw.write(head);
  let left = Math.max(0, bytes - head.length - tail(1).length);
  while (left > 0 && !closed) {
    const part = left >= blanks.length ? blanks : blanks.subarray(0, left);
    left -= part.length;
    if (!raw.write(part) && (await writable(raw))) return;
  }
  if (!closed) raw.end(tail(1));
}

const bombs = new Map<number, Promise<Buffer>>();

/** The gzip of a list body of `bytes` (made once per size: about a thousandth of it). */
function bomb(bytes: number): Promise<Buffer> {
  let made = bombs.get(bytes);
  if (!made) {
    made = new Promise<Buffer>((resolve, reject) => {
      const gzip = createGzip({ level: 9 });
      const out: Buffer[] = [];
      gzip.on('data', (c: Buffer) => out.push(c));
      gzip.on('end', () => resolve(Buffer.concat(out)));
      gzip.on('error', reject);
      void (async () => {
        gzip.write(head);
        let left = Math.max(0, bytes - head.length - tail(1).length);
        while (left > 0) {
          const part = left >= blanks.length ? blanks : blanks.subarray(0, left);
          left -= part.length;
          if (!gzip.write(part)) await new Promise((r) => gzip.once('drain', r));
        }
        gzip.end(tail(1));
      })();
    });
    bombs.set(bytes, made);
  }
  return made;
}

/** `gzip-bomb`: a small body, `Content-Encoding: gzip`, that inflates to `bytes`. */
export async function sendGzipBomb(reply: FastifyReply, bytes = defaultBytes): Promise<void> {
  const body = await bomb(bytes);
  reply.hijack();
  reply.raw.writeHead(200, { 'content-type': JSON_CONTENT_TYPE, 'content-encoding': 'gzip', 'content-length': String(body.length) });
  reply.raw.end(body);
}

/** `trickle`: the start of a list body, then one blank every `intervalMs`, until the client hangs up. */
export async function sendTrickle(reply: FastifyReply, intervalMs = 1000): Promise<void> {
  reply.hijack();
  const raw = reply.raw;
  raw.writeHead(200, { 'content-type': JSON_CONTENT_TYPE });
  raw.write(head);
  await new Promise<void>((resolve) => {
    const timer = setInterval(() => raw.write(' '), intervalMs);
    raw.once('close', () => {
      clearInterval(timer);
      resolve();
    });
  });
}

/**
 * `endless-pages`: page `page` as `perPage` records of its own (ids no other page has), with
 * `has_more_results: null`: a client that goes on while pages come back full never stops.
 */
export function endlessPage(page: number, perPage: number): Buffer {
  const time = new Date(Date.UTC(2024, 0, 1)).toISOString();
  const items: string[] = [];
  for (let i = 1; i <= perPage; i++) {
    const id = `endless-${page}-${i}`;
    items.push(`{"id":"${id}","source_id":"${id}","source_create_time":"${time}","source_update_time":"${time}","name":"Endless ${page}.${i}"}`);
  }
  return Buffer.from(`{"data":[${items.join(',')}],"meta":{"current_page":${page},"has_more_results":null}}`);
}
