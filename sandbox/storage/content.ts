// File contents, generated: any byte range of any file can be produced on its own, in fixed blocks
// seeded by (file, block), so a 300 MB file streams without ever being held in memory.
import { Readable } from 'node:stream';
import type { FileRef } from '../data/dataset.ts';
import { hash128, Rng } from '../data/random.ts';

const BLOCK = 64 * 1024;

function fileKey(ref: FileRef): string {
  return `${ref.owner}|${ref.resource}|${ref.scope}|${ref.index}|${ref.size}`;
}

export function etagOf(ref: FileRef): string {
  const [a, b] = hash128(`etag|${fileKey(ref)}`);
  return `"${a.toString(16).padStart(8, '0')}${b.toString(16).padStart(8, '0')}"`;
}

function block(key: string, n: number): Buffer {
  const rng = new Rng(`${key}|${n}`);
  const buf = Buffer.allocUnsafe(BLOCK);
  for (let o = 0; o < BLOCK; o += 4) buf.writeUInt32LE(rng.u32(), o);
  return buf;
}

/** A stream of bytes [start, end] (inclusive) of a generated file, honouring backpressure. */
export function contentStream(ref: FileRef, start: number, end: number): Readable {
  const key = fileKey(ref);
  let pos = start;
  return new Readable({
    highWaterMark: BLOCK,
    read() {
      if (pos > end) {
        this.push(null);
        return;
      }
      const n = Math.floor(pos / BLOCK);
      const from = pos - n * BLOCK;
      const to = Math.min(BLOCK, end - n * BLOCK + 1);
      this.push(block(key, n).subarray(from, to));
      pos = n * BLOCK + to;
    },
  });
}

const types: Record<string, string> = {
  pdf: 'application/pdf',
  png: 'image/png',
  jpg: 'image/jpeg',
  jpeg: 'image/jpeg',
  dwg: 'application/acad',
  txt: 'text/plain; charset=utf-8',
  xlsx: 'application/vnd.openxmlformats-officedocument.spreadsheetml.sheet',
  docx: 'application/vnd.openxmlformats-officedocument.wordprocessingml.document',
};

export function contentTypeOf(filename: string): string {
  const ext = filename.split('.').pop()?.toLowerCase() ?? '';
  return types[ext] ?? 'application/octet-stream';
}
