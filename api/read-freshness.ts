// Freshness a read asks for, and what the upstream said lately about single objects. A request with
// `Cache-Control: max-age=N` (or `no-cache`) wants an answer no older than N seconds; a single-object
// read of an id the mirror does not hold is asked of the upstream, and its answer remembered per id,
// so a flood of reads of unknown ids costs one upstream call per id per window, not one per read.
import type { IncomingHttpHeaders } from 'node:http';

/**
 * The oldest answer the request accepts, in seconds; undefined: any (the mirror's copy as it is).
 * `no-cache` is 0; of several bounds the smallest holds; a malformed `max-age` counts as 0 (a fresh
 * answer is always acceptable, a stale one might not be). `Pragma: no-cache` counts only without a
 * Cache-Control header, as HTTP/1.1 caches read it. Other directives (`no-store`, `max-stale`,
 * `min-fresh`, `only-if-cached`) do not bound the age and are passed on with the request when it is
 * forwarded.
 */
export function maxAgeOf(headers: IncomingHttpHeaders): number | undefined {
  const cc = headers['cache-control'];
  if (cc === undefined) {
    const pragma = [headers.pragma ?? []].flat().join(',');
    return /(^|,)\s*no-cache\s*(,|$)/i.test(pragma) ? 0 : undefined;
  }
  let bound: number | undefined;
  for (const directive of [cc].flat().join(',').split(',')) {
    const [rawName, ...rest] = directive.split('=');
    const name = rawName!.trim().toLowerCase();
    let seconds: number | undefined;
    if (name === 'no-cache') seconds = 0;
    else if (name === 'max-age') {
      const value = rest
        .join('=')
        .trim()
        .replace(/^"(.*)"$/, '$1');
      seconds = /^\d+$/.test(value) ? Number(value) : 0;
    }
    if (seconds !== undefined) bound = bound === undefined ? seconds : Math.min(bound, seconds);
  }
  return bound;
}

/** Whether data verified at `at` satisfies a bound of `maxAgeS` seconds (no bound: always). */
export function freshEnough(at: Date | number | null | undefined, maxAgeS: number | undefined, now = Date.now()): boolean {
  if (maxAgeS === undefined) return true;
  if (at === null || at === undefined) return false;
  return now - (typeof at === 'number' ? at : at.getTime()) <= maxAgeS * 1000;
}

/** One object as the upstream was asked about it: an account's resource, in one scope, by reference. */
export interface ObjectKey {
  accountId: string;
  resource: string;
  /** The scope read (`'*'` for every project); part of the key so no scope answers for another. */
  scope: string;
  /** The id, or `source_id:<id>`, as the caller named it. */
  ref: string;
}

/** What the upstream answered for an object, and when (ms since the epoch). */
interface ObjectAnswer {
  found: boolean;
  at: number;
}

export interface ObjectLookupsOptions {
  /** How long a not-found answer is believed (an object created upstream meanwhile is a 404 for at most this long). */
  notFoundMs?: number;
  /** Objects remembered at most (the oldest are forgotten first). */
  maxEntries?: number;
  now?: () => number;
}

/**
 * The upstream's recent answers about single objects, per object, with the lookups under way: a
 * not-found answer stands for `notFoundMs`; a found one records when the object was verified (a read
 * bounded by max-age is then answered from the mirror while that is recent enough). Concurrent reads
 * of one object share one lookup. Bounded: at most `maxEntries` objects, the oldest forgotten first.
 */
export class ObjectLookups {
  readonly notFoundMs: number;
  readonly maxEntries: number;
  private readonly now: () => number;
  private readonly answers = new Map<string, ObjectAnswer>();
  private readonly inFlight = new Map<string, Promise<unknown>>();

  constructor(options: ObjectLookupsOptions = {}) {
    this.notFoundMs = options.notFoundMs ?? 30_000;
    this.maxEntries = options.maxEntries ?? 10_000;
    this.now = options.now ?? Date.now;
  }

  private static keyOf(k: ObjectKey): string {
    return `${k.accountId}\u0000${k.resource}\u0000${k.scope}\u0000${k.ref}`;
  }

  /** The upstream's last answer for the object, if it still stands (a not-found one for `notFoundMs`). */
  recent(key: ObjectKey): ObjectAnswer | undefined {
    const k = ObjectLookups.keyOf(key);
    const answer = this.answers.get(k);
    if (!answer) return undefined;
    if (!answer.found && this.now() - answer.at >= this.notFoundMs) {
      this.answers.delete(k);
      return undefined;
    }
    return answer;
  }

  /** Records an answer (the object's entry moves to the newest end). */
  remember(key: ObjectKey, found: boolean, at = this.now()): void {
    const k = ObjectLookups.keyOf(key);
    this.answers.delete(k);
    if (this.answers.size >= this.maxEntries) {
      const now = this.now();
      for (const [key2, a] of this.answers) if (!a.found && now - a.at >= this.notFoundMs) this.answers.delete(key2);
      // Still full: the oldest entries go (Map keeps insertion order).
      for (const key2 of this.answers.keys()) {
        if (this.answers.size < this.maxEntries) break;
        this.answers.delete(key2);
      }
    }
    this.answers.set(k, { found, at });
  }

  /** Runs `lookup` for the object unless one is under way, whose result is then shared. */
  once<T>(key: ObjectKey, lookup: () => Promise<T>): Promise<T> {
    const k = ObjectLookups.keyOf(key);
    const pending = this.inFlight.get(k) as Promise<T> | undefined;
    if (pending) return pending;
    const started = lookup().finally(() => this.inFlight.delete(k));
    this.inFlight.set(k, started);
    return started;
  }

  get size(): number {
    return this.answers.size;
  }
}
