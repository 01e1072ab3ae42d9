// JSON text gathered into one growing buffer: a list page is written record by record as each is
// made, so neither the page's objects nor a page-sized string need exist at once, and the answer
// leaves as bytes (no second serialization, no counting and encoding a big string on the way out).

// Big page buffers are handed back once their answer is sent and serve the next pages: a fresh
// megabyte for every page costs hundreds of page faults (most of the time spent writing into it).
const spares: Buffer[] = [];
const MAX_SPARES = 4;
/** Below this, buffers come from Node's pool and cost nothing to get. */
const POOLED = 256 * 1024;

/** Whether `releaseBuffer` would keep this buffer for reuse. */
export function isPooled(buf: Buffer): boolean {
  return buf.length >= POOLED;
}

/** Gives back a buffer from `JsonWriter#backing` that nothing uses any more. */
export function releaseBuffer(buf: Buffer): void {
  if (isPooled(buf) && spares.length < MAX_SPARES && !spares.includes(buf)) spares.push(buf);
}

function allocate(size: number): Buffer {
  if (size < POOLED) return Buffer.allocUnsafe(size);
  // The smallest spare big enough; new ones in steps of 256 KiB, so the next similar page fits.
  let best = -1;
  for (let i = 0; i < spares.length; i++) if (spares[i]!.length >= size && (best < 0 || spares[i]!.length < spares[best]!.length)) best = i;
  if (best >= 0) return spares.splice(best, 1)[0]!;
  return Buffer.allocUnsafe(Math.ceil(size / POOLED) * POOLED);
}

export class JsonWriter {
  private buf: Buffer;
  /** Bytes written so far. */
  at = 0;

  constructor(initialSize = 64 * 1024) {
    this.buf = allocate(initialSize);
  }

  /** The buffer written into, for `releaseBuffer` once what `take` gave has been sent. */
  get backing(): Buffer {
    return this.buf;
  }

  private room(n: number): void {
    if (this.at + n <= this.buf.length) return;
    const next = allocate(Math.max(this.buf.length * 2, this.at + n));
    this.buf.copy(next, 0, 0, this.at);
    releaseBuffer(this.buf);
    this.buf = next;
  }

  byte(b: number): void {
    this.room(1);
    this.buf[this.at++] = b;
  }

  /** Text as UTF-8 (JSON text, or a part of it). */
  text(s: string): void {
    // At most 3 bytes per UTF-16 unit; near the end, exactly what it takes.
    if (this.at + s.length * 3 > this.buf.length) this.room(Buffer.byteLength(s, 'utf8'));
    this.at += this.buf.write(s, this.at, 'utf8');
  }

  /** Takes back the last `n` bytes (ASCII ones the caller wrote). */
  unwrite(n: number): void {
    this.at -= n;
  }

  /** Bytes from elsewhere (JSON text already). */
  append(source: Buffer, start: number, end: number): void {
    this.room(end - start);
    this.at += source.copy(this.buf, this.at, start, end);
  }

  /** Copies the bytes written from `start` on into `target` at `targetStart`. */
  copyOut(start: number, target: Buffer, targetStart: number): void {
    this.buf.copy(target, targetStart, start, this.at);
  }

  /** The written bytes: a view of `backing`. */
  take(): Buffer {
    return this.buf.subarray(0, this.at);
  }
}
