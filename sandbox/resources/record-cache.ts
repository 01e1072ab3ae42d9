// The JSON bytes of recently served list records, so a page asked for again is copied rather than
// generated and written anew. Records are grouped in segments, one per list and per everything else
// their text depends on (the source-data mode, the native path context), and found by index. They
// hold while no data changes: any change empties the cache (a record may embed another list's).
//
// Only lists that fit in half the cache are kept (the caller's rule, see resources/routes.ts): a
// bigger one read through (a full sync of a big list) would only push everything out before any of
// it is read again, paying a copy per record for nothing.
//
// The bytes live outside the JS heap, in 1 MiB slabs (allocated as needed, then kept) filled in turn
// and recycled oldest first, so a full cache costs the garbage collector nothing. An entry is a
// small integer (slab slot and offset) in a Map; a record costs one copy in and one copy out.
import type { JsonWriter } from './json-writer.ts';

const SLAB_BITS = 20;
const SLAB_BYTES = 1 << SLAB_BITS;
const OFFSET_MASK = SLAB_BYTES - 1;
/** Slot numbers stay below this, so slot and offset fit a small integer. */
const MAX_SLABS = 1024;
const SLABS_PER_CHUNK = 16;
/** Each record's bytes are preceded by their length. */
const HEADER = 4;

export interface Segment {
  readonly name: string;
  /** Record index -> slab slot * SLAB_BYTES + offset of its header. */
  readonly at: Map<number, number>;
}

interface Slab {
  readonly slot: number;
  readonly bytes: Buffer;
  used: number;
  /** The entries in this slab, to forget when it is recycled. */
  segments: Segment[];
  indexes: number[];
}

export class RecordCache {
  private readonly segments = new Map<string, Segment>();
  /** In use, oldest first; the last one is being filled. */
  private slabs: Slab[] = [];
  private readonly bySlot: Slab[] = [];
  private readonly maxSlabs: number;
  private chunk: Buffer | undefined;
  private version = -1;
  private hits = 0;
  private misses = 0;

  /** `maxBytes` is rounded down to whole MiB (at most 1 GiB); under 1 MiB turns the cache off. */
  constructor(maxBytes: number) {
    this.maxSlabs = Math.min(MAX_SLABS, Math.floor(maxBytes / SLAB_BYTES));
  }

  get enabled(): boolean {
    return this.maxSlabs > 0;
  }

  /** Bytes it may hold. */
  get capacity(): number {
    return this.maxSlabs * SLAB_BYTES;
  }

  /** Bytes allocated for records (slabs, used or kept for reuse). */
  get allocated(): number {
    return this.bySlot.length * SLAB_BYTES;
  }

  get entries(): number {
    let n = 0;
    for (const s of this.slabs) n += s.indexes.length;
    return n;
  }

  /** For `GET /_admin/stats`. */
  snapshot() {
    let used = 0;
    for (const s of this.slabs) used += s.used;
    return { capacity_bytes: this.capacity, allocated_bytes: this.allocated, used_bytes: used, records: this.entries, hits: this.hits, misses: this.misses };
  }

  /** Forgets every record when the data changed since they were written (`version`: the overlay's). */
  sync(version: number): void {
    if (version === this.version) return;
    this.version = version;
    this.segments.clear();
    for (const s of this.slabs) this.empty(s);
    this.slabs = [];
  }

  segment(name: string): Segment {
    let s = this.segments.get(name);
    if (!s) this.segments.set(name, (s = { name, at: new Map() }));
    return s;
  }

  /** Where record `index` of `segment` is held, or -1. */
  find(segment: Segment, index: number): number {
    const at = segment.at.get(index);
    if (at === undefined) {
      this.misses++;
      return -1;
    }
    this.hits++;
    return at;
  }

  /** Writes the record held at `at` (from `find`). */
  copyTo(at: number, w: JsonWriter): void {
    const slab = this.bySlot[at >>> SLAB_BITS]!;
    const offset = at & OFFSET_MASK;
    const length = slab.bytes.readUInt32LE(offset);
    w.append(slab.bytes, offset + HEADER, offset + HEADER + length);
  }

  /** Keeps the bytes the writer wrote from `start` on as record `index` of `segment`. */
  keep(segment: Segment, index: number, w: JsonWriter, start: number): void {
    const length = w.at - start;
    if (length + HEADER > SLAB_BYTES || segment.at.has(index)) return;
    let slab = this.slabs[this.slabs.length - 1];
    if (!slab || slab.used + HEADER + length > SLAB_BYTES) {
      slab = this.nextSlab();
      // Recycling may have emptied and dropped this very segment: it is in use again.
      if (!this.segments.has(segment.name)) this.segments.set(segment.name, segment);
    }
    slab.bytes.writeUInt32LE(length, slab.used);
    w.copyOut(start, slab.bytes, slab.used + HEADER);
    segment.at.set(index, slab.slot * SLAB_BYTES + slab.used);
    slab.segments.push(segment);
    slab.indexes.push(index);
    slab.used += HEADER + length;
  }

  private nextSlab(): Slab {
    let slab: Slab;
    if (this.slabs.length >= this.maxSlabs) {
      slab = this.slabs.shift()!;
      this.reset(slab);
    } else {
      // A slab no longer in use (after a change emptied the cache), else a new one.
      const inUse = new Set(this.slabs);
      slab = this.bySlot.find((s) => !inUse.has(s)) ?? this.newSlab();
    }
    this.slabs.push(slab);
    return slab;
  }

  private newSlab(): Slab {
    const slot = this.bySlot.length;
    // Slabs are cut from chunks of up to 16, each one allocation of its own (mapped apart from the
    // heap that page buffers come and go in, which a slab between them would keep from shrinking).
    if (slot % SLABS_PER_CHUNK === 0) this.chunk = Buffer.allocUnsafeSlow(Math.min(SLABS_PER_CHUNK, this.maxSlabs - slot) * SLAB_BYTES);
    const offset = (slot % SLABS_PER_CHUNK) * SLAB_BYTES;
    const slab: Slab = { slot, bytes: this.chunk!.subarray(offset, offset + SLAB_BYTES), used: 0, segments: [], indexes: [] };
    this.bySlot.push(slab);
    return slab;
  }

  /** Forgets a slab's entries and empties it for reuse. */
  private reset(slab: Slab): void {
    for (let i = 0; i < slab.indexes.length; i++) {
      const segment = slab.segments[i]!;
      segment.at.delete(slab.indexes[i]!);
      if (segment.at.size === 0 && this.segments.get(segment.name) === segment) this.segments.delete(segment.name);
    }
    this.empty(slab);
  }

  private empty(slab: Slab): void {
    slab.used = 0;
    slab.segments = [];
    slab.indexes = [];
  }
}
