// Dense positions kept in the reading process (issue 26: any page as fast as the first). A stream's
// position chunks (record-positions.ts) change only when a pass computes them again, and that always
// bumps the set's version; so chunks read once, with the version and time they were computed at, can
// serve later pages as they are. A page is then the records' range alone (records-read.ts), with the
// set row's version compared in the page's own statement: no chunk rows read or sliced in Postgres, and
// no ids sent back to check the page against.
//
// The key of a cached set is its version and its computation's time: a set row removed and made again
// starts its versions from 0, but not at the same microsecond.
import type { Pool } from './pool.ts';
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
    return this.#ids.slice(i === 0 ? 0 : this.#idEnds[i - 1], this.#idEnds[i]);
  }

  /** Whether the id at `i` is `id`, without making a string of it. */
  idIs(i: number, id: string): boolean {
    const start = i === 0 ? 0 : this.#idEnds[i - 1]!;
    return i < this.size && this.#idEnds[i]! - start === id.length && this.#ids.startsWith(id, start);
  }

  /** The ordinal at `i`, as text. */
  ordinal(i: number): string {
    return this.#ordinals.slice(i === 0 ? 0 : this.#ordinalEnds[i - 1], this.#ordinalEnds[i]);
  }
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
export const maxCachedChunks = 4096;

/**
 * Chunks read at once past a page's own: a reader paging through a list one page after another then
 * reads chunk rows once every few pages, not for every page.
 */
export const chunksAhead = 7;

const caches = new WeakMap<Pool, { sets: Map<string, CachedPositions>; chunks: number }>();

function cacheOf(pool: Pool): { sets: Map<string, CachedPositions>; chunks: number } {
  let cache = caches.get(pool);
  if (!cache) caches.set(pool, (cache = { sets: new Map(), chunks: 0 }));
  return cache;
}

const setKey = (k: PositionKey) => `${k.accountId}\u0000${k.resource}\u0000${k.scope}`;

/** Forgets a stream's cached positions (its page did not match them: they are older than its records). */
export function forgetPositions(pool: Pool, key: PositionKey): void {
  const cache = cacheOf(pool);
  const set = cache.sets.get(setKey(key));
  if (set === undefined) return;
  cache.chunks -= set.chunks.size;
  cache.sets.delete(setKey(key));
}

/**
 * The stream's positions holding chunks `first`..`last` (those that exist), from the cache or read
 * with the set row in one statement (one snapshot) along with `chunksAhead` more; undefined when the
 * positions are not valid. A set read at another version replaces the cached one. The caller still
 * checks the version in its page's statement: a cached set may be older than the records.
 */
export async function positionsFor(pool: Pool, key: PositionKey, first: number, last: number): Promise<CachedPositions | undefined> {
  const cache = cacheOf(pool);
  const name = setKey(key);
  const cached = cache.sets.get(name);
  if (cached !== undefined) {
    const chunks = Math.ceil(cached.live / positionChunk);
    let held = true;
    for (let c = first; c <= Math.min(last, chunks - 1) && held; c++) held = cached.chunks.has(c);
    if (held) return cached;
  }
  const { rows } = await pool.query<[string, string, number, number | null, string[] | null, string[] | null]>({
    name: 'mirror.positions-load',
    text: `SELECT s.version::text, s.computed_at::text, s.live, c.chunk, c.ids, c.ordinals::text[]
             FROM record_position_sets s
             LEFT JOIN record_position_chunks c
               ON c.account_id = s.account_id AND c.resource = s.resource AND c.scope = s.scope AND c.chunk BETWEEN $4::int AND $5::int
            WHERE s.account_id = $1 AND s.resource = $2 AND s.scope = $3
              AND s.valid_version = s.version AND s.chunk_size = ${positionChunk} AND s.computed_at IS NOT NULL`,
    values: [key.accountId, key.resource, key.scope, first, last + chunksAhead],
    rowMode: 'array',
  });
  if (rows.length === 0) {
    forgetPositions(pool, key);
    return undefined;
  }
  const [version, computedAt, live] = rows[0]!;
  let set = cache.sets.get(name);
  if (set === undefined || set.version !== version || set.computedAt !== computedAt) {
    forgetPositions(pool, key);
    set = { version, computedAt, live, chunks: new Map() };
    cache.sets.set(name, set);
  }
  for (const [, , , chunk, ids, ordinals] of rows) {
    if (chunk === null || ids === null || ordinals === null || set.chunks.has(chunk)) continue;
    if (cache.chunks >= maxCachedChunks) {
      // Full: start again, with this set alone.
      cache.sets.clear();
      cache.sets.set(name, set);
      cache.chunks = set.chunks.size;
    }
    set.chunks.set(chunk, new CachedChunk(ids, ordinals));
    cache.chunks++;
  }
  return set;
}
