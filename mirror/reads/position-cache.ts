// Dense positions kept in the reading process (any page as fast as the first). A stream's
// position chunks (record-positions.ts) change only when a pass computes them again, and that always
// bumps the set's version; so chunks read once, with the version and time they were computed at, can
// serve later pages as they are. A page is then the records' range alone (records-read.ts), with the
// set row's version compared in the page's own statement: no chunk rows read or sliced in Postgres;
// each record's id comes back at the end of its object's text, checked against the held ones.
//
// The key of a cached set is its version and its computation's time: a set row removed and made again
// starts its versions from 0, but not at the same microsecond.
import type { Pool } from '../db/pool.ts';
import { positionChunk, type PositionKey } from './record-positions.ts';

/**
 * A chunk's ids and ordinals (bigint as text, as pg reads it), each list held as one string and where
 * each item ends: a few objects a chunk to hold and to mark at every full collection, not two hundred
 * strings (uuid ids: ~5 kB a chunk against ~10 kB as arrays).
 */
export class CachedChunk {
  readonly size: number;
  readonly #ids: string;
  readonly #idEnds: Uint32Array;
  readonly #ordinals: string;
  readonly #ordinalEnds: Uint32Array;

  constructor(ids: readonly string[], ordinals: readonly string[]) {
    this.size = Math.min(ids.length, ordinals.length);
    [this.#ids, this.#idEnds] = packed(ids, this.size);
    [this.#ordinals, this.#ordinalEnds] = packed(ordinals, this.size);
  }

  /** The id at `i` (0 to size - 1). */
  id(i: number): string {
    return itemAt(this.#ids, this.#idEnds, i);
  }

  /**
   * Whether `count` rows from `rows[from]` are the records of the ids from `at` on, in order, each row
   * one text: the record's object, U+0001, its id (one column a row, as page 1 reads: a second column of
   * ids cost the reader a hundred more strings to decode and keep). The object's JSON text has no raw
   * U+0001 (JSON escapes it), so the first one ends it; the id after it must be the chunk's there, of
   * its length, and all the ids, joined, the chunk's text for them (a hundred `startsWith` at a
   * position cost ~20 µs a page; this ~3). Where they are, each object (without the tail) is pushed on
   * `objects`; where not, `objects` is left as it was.
   */
  objectsOf(at: number, rows: readonly (readonly [string])[], from: number, count: number, objects: string[]): boolean {
    if (at < 0 || count < 0 || at + count > this.size || from + count > rows.length) return false;
    const first = at === 0 ? 0 : this.#idEnds[at - 1]!;
    const kept = objects.length;
    let start = first;
    let joined = '';
    let same = true;
    for (let k = 0; same && k < count; k++) {
      const row = rows[from + k]![0];
      const end = this.#idEnds[at + k]!;
      const cut = row.length - (end - start) - 1;
      same = cut >= 0 && row.indexOf('\u0001') === cut;
      joined += row.slice(cut + 1);
      objects.push(row.slice(0, cut));
      start = end;
    }
    if (same && joined === this.#ids.slice(first, start)) return true;
    objects.length = kept;
    return false;
  }

  /** The ordinal at `i`, as text. */
  ordinal(i: number): string {
    return itemAt(this.#ordinals, this.#ordinalEnds, i);
  }
}

/** Item `i` of a packed list (`packed`). */
function itemAt(text: string, ends: Uint32Array, i: number): string {
  return text.slice(i === 0 ? 0 : ends[i - 1], ends[i]);
}

function packed(items: readonly string[], size: number): [string, Uint32Array] {
  const ends = new Uint32Array(size);
  let at = 0;
  for (let i = 0; i < size; i++) ends[i] = at += items[i]!.length;
  return [items.slice(0, size).join(''), ends];
}

export interface CachedPositions {
  /** The set's version (text) when its positions were computed (`valid_version = version`). */
  version: string;
  /** When they were computed (`computed_at` as text, to the microsecond). */
  computedAt: string;
  /** Live records they name. */
  live: number;
  chunks: Map<number, CachedChunk>;
}

/**
 * Chunks kept at most, over every stream the process reads (about 5 kB a chunk of uuids, less of
 * short ids: at most ~20 MB); past it the cache starts again. Enough for every page of a 400k list.
 */
const maxCachedChunks = 4096;

/**
 * Chunks read at once past a page's own: a reader paging through a list one page after another then
 * reads chunk rows once every few pages, not for every page.
 */
const chunksAhead = 7;

const setKey = (k: PositionKey) => `${k.accountId}\u0000${k.resource}\u0000${k.scope}`;

/**
 * Chunks read at once by the reading of a whole set behind a reader's page ({@link PositionCache.positionsFor}):
 * ~300 kB of ids a statement.
 */
const chunksAtOnce = 64;

/**
 * The positions one reading process holds of the streams it reads from one pool: sets by stream, the
 * chunks held over all of them (at most `maxCachedChunks`), and the sets being read whole behind a page.
 */
export class PositionCache {
  readonly #pool: Pool;
  readonly #sets = new Map<string, CachedPositions>();
  #chunks = 0;
  /** Sets being read whole, by the set they were read for. */
  readonly #readingWhole = new Map<CachedPositions, Promise<void>>();

  constructor(pool: Pool) {
    this.#pool = pool;
  }

  /** Forgets a stream's cached positions (its page did not match them: they are older than its records). */
  forget(key: PositionKey): void {
    const set = this.#sets.get(setKey(key));
    if (set === undefined) return;
    this.#chunks -= set.chunks.size;
    this.#sets.delete(setKey(key));
  }

  /**
   * The stream's positions holding chunks `first`..`last` (those that exist), from the cache or read
   * with the set row in one statement (one snapshot) along with `chunksAhead` more; undefined when the
   * positions are not valid. A set read at another version replaces the cached one. The caller still
   * checks the version in its page's statement: a cached set may be older than the records.
   *
   * A set read for a page is then read whole behind it, where the process has room for it (never what
   * makes it start its cache again): `chunksAtOnce` chunks a statement, one statement at a time. A
   * reader at random places of a list otherwise paid a read of chunk rows on most of its first thousand
   * pages (bench [5]: a 200k list is 2,000 chunks, read nine at a time), each in its latency's tail.
   */
  async positionsFor(key: PositionKey, first: number, last: number): Promise<CachedPositions | undefined> {
    const cached = this.#sets.get(setKey(key));
    if (cached !== undefined && holds(cached, first, last)) return cached;
    const set = await this.#readChunks(key, first, last + chunksAhead);
    if (set !== undefined && chunksOf(set) - set.chunks.size <= maxCachedChunks - this.#chunks && !this.#readingWhole.has(set)) {
      const whole = this.#readRest(key, set)
        // A statement that fails leaves the chunks to be read as pages ask for them.
        .catch(() => undefined)
        .finally(() => this.#readingWhole.delete(set));
      this.#readingWhole.set(set, whole);
    }
    return set;
  }

  /** Until the sets being read whole in the background are read (for tests and diagnostics). */
  async settled(): Promise<void> {
    while (this.#readingWhole.size > 0) await Promise.all(this.#readingWhole.values());
  }

  /** Reads the chunks of `set` not held yet, while it is the set held for its stream. */
  async #readRest(key: PositionKey, set: CachedPositions): Promise<void> {
    const chunks = chunksOf(set);
    for (let from = 0; from < chunks; from += chunksAtOnce) {
      if (this.#sets.get(setKey(key)) !== set) return;
      if (holds(set, from, from + chunksAtOnce - 1)) continue;
      // Never what makes the process start its cache again (another stream's reader keeps its chunks).
      if (this.#chunks + chunksAtOnce > maxCachedChunks) return;
      if ((await this.#readChunks(key, from, from + chunksAtOnce - 1)) !== set) return;
    }
  }

  /**
   * Reads the set row and chunks `from`..`to` into the cache (one statement, one snapshot): the set
   * held after it, or undefined when the positions are not valid (then nothing is held of the stream).
   */
  async #readChunks(key: PositionKey, from: number, to: number): Promise<CachedPositions | undefined> {
    const name = setKey(key);
    // Each chunk's lists as JSON text (ordinals as strings: bigint), parsed by JSON.parse: as arrays, pg's
    // parser of array literals cost ~0.3 ms of CPU a chunk, 5% of the API's time while a random reader's
    // chunks were being read (bench [5]).
    const { rows } = await this.#pool.query<[string, string, number, number | null, string | null, string | null]>({
      name: 'mirror.positions-load',
      text: `SELECT s.version::text, s.computed_at::text, s.live, c.chunk, to_json(c.ids)::text, to_json(c.ordinals::text[])::text
               FROM record_position_sets s
               LEFT JOIN record_position_chunks c
                 ON c.account_id = s.account_id AND c.resource = s.resource AND c.scope = s.scope AND c.chunk BETWEEN $4::int AND $5::int
              WHERE s.account_id = $1 AND s.resource = $2 AND s.scope = $3
                AND s.valid_version = s.version AND s.chunk_size = ${positionChunk} AND s.computed_at IS NOT NULL`,
      values: [key.accountId, key.resource, key.scope, from, to],
      rowMode: 'array',
    });
    if (rows.length === 0) {
      this.forget(key);
      return undefined;
    }
    const [version, computedAt, live] = rows[0]!;
    let set = this.#sets.get(name);
    if (set === undefined || set.version !== version || set.computedAt !== computedAt) {
      this.forget(key);
      set = { version, computedAt, live, chunks: new Map() };
      this.#sets.set(name, set);
    }
    for (const [, , , chunk, ids, ordinals] of rows) {
      if (chunk === null || ids === null || ordinals === null || set.chunks.has(chunk)) continue;
      if (this.#chunks >= maxCachedChunks) {
        // Full: start again, with this set alone.
        this.#sets.clear();
        this.#sets.set(name, set);
        this.#chunks = set.chunks.size;
      }
      set.chunks.set(chunk, new CachedChunk(JSON.parse(ids) as string[], JSON.parse(ordinals) as string[]));
      this.#chunks++;
    }
    return set;
  }
}

/** The chunks the set's positions fill. */
function chunksOf(set: CachedPositions): number {
  return Math.ceil(set.live / positionChunk);
}

/** Whether the set holds each of chunks `first`..`last` that exist. */
function holds(set: CachedPositions, first: number, last: number): boolean {
  const chunks = chunksOf(set);
  for (let c = first; c <= Math.min(last, chunks - 1); c++) if (!set.chunks.has(c)) return false;
  return true;
}
