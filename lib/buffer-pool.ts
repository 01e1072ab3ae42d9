/**
 * Big buffers used again instead of allocated anew. A page's split records (about a megabyte) live
 * until its write is answered, long enough to be promoted out of V8's young generation, and V8
 * counts the external memory promoted since the last mark-compact against the old generation's
 * limit: a new buffer a page started a mark-compact of the whole worker heap every ~250 ms in a full
 * pass. Memory taken from a pool is memory V8 already counted.
 *
 * Giving a buffer back is a promise that nothing reads or writes it any more; a buffer never given
 * back is only collected as usual.
 */
export class BufferPool {
  readonly #free: Buffer[] = [];
  readonly #made = new WeakSet<ArrayBufferLike>();

  /**
   * @param keep most buffers kept free
   * @param grain capacities are multiples of it, so pages of slightly different sizes share buffers
   */
  constructor(
    private readonly keep = 8,
    private readonly grain = 256 * 1024,
  ) {}

  /** A buffer of exactly `size` bytes (uninitialised), backed by a free one where one is big enough. */
  take(size: number): Buffer {
    const i = this.#free.findIndex((b) => b.length >= size);
    if (i >= 0) return this.#free.splice(i, 1)[0]!.subarray(0, size);
    const buffer = Buffer.allocUnsafeSlow(Math.max(1, Math.ceil(size / this.grain)) * this.grain);
    this.#made.add(buffer.buffer);
    return buffer.subarray(0, size);
  }

  /** Returns a buffer from {@link take} (the whole of it, whatever part was used). */
  give(buffer: Buffer): void {
    const memory = buffer.buffer;
    // Only buffers this pool made (another may share its memory with others); one given twice is kept once.
    if (this.#free.length >= this.keep || !this.#made.has(memory) || this.#free.some((b) => b.buffer === memory)) return;
    this.#free.push(Buffer.from(memory, 0, memory.byteLength));
  }

  /** Free buffers held (for tests). */
  get size(): number {
    return this.#free.length;
  }
}
