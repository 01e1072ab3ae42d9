// Reads of mirrored records for the API, in the contract's shape. Rows come out of Postgres as JSON
// text and are spliced into the response without a parse/serialise round trip. What makes them fast
// (statements built once, the partitions' names, held positions, remembered freshness) belongs to one
// RecordReader per pool, which the API holds.
import type { Pool } from '../db/pool.ts';
import { CompiledFilters } from './record-filters.ts';
import { PositionCache } from './position-cache.ts';
import { PartitionTables } from './partition-tables.ts';
import { objectSql, ReadStatements } from './read-statements.ts';
import {
  acrossPage,
  firstPage,
  listStrategy,
  offsetPage,
  pageByPositions,
  AcrossOrderUnknown,
  type ListContext,
  type ListPage,
  type ListQuery,
} from './list-strategies.ts';
import { scopeLastVerifiedAt, scopesLastVerifiedAt } from '../streams/freshness.ts';

interface ListResult extends ListPage {
  /** Oldest verification among the streams read (for Svc-Data-Retrieved-At; freshness.ts). */
  retrievedAt: Date | null;
}

interface GetQuery {
  accountId: string;
  resource: string;
  scopes: readonly string[] | 'all';
  /** A service id, or a source id when `bySourceId`. */
  id: string;
  bySourceId: boolean;
  includeSourceData: boolean;
}

interface GetResult {
  json: string;
  scope: string;
  /**
   * When the object's data was last fetched from the upstream: the later of its stream's verification
   * (freshness.ts) and the object's own last write (a pass's page, an event, a write's answer).
   */
  retrievedAt: Date | null;
}

/**
 * Freshness of a stream (`Svc-Data-Retrieved-At`), remembered by a reader for at most this long: a
 * single-object read is then the record alone, a one-scope list one query. The key is the whole
 * stream (account, resource, scope), so no account ever sees another's value; a pass that completes
 * shows in the header within this time.
 */
export const freshnessTtlMs = 1000;

/** Entries a reader remembers of each kind at most; past it, it starts again. */
const maxRemembered = 10_000;

/** Values remembered for `freshnessTtlMs` each, at most `maxRemembered` of them. */
class Remembered<V> {
  readonly #entries = new Map<string, { value: V; until: number }>();

  /** The value, where it is remembered and not yet expired at `now`. */
  get(key: string, now: number): { value: V } | undefined {
    const entry = this.#entries.get(key);
    return entry !== undefined && entry.until > now ? entry : undefined;
  }

  set(key: string, value: V, asOf: number): void {
    if (this.#entries.size >= maxRemembered) this.#entries.clear();
    this.#entries.set(key, { value, until: asOf + freshnessTtlMs });
  }
}

const streamKey = (accountId: string, resource: string, scope: string) => `${accountId}\u0000${resource}\u0000${scope}`;

const later = (a: Date | null | undefined, b: Date | null | undefined): Date | null => (!a ? (b ?? null) : !b || a >= b ? a : b);

/**
 * The reads of one pool's records, with what makes them fast: one per pool, made once by the process
 * that reads (the API) and handed to what reads.
 */
export class RecordReader {
  readonly pool: Pool;
  /**
   * How list pages were read since the reader was made: a plain list's first page from the start of its
   * index, by positions (a plain list's other pages, and plain lists across projects), or by OFFSET
   * (every other list, and a plain one whose positions were out of date). For tests and diagnostics.
   */
  readonly readPaths = { first: 0, positioned: 0, offset: 0 };
  readonly #statements = new ReadStatements();
  readonly #partitions: PartitionTables;
  readonly #positions: PositionCache;
  readonly #filters = new CompiledFilters();
  /** Each stream's verification (`freshnessTtlMs`). */
  readonly #freshness = new Remembered<Date | null>();
  /**
   * Streams known synced (only a yes is remembered: a stream once synced stays so unless its account is
   * purged): a list page is then one query, as the raw baseline's is (the lookup was a second round trip
   * on every page: page 1 ran at 0.49x the baseline). Keyed by the account, resource and scopes.
   */
  readonly #synced = new Remembered<true>();

  constructor(pool: Pool) {
    this.pool = pool;
    this.#partitions = new PartitionTables(pool);
    this.#positions = new PositionCache(pool);
  }

  /** A page of a list; throws AcrossOrderUnknown for a list across projects whose order is not known. */
  async listRecords(q: ListQuery): Promise<ListResult> {
    const ctx: ListContext = {
      pool: this.pool,
      statements: this.#statements,
      positions: this.#positions,
      filters: this.#filters,
      table: await this.#partitions.tableOf(q.resource),
    };
    const [page, retrievedAt] = await Promise.all([this.#page(ctx, q), this.#listFreshness(q)]);
    return { ...page, retrievedAt };
  }

  /** The page by the query's strategy (list-strategies.ts). */
  async #page(ctx: ListContext, q: ListQuery): Promise<ListPage> {
    switch (listStrategy(q)) {
      case 'first': {
        const page = await firstPage(ctx, q, q.scopes[0]!);
        this.readPaths.first++;
        return page;
      }
      case 'positions': {
        const page = await pageByPositions(ctx, q, q.scopes[0]!);
        if (page === undefined) break;
        this.readPaths.positioned++;
        return page;
      }
      case 'across': {
        const page = await acrossPage(ctx, q);
        if (page === undefined) throw new AcrossOrderUnknown(q.resource);
        this.readPaths.positioned++;
        return page;
      }
      case 'offset':
        break;
    }
    this.readPaths.offset++;
    return offsetPage(ctx, q);
  }

  /** The list's freshness: one stream's as remembered (see freshnessTtlMs), else asked for. */
  #listFreshness(q: ListQuery): Promise<Date | null> {
    const now = Date.now();
    const stream = q.scopes !== 'all' && q.scopes.length === 1 ? streamKey(q.accountId, q.resource, q.scopes[0]!) : undefined;
    const known = stream === undefined ? undefined : this.#freshness.get(stream, now);
    if (known !== undefined) return Promise.resolve(known.value);
    return scopesLastVerifiedAt(this.pool, { accountId: q.accountId, resource: q.resource, scopes: q.scopes }).then(({ at }) => {
      if (stream !== undefined) this.#freshness.set(stream, at, now);
      return at;
    });
  }

  async getRecord(q: GetQuery): Promise<GetResult | undefined> {
    const params: unknown[] = [q.accountId, q.resource, q.id];
    // One scope (every request but `Project-Id: *`): an equality on the key's scope column.
    const single = q.scopes !== 'all' && q.scopes.length === 1;
    if (q.scopes !== 'all') params.push(single ? q.scopes[0] : q.scopes);
    const now = Date.now();
    const known = single ? this.#freshness.get(streamKey(q.accountId, q.resource, q.scopes[0] as string), now) : undefined;
    const statement = this.#statements.get({ ...q, scopes: single ? 'one' : q.scopes === 'all' ? 'all' : 'several' });
    // The stream's verification, as remembered, else asked beside the record (one scope) or after it.
    const verified = (scope: string) =>
      scopeLastVerifiedAt(this.pool, { accountId: q.accountId, resource: q.resource, scope }).then((at) => {
        this.#freshness.set(streamKey(q.accountId, q.resource, scope), at, now);
        return at;
      });
    const alongside = known !== undefined ? Promise.resolve(known.value) : single ? verified(q.scopes[0] as string) : undefined;
    // Not awaited when no record is found: its failure is the query's to report, not an unhandled rejection.
    alongside?.catch(() => undefined);
    const { rows } = await this.pool.query<{ j: string; scope: string; m: Date }>(statement, params);
    const row = rows[0];
    if (!row) return undefined;
    const at = await (alongside ?? verified(row.scope));
    return { json: row.j, scope: row.scope, retrievedAt: later(at, row.m) };
  }

  /** Whether any pass of these streams has completed (a scope never synced is served from the upstream). */
  async scopeSynced(accountId: string, resource: string, scopes: readonly string[] | 'all'): Promise<boolean> {
    const key = `${accountId}\u0000${resource}\u0000${scopes === 'all' ? '*all*' : JSON.stringify(scopes)}`;
    const now = Date.now();
    if (this.#synced.get(key, now) !== undefined) return true;
    const synced = await syncedNow(this.pool, accountId, resource, scopes);
    if (synced) this.#synced.set(key, true, now);
    return synced;
  }

  /** Until the positions being read in the background are read (for tests and diagnostics). */
  positionsRead(): Promise<void> {
    return this.#positions.settled();
  }
}

async function syncedNow(pool: Pool, accountId: string, resource: string, scopes: readonly string[] | 'all'): Promise<boolean> {
  const { rows } =
    scopes === 'all'
      ? await pool.query(`SELECT 1 FROM streams WHERE account_id = $1 AND resource = $2 AND last_fresh_at IS NOT NULL LIMIT 1`, [accountId, resource])
      : await pool.query(`SELECT 1 FROM streams WHERE account_id = $1 AND resource = $2 AND scope = ANY($3::text[]) AND last_fresh_at IS NOT NULL LIMIT 1`, [
          accountId,
          resource,
          scopes,
        ]);
  return rows.length > 0;
}

/** Resolves a project given as a service id or `source_id:<x>` to its service id. */
export async function resolveId(pool: Pool, accountId: string, resource: string, scope: string, ref: string): Promise<string | undefined> {
  if (!ref.startsWith('source_id:')) return ref;
  const { rows } = await pool.query<{ id: string }>(
    `SELECT id FROM records WHERE account_id = $1 AND resource = $2 AND scope = $3 AND source_id = $4 AND deleted_at IS NULL LIMIT 1`,
    [accountId, resource, scope, ref.slice('source_id:'.length)],
  );
  return rows[0]?.id;
}

/** Live records of one scope whose `data` field `field` equals `value`, in the upstream's order. */
export async function recordsWhere(
  pool: Pool,
  q: { accountId: string; resource: string; scope: string; field: 'folder_id' | 'parent_id'; value: string | null; includeSourceData: boolean },
): Promise<string[]> {
  const match = q.value === null ? `(data->'${q.field}' IS NULL OR data->'${q.field}' = 'null'::jsonb)` : `data->>'${q.field}' = $4`;
  const { rows } = await pool.query<{ j: string }>(
    `SELECT ${objectSql(q.includeSourceData)} FROM records
      WHERE account_id = $1 AND resource = $2 AND scope = $3 AND deleted_at IS NULL AND ${match}
      ORDER BY ordinal, id`,
    q.value === null ? [q.accountId, q.resource, q.scope] : [q.accountId, q.resource, q.scope, q.value],
  );
  return rows.map((r) => r.j);
}
