// Reads of mirrored records for the API, in the contract's shape. Rows come out of Postgres as JSON
// text and are spliced into the response without a parse/serialise round trip.
import { createHash } from 'node:crypto';
import type { Pool } from '../db/pool.ts';
import { filtersSql, orderSql, type RecordFilter, type RecordOrder } from './record-filters.ts';
import { forgetPositions, positionsFor, type CachedPositions } from './position-cache.ts';
import { positionChunk } from './record-positions.ts';
import { allProjectsScope } from '../../lib/resources.ts';
import { scopeLastVerifiedAt, scopesLastVerifiedAt } from '../streams/freshness.ts';

export interface ListQuery {
  accountId: string;
  resource: string;
  /** One scope, or several (e.g. every project of the account for `Project-Id: *`). */
  scopes: readonly string[] | 'all';
  page: number;
  perPage: number;
  includeSourceData: boolean;
  includeDeleted?: boolean;
  modifiedAfter?: Date;
  /** Predicates on the records' fields, ANDed (record-filters.ts); fields already checked against the catalog. */
  filters?: readonly RecordFilter[];
  /** Keys the list is ordered by before its own order (record-filters.ts orderSql); fields already checked. */
  orderBy?: readonly RecordOrder[];
  /** Fields with a text expression index on the resource (record-filters.ts filtersSql). */
  indexed?: ReadonlySet<string>;
}

interface ListResult {
  /** Each row's JSON text. */
  rows: string[];
  /** Each row's scope (same order as `rows`). */
  rowScopes: string[];
  hasMore: boolean;
  /** Oldest verification among the streams read (for Svc-Data-Retrieved-At; freshness.ts). */
  retrievedAt: Date | null;
}

/** The object as served: `data`, with `source_data` added when asked for (columns of `alias`). */
function objectSql(includeSourceData: boolean, alias = ''): string {
  return `${objectText(includeSourceData, alias)} AS j`;
}

/**
 * The object's JSON text (objectSql), without its column name. `source_data` goes last, where the
 * upstream puts it, spliced into the object's text before its closing brace: jsonb would sort it among
 * the keys by length (bench/json-text-cost.ts: a page of 100 with source data reads 1.15x faster
 * so than through jsonb's `||`). The other keys come in jsonb's order (docs/drop-in.md says why).
 * An object that is empty, or holds a key `source_data` of its own, is merged as before.
 */
function objectText(includeSourceData: boolean, alias = ''): string {
  const a = alias ? `${alias}.` : '';
  return includeSourceData
    ? `(CASE WHEN ${a}source_data IS NULL THEN ${a}data::text
             WHEN ${a}data ? 'source_data' OR ${a}data = '{}'::jsonb THEN (${a}data || jsonb_build_object('source_data', ${a}source_data))::text
             ELSE left(${a}data::text, -1) || ', "source_data": ' || ${a}source_data::text || '}' END)`
    : `${a}data::text`;
}

/**
 * Freshness of a stream (`Svc-Data-Retrieved-At`), remembered per process for at most this long: a
 * single-object read is then the record alone, a one-scope list one query. The key is the whole
 * stream (account, resource, scope), so no account ever sees another's value; a pass that completes
 * shows in the header within this time.
 */
export const freshnessTtlMs = 1000;
const freshness = new WeakMap<Pool, Map<string, { at: Date | null; until: number }>>();

function freshnessOf(pool: Pool): Map<string, { at: Date | null; until: number }> {
  let m = freshness.get(pool);
  if (!m) freshness.set(pool, (m = new Map<string, { at: Date | null; until: number }>()));
  return m;
}

const getStatements = new Map<string, { name: string; text: string }>();

const streamKey = (accountId: string, resource: string, scope: string) => `${accountId}\u0000${resource}\u0000${scope}`;

function remember(cache: Map<string, { at: Date | null; until: number }>, key: string, at: Date | null, asOf: number): void {
  if (cache.size >= 10_000) cache.clear();
  cache.set(key, { at, until: asOf + freshnessTtlMs });
}

/**
 * How list pages were read since the process started: a plain list's first page from the start of its
 * index, a plain list's other pages by the stream's dense positions, or by OFFSET (every other list,
 * and a plain one whose positions were out of date). For tests and diagnostics.
 */
export const listReadPaths = { first: 0, positioned: 0, offset: 0 };

/**
 * The partition of `records` that holds each resource's rows (list partitions by resource; the default
 * partition is not listed), per pool, read again after `partitionsTtlMs`. A list page names it in
 * place of `records`: a statement on the parent is planned for each execution (its generic plan locks
 * and prunes every partition at each run: 0.5 s with the real catalog's 96, where a custom plan costs
 * ~0.5 ms of the page's ~1.1 ms of Postgres CPU), one on the partition is planned once per connection.
 * Every statement still compares `resource`, so a partition holding several resources answers the same.
 */
const partitionsTtlMs = 10_000;
const partitionMaps = new WeakMap<Pool, { at: number; map: Promise<Map<string, string>> }>();

function loadPartitions(pool: Pool): Promise<Map<string, string>> {
  return pool
    .query<{ name: string; bound: string }>(
      `SELECT c.relname AS name, pg_get_expr(c.relpartbound, c.oid) AS bound
         FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
        WHERE i.inhparent = 'records'::regclass AND c.relnamespace = current_schema()::regnamespace`,
    )
    .then(({ rows }) => {
      const map = new Map<string, string>();
      for (const r of rows) {
        if (!r.bound.startsWith('FOR VALUES IN (')) continue;
        for (const m of r.bound.matchAll(/'((?:[^']|'')*)'/g)) map.set(m[1]!.replace(/''/g, "'"), r.name);
      }
      return map;
    });
}

/** A short tag per table for statement names (Postgres keeps 63 bytes of a name). */
const tableTags = new Map<string, number>();
const tableTag = (table: string): number => {
  let tag = tableTags.get(table);
  if (tag === undefined) tableTags.set(table, (tag = tableTags.size));
  return tag;
};

/** The table a list of `resource` reads: its own partition (quoted), else `records`. */
async function recordsTable(pool: Pool, resource: string): Promise<string> {
  const now = Date.now();
  let entry = partitionMaps.get(pool);
  if (entry === undefined || now - entry.at > partitionsTtlMs) {
    const map = loadPartitions(pool);
    // A failed read is not remembered: the next page asks again (and this one reads the parent).
    map.catch(() => partitionMaps.delete(pool));
    partitionMaps.set(pool, (entry = { at: now, map }));
  }
  const name = await entry.map.then(
    (m) => m.get(resource),
    () => undefined,
  );
  return name === undefined ? 'records' : `"${name.replace(/"/g, '""')}"`;
}

/** The list's named statements by name, each text built the first time its name is asked for. */
const listNamedStatements = new Map<string, { name: string; text: string }>();

function namedStatement(name: string, build: () => string): { name: string; text: string } {
  let statement = listNamedStatements.get(name);
  if (statement === undefined) listNamedStatements.set(name, (statement = { name, text: build() }));
  return statement;
}

/**
 * A plain page of one stream (no filter, order, deleted records or time bound) by the stream's dense
 * positions (record-positions.ts): positions [$4, $5] (the page and one more, which tells whether more
 * follow) out of the chunk rows that hold them name the page's first and last records, whose keys
 * (ordinal, id) bound one range scan of the records' (scope, ordinal) index, the read page 1 costs.
 * One statement, so the positions and the records are of one snapshot; it answers no row at all when
 * the positions are not valid in it (or of another chunk size), else a head row with `live` (the
 * stream's live records), `expected` (how many ids the positions name for the page) and those ids (a
 * JSON array), then a row a record of the range: its id and object. Named: planned once per connection.
 *
 * A page of at most one chunk's positions (`span` 2: up to 100 records, what applications ask) joins
 * its two chunk rows and slices their arrays once (a MATERIALIZED CTE: inlined, the slices were made
 * again for every record compared); a longer page aggregates the slices of all its chunks. The rows
 * come in the range scan's order: no sort of the page's objects at the end (it was a sixth of the
 * statement's time); the caller checks them against the ids, in order.
 */
function positionedStatement(includeSourceData: boolean, table: string, span: 'two' | 'many'): { name: string; text: string } {
  return namedStatement(`mirror.list-positioned.${includeSourceData ? 's' : 'd'}.${span}.${tableTag(table)}`, () => {
    const c = positionChunk;
    const key = (alias: string) => `${alias}.account_id = $1 AND ${alias}.resource = $2 AND ${alias}.scope = $3`;
    // The last position the page holds: $5, or the list's last.
    const last = `least($5::int, s.live - 1)`;
    const positions =
      span === 'two'
        ? // Past the list's end no chunk joins: the page is empty (expected 0), not a miss.
          `SELECT a.ids[$4::int % ${c} + 1 : CASE WHEN ${last} / ${c} > $4::int / ${c} THEN ${c} ELSE ${last} % ${c} + 1 END]
                    || coalesce(b.ids[1 : ${last} % ${c} + 1], '{}') AS ids,
                  a.ordinals[$4::int % ${c} + 1] AS o1,
                  CASE WHEN b.chunk IS NULL THEN a.ordinals[${last} % ${c} + 1] ELSE b.ordinals[${last} % ${c} + 1] END AS o2
             FROM s LEFT JOIN record_position_chunks a ON ${key('a')} AND a.chunk = $4::int / ${c}
             LEFT JOIN record_position_chunks b ON ${key('b')} AND b.chunk = ${last} / ${c} AND ${last} / ${c} > $4::int / ${c}`
        : `SELECT array_agg(u.id ORDER BY c.chunk, u.n) AS ids,
                  (array_agg(u.ordinal ORDER BY c.chunk, u.n))[1] AS o1,
                  (array_agg(u.ordinal ORDER BY c.chunk DESC, u.n DESC))[1] AS o2
             FROM s, record_position_chunks c,
                  unnest(c.ids[greatest($4::int - c.chunk * ${c}, 0) + 1 : least($5::int - c.chunk * ${c}, ${c - 1}) + 1],
                         c.ordinals[greatest($4::int - c.chunk * ${c}, 0) + 1 : least($5::int - c.chunk * ${c}, ${c - 1}) + 1]) WITH ORDINALITY AS u(id, ordinal, n)
            WHERE ${key('c')} AND c.chunk BETWEEN $4::int / ${c} AND $5::int / ${c}`;
    return `
      WITH s AS MATERIALIZED (
        SELECT live FROM record_position_sets
         WHERE account_id = $1 AND resource = $2 AND scope = $3 AND valid_version = version AND chunk_size = ${c}
      ), p AS MATERIALIZED (${positions})
      -- A head row with the counts and the ids the positions name (one JSON text), then each record's
      -- id and object: the reader checks the two lists equal, in order. Checked here, a record at a
      -- time (p.ids[n] walks a text array from its start, so a page cost a hundred walks), the check
      -- was a sixth of a random page's time in Postgres.
      SELECT s.live, coalesce(cardinality(p.ids), 0) AS expected, to_json(p.ids)::text AS id, NULL::text AS j FROM s CROSS JOIN p
      UNION ALL
      -- Bounded on both sides, so whatever plan is taken, it reads the page's range and no further.
      SELECT NULL, NULL, x.id, x.j FROM s CROSS JOIN p CROSS JOIN LATERAL (
        SELECT r.id, ${objectSql(includeSourceData, 'r')}
          FROM ${table} r
         WHERE ${key('r')} AND r.deleted_at IS NULL
           AND r.ordinal BETWEEN p.o1 AND p.o2
           AND (r.ordinal > p.o1 OR r.id >= p.ids[1]) AND (r.ordinal < p.o2 OR r.id <= p.ids[cardinality(p.ids)])
         ORDER BY r.ordinal, r.id LIMIT $5::int - $4::int + 1) x`;
  });
}

/**
 * A plain page of one stream by positions the process holds (position-cache.ts): the range of the
 * records' (scope, ordinal) index between the page's first and last keys ($4, $6 and $5, $7), at most
 * $10 records, each one text (its object, U+0001, its id: one column, as page 1 reads), read only where
 * the stream's positions are still the ones held ($8, computed at $9) in the statement's own snapshot (a
 * one-time test of the set row: no row read otherwise). The range is the read page 1 costs; the caller
 * checks the ids against the positions' (CachedChunk.objectsOf).
 */
function cachedPageStatement(includeSourceData: boolean, table: string): { name: string; text: string } {
  return namedStatement(
    `mirror.list-cached.${includeSourceData ? 's' : 'd'}.${tableTag(table)}`,
    () => `SELECT ${objectText(includeSourceData, 'r')} || chr(1) || r.id AS j
                    FROM ${table} r
                   WHERE r.account_id = $1 AND r.resource = $2 AND r.scope = $3 AND r.deleted_at IS NULL
                     AND r.ordinal BETWEEN $4::bigint AND $5::bigint
                     AND (r.ordinal > $4::bigint OR r.id >= $6::text) AND (r.ordinal < $5::bigint OR r.id <= $7::text)
                     AND EXISTS (SELECT FROM record_position_sets s
                                  WHERE s.account_id = $1 AND s.resource = $2 AND s.scope = $3 AND s.chunk_size = ${positionChunk}
                                    AND s.version = $8::bigint AND s.valid_version = $8::bigint AND s.computed_at = $9::timestamptz)
                   ORDER BY r.ordinal, r.id LIMIT $10::int`,
  );
}

/** The id and ordinal at a position of held positions (undefined where the chunk is not held). */
function heldAt(set: CachedPositions, position: number): [string, string] | undefined {
  const chunk = set.chunks.get(Math.floor(position / positionChunk));
  const i = position % positionChunk;
  return chunk && i < chunk.size ? [chunk.id(i), chunk.ordinal(i)] : undefined;
}

/**
 * The page by positions the process holds, or undefined where they do not serve it: not valid (or not
 * held, nor readable), past the list's end (the statement of {@link positionedPage} answers that in one
 * snapshot), or a page whose records are not the ones they name (they are then forgotten: a pass
 * computed new ones, or a write did not mark them).
 */
async function cachedPositionsPage(pool: Pool, q: ListQuery, scope: string, table: string): Promise<{ rows: string[]; hasMore: boolean } | undefined> {
  const offset = (q.page - 1) * q.perPage;
  // Positions are int4 (as in positionedPage).
  if (offset + q.perPage >= 2 ** 31) return undefined;
  const key = { accountId: q.accountId, resource: q.resource, scope };
  const set = await positionsFor(pool, key, Math.floor(offset / positionChunk), Math.floor((offset + q.perPage) / positionChunk));
  if (set === undefined || offset >= set.live) return undefined;
  // The page and one more (whether more follow), as far as the list goes.
  const last = Math.min(offset + q.perPage, set.live - 1);
  const head = heldAt(set, offset);
  const tail = heldAt(set, last);
  if (head === undefined || tail === undefined) return undefined;
  const expected = last - offset + 1;
  const { rows } = await pool.query<[string]>({
    ...cachedPageStatement(q.includeSourceData, table),
    values: [q.accountId, q.resource, scope, head[1], tail[1], head[0], tail[0], set.version, set.computedAt, expected],
    rowMode: 'array',
  });
  // Each the record its position names, in order: a chunk's ids against the rows' at a time.
  const objects: string[] = [];
  let same = rows.length === expected;
  for (let i = 0, position = offset; same && i < rows.length;) {
    const at = position % positionChunk;
    const count = Math.min(positionChunk - at, rows.length - i);
    same = set.chunks.get(Math.floor(position / positionChunk))?.objectsOf(at, rows, i, count, objects) ?? false;
    i += count;
    position += count;
  }
  if (!same) {
    forgetPositions(pool, key);
    return undefined;
  }
  const hasMore = objects.length > q.perPage;
  if (hasMore) objects.length = q.perPage;
  return { rows: objects, hasMore };
}

/**
 * Lists read by OFFSET (filters, orders, several scopes, deleted records, later pages without valid
 * positions) are named statements too, by their text: values and field names are parameters, so one
 * text serves every filter of a shape, and a connection plans it once instead of on every request.
 * Planning the filter's expression was most of what a filtered page cost Postgres beyond the raw SQL's
 * (bench [11]). At most `maxListStatements` shapes are named (each connection keeps the plans it made);
 * others go unnamed, planned each time.
 */
const listStatements = new Map<string, string>();
const maxListStatements = 64;

function listStatement(text: string): { text: string; name?: string } {
  let name = listStatements.get(text);
  if (name === undefined && listStatements.size < maxListStatements) {
    name = `mirror.list.${createHash('sha256').update(text).digest('hex').slice(0, 16)}`;
    listStatements.set(text, name);
  }
  return name === undefined ? { text } : { text, name };
}

/**
 * The first page of a plain list of one stream: one range scan from the start of its index, no
 * positions needed (what the raw SQL of the same page does). Named: planned once per connection.
 */
function firstPageStatement(includeSourceData: boolean, table: string): { name: string; text: string } {
  return namedStatement(
    `mirror.list-first.${includeSourceData ? 's' : 'd'}.${tableTag(table)}`,
    () => `SELECT ${objectSql(includeSourceData)} FROM ${table}
                   WHERE account_id = $1 AND resource = $2 AND scope = $3 AND deleted_at IS NULL
                   ORDER BY ordinal, id LIMIT $4`,
  );
}

/**
 * The page by positions, or undefined where they do not serve it (not valid in the statement's
 * snapshot, or, as a guard against a write that did not mark them, a page whose records are not the
 * ones its positions name).
 */
async function positionedPage(pool: Pool, q: ListQuery, scope: string, table: string): Promise<{ rows: string[]; hasMore: boolean } | undefined> {
  const offset = (q.page - 1) * q.perPage;
  // Positions are int4; an offset past them is past any list the mirror holds (the OFFSET query answers it).
  if (offset + q.perPage >= 2 ** 31) return undefined;
  const span = q.perPage <= positionChunk ? 'two' : 'many';
  // Rows as arrays: the head (live, expected, the ids as JSON), then (id, object) a record; no
  // object made a row (as the first page reads).
  const { rows } = await pool.query<[number | null, number | null, string | null, string | null]>({
    ...positionedStatement(q.includeSourceData, table, span),
    values: [q.accountId, q.resource, scope, offset, offset + q.perPage],
    rowMode: 'array',
  });
  if (rows.length === 0) return undefined;
  const [live, expected, named] = rows[0]!;
  if (live === null || expected === null || rows.length !== expected + 1) return undefined;
  if (expected !== Math.max(0, Math.min(q.perPage + 1, live - offset))) return undefined;
  // No ids (past the list's end) is NULL.
  const ids = JSON.parse(named ?? '[]') as unknown[];
  const page: string[] = [];
  for (let i = 1; i < rows.length; i++) {
    const [, , id, j] = rows[i]!;
    // Each the record its position names, in the positions' order (the statement does not sort them
    // again): a guard against a write that did not mark the positions.
    if (j === null || id !== ids[i - 1]) return undefined;
    page.push(j);
  }
  const hasMore = page.length > q.perPage;
  return { rows: hasMore ? page.slice(0, q.perPage) : page, hasMore };
}

/**
 * A plain page by positions: up to a chunk's positions (what applications ask) by the ones the process
 * holds; else, or where they do not serve it, by the positions' rows in the statement.
 */
async function pageByPositions(pool: Pool, q: ListQuery, scope: string, table: string): Promise<{ rows: string[]; hasMore: boolean } | undefined> {
  return (q.perPage <= positionChunk ? await cachedPositionsPage(pool, q, scope, table) : undefined) ?? positionedPage(pool, q, scope, table);
}

/**
 * A plain page of a list across projects (`Project-Id: *`) by its positions (record-positions.ts: the
 * upstream's order across projects as its last full pass left it): the ids of positions [$3, $4] (the
 * page and one more) out of their chunk rows, and each one's record by primary key. One statement, so
 * the positions and the records are of one snapshot; no row at all where the positions are not valid in
 * it, else a head row (position -1) with the list's live records, then a row a position: its record's
 * object and scope (null where the record is not there: the positions do not hold). Named.
 */
function acrossPageStatement(includeSourceData: boolean, table: string): { name: string; text: string } {
  return namedStatement(`mirror.list-across.${includeSourceData ? 's' : 'd'}.${tableTag(table)}`, () => {
    const c = positionChunk;
    return `
      WITH s AS MATERIALIZED (
        SELECT live FROM record_position_sets
         WHERE account_id = $1 AND resource = $2 AND scope = '${allProjectsScope}' AND valid_version = version AND chunk_size = ${c}
      ), p AS MATERIALIZED (
        SELECT u.key, (c.chunk * ${c} + u.n - 1)::int AS pos
          FROM s, record_position_chunks c, unnest(c.ids) WITH ORDINALITY AS u(key, n)
         WHERE c.account_id = $1 AND c.resource = $2 AND c.scope = '${allProjectsScope}' AND c.chunk BETWEEN $3::int / ${c} AND $4::int / ${c}
      )
      SELECT -1 AS pos, s.live, NULL::text AS j, NULL::text AS scope FROM s
      UNION ALL
      SELECT p.pos, NULL, ${objectText(includeSourceData, 'r')}, r.scope
        FROM p LEFT JOIN ${table} r
          ON r.account_id = $1 AND r.resource = $2 AND r.scope = split_part(p.key, '|', 1)
         AND r.id = substr(p.key, strpos(p.key, '|') + 1) AND r.deleted_at IS NULL
       WHERE p.pos BETWEEN $3::int AND $4::int
      ORDER BY 1`;
  });
}

/** A plain page across projects by its positions, or undefined where they are not valid (or do not hold). */
async function acrossPage(pool: Pool, q: ListQuery, table: string): Promise<{ rows: string[]; scopes: string[]; hasMore: boolean } | undefined> {
  const offset = (q.page - 1) * q.perPage;
  if (offset + q.perPage >= 2 ** 31) return undefined;
  const { rows } = await pool.query<[number, number | null, string | null, string | null]>({
    ...acrossPageStatement(q.includeSourceData, table),
    values: [q.accountId, q.resource, offset, offset + q.perPage],
    rowMode: 'array',
  });
  const live = rows[0]?.[0] === -1 ? rows[0][1] : null;
  if (live === null) return undefined;
  if (rows.length - 1 !== Math.max(0, Math.min(q.perPage + 1, live - offset))) return undefined;
  const objects: string[] = [];
  const scopes: string[] = [];
  for (let i = 1; i < rows.length; i++) {
    const [, , j, scope] = rows[i]!;
    if (j === null || scope === null) return undefined;
    objects.push(j);
    scopes.push(scope);
  }
  const hasMore = objects.length > q.perPage;
  if (hasMore) {
    objects.length = q.perPage;
    scopes.length = q.perPage;
  }
  return { rows: objects, scopes, hasMore };
}

/** Whether the positions of the list across projects hold (valid), in a statement of its own. */
async function acrossOrderKnown(pool: Pool, accountId: string, resource: string): Promise<boolean> {
  const { rows } = await pool.query(
    `SELECT 1 FROM record_position_sets WHERE account_id = $1 AND resource = $2 AND scope = '${allProjectsScope}' AND valid_version = version`,
    [accountId, resource],
  );
  return rows.length > 0;
}

/**
 * A list across projects (`scopes: 'all'`) whose order the mirror cannot prove to be the upstream's: it
 * knows that order only from a full pass across projects, and only while every record holds the place
 * that pass gave it (record-positions.ts); a resource listed project by project (the source system
 * refused `*`) never has one. Such a read is the upstream's to answer.
 */
export class AcrossOrderUnknown extends Error {
  constructor(resource: string) {
    super(`the order of ${resource} across projects is not known to the mirror`);
  }
}

/** A page of a list; throws AcrossOrderUnknown for a list across projects whose order is not known. */
export async function listRecords(pool: Pool, q: ListQuery): Promise<ListResult> {
  const table = await recordsTable(pool, q.resource);
  const params: unknown[] = [q.accountId, q.resource, q.perPage + 1, (q.page - 1) * q.perPage];
  const where = ['account_id = $1', 'resource = $2'];
  if (q.scopes !== 'all' && q.scopes.length === 1) {
    // One scope as an equality: the (scope, ordinal) index then yields the list in order, and a
    // filtered page stops at its last record (with `= ANY` Postgres 15 reads and sorts every match).
    params.push(q.scopes[0]);
    where.push(`scope = $${params.length}::text`);
  } else if (q.scopes !== 'all') {
    params.push(q.scopes);
    where.push(`scope = ANY($${params.length}::text[])`);
  }
  if (!q.includeDeleted) where.push('deleted_at IS NULL');
  if (q.modifiedAfter) {
    params.push(q.modifiedAfter);
    where.push(`mirrored_at > $${params.length}`);
  }
  if (q.filters && q.filters.length > 0) {
    const f = filtersSql(q.filters, params.length + 1, q.indexed);
    params.push(...f.params);
    if (f.sql) where.push(f.sql);
  }
  // The page's keys first, then its objects by primary key: the rows skipped by OFFSET and the sort
  // carry only (scope, ordinal, id) and the sort keys, and only the page's objects are turned into
  // text (at a large offset this is several times cheaper than sorting every object's text). A plain
  // page (no order_by) is the index order of (account, resource, scope, ordinal).
  let keys = '';
  let innerOrder = '';
  let outerOrder = '';
  if (q.orderBy && q.orderBy.length > 0) {
    const o = orderSql(q.orderBy, params.length + 1);
    params.push(...o.params);
    keys = o.columns.map((c, i) => `, ${c.sql} AS k${i}`).join('');
    innerOrder = o.columns.map((c, i) => `k${i} ${c.dir}, `).join('');
    outerOrder = o.columns.map((c, i) => `p.k${i}${c.collateC ? ' COLLATE "C"' : ''} ${c.dir}, `).join('');
  }
  // A first page of one scope in the list's own order skips nothing and sorts nothing: its records
  // straight off the (scope, ordinal) index, each turned into text once, as the raw SQL would.
  const direct = q.page === 1 && q.scopes !== 'all' && q.scopes.length === 1 && !q.orderBy?.length;
  // Each row's scope is read only where the list has several (one scope's rows all carry it).
  const oneScope = q.scopes !== 'all' && q.scopes.length === 1 ? q.scopes[0]! : undefined;
  // One stream read (a single scope): its freshness as remembered (see freshnessTtlMs), else asked for.
  const cache = freshnessOf(pool);
  const now = Date.now();
  const streamOfList = q.scopes !== 'all' && q.scopes.length === 1 ? streamKey(q.accountId, q.resource, q.scopes[0]!) : undefined;
  const known = streamOfList === undefined ? undefined : cache.get(streamOfList);
  const freshness: Promise<Date | null> =
    known !== undefined && known.until > now
      ? Promise.resolve(known.at)
      : scopesLastVerifiedAt(pool, { accountId: q.accountId, resource: q.resource, scopes: q.scopes }).then(({ at }) => {
          if (streamOfList !== undefined) remember(cache, streamOfList, at, now);
          return at;
        });
  // A plain page of one stream: by its dense positions where they hold, else by OFFSET (below).
  const plain = q.scopes !== 'all' && q.scopes.length === 1 && !q.includeDeleted && !q.modifiedAfter && !q.filters?.length && !q.orderBy?.length;
  if (plain && q.page === 1) {
    const [res, at] = await Promise.all([
      pool.query<[string]>({
        ...firstPageStatement(q.includeSourceData, table),
        values: [q.accountId, q.resource, q.scopes[0], q.perPage + 1],
        rowMode: 'array',
      }),
      freshness,
    ]);
    listReadPaths.first++;
    const hasMore = res.rows.length > q.perPage;
    const rows = (hasMore ? res.rows.slice(0, q.perPage) : res.rows).map((r) => r[0]);
    return { rows, rowScopes: rows.map(() => q.scopes[0] as string), hasMore, retrievedAt: at };
  }
  if (plain) {
    const scope = q.scopes[0]!;
    const [positioned, at] = await Promise.all([pageByPositions(pool, q, scope, table), freshness]);
    if (positioned) {
      listReadPaths.positioned++;
      return { rows: positioned.rows, rowScopes: positioned.rows.map(() => scope), hasMore: positioned.hasMore, retrievedAt: at };
    }
  }
  const across = q.scopes === 'all';
  if (across && !q.includeDeleted && !q.modifiedAfter && !q.filters?.length && !q.orderBy?.length) {
    const [page, at] = await Promise.all([acrossPage(pool, q, table), freshness]);
    if (page === undefined) throw new AcrossOrderUnknown(q.resource);
    listReadPaths.positioned++;
    return { rows: page.rows, rowScopes: page.scopes, hasMore: page.hasMore, retrievedAt: at };
  }
  // Across projects, the upstream's order is the records' ordinals (its last full pass wrote them in the
  // order it listed them across projects), read only while its positions say every record holds its place.
  const own = across ? 'ordinal, scope, id' : 'scope, ordinal, id';
  const ownOf = (alias: string) => own.replace(/(\w+)/g, `${alias}.$1`);
  if (across)
    where.push(
      `EXISTS (SELECT FROM record_position_sets s WHERE s.account_id = $1 AND s.resource = $2 AND s.scope = '${allProjectsScope}' AND s.valid_version = s.version)`,
    );
  listReadPaths.offset++;
  const sql = direct
    ? `SELECT ${objectSql(q.includeSourceData)} FROM ${table} WHERE ${where.join(' AND ')} ORDER BY scope, ordinal, id LIMIT $3 OFFSET $4`
    : `SELECT ${objectSql(q.includeSourceData, 'r')}${oneScope === undefined ? ', r.scope' : ''}
                 FROM (SELECT scope, ordinal, id${keys} FROM ${table} WHERE ${where.join(' AND ')}
                        ORDER BY ${innerOrder}${own} LIMIT $3 OFFSET $4) p
                 JOIN ${table} r ON r.account_id = $1 AND r.resource = $2 AND r.scope = p.scope AND r.id = p.id
                ORDER BY ${outerOrder}${ownOf('p')}`;
  // Rows as arrays ([object] or [object, scope]): no object made a row.
  const [res, retrievedAt] = await Promise.all([pool.query<[string, string?]>({ ...listStatement(sql), values: params, rowMode: 'array' }), freshness]);
  // No row across projects: an empty page, or an order not known (the test above held for no row).
  if (across && res.rows.length === 0 && !(await acrossOrderKnown(pool, q.accountId, q.resource))) throw new AcrossOrderUnknown(q.resource);
  const hasMore = res.rows.length > q.perPage;
  const page = hasMore ? res.rows.slice(0, q.perPage) : res.rows;
  return { rows: page.map((r) => r[0]), rowScopes: page.map((r) => oneScope ?? r[1]!), hasMore, retrievedAt };
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

const later = (a: Date | null | undefined, b: Date | null | undefined): Date | null => (!a ? (b ?? null) : !b || a >= b ? a : b);

export async function getRecord(pool: Pool, q: GetQuery): Promise<GetResult | undefined> {
  const params: unknown[] = [q.accountId, q.resource, q.id];
  // One scope (every request but `Project-Id: *`): an equality on the key's scope column.
  const single = q.scopes !== 'all' && q.scopes.length === 1;
  if (q.scopes !== 'all') params.push(single ? q.scopes[0] : q.scopes);
  const cache = freshnessOf(pool);
  const now = Date.now();
  const known = single ? cache.get(streamKey(q.accountId, q.resource, q.scopes[0] as string)) : undefined;
  const lean = known !== undefined && known.until > now;
  // A named statement: parsed and planned once per connection (8 variants at most), its text built once.
  const name = `mirror.get.${q.includeSourceData ? 's' : 'd'}${q.bySourceId ? 's' : 'i'}${single ? '1' : q.scopes === 'all' ? 'a' : 'n'}`;
  let statement = getStatements.get(name);
  if (statement === undefined) {
    const text = `SELECT ${objectSql(q.includeSourceData, 'r')}, r.scope, r.mirrored_at AS m
              FROM records r
             WHERE r.account_id = $1 AND r.resource = $2 AND ${q.bySourceId ? 'r.source_id' : 'r.id'} = $3
               AND r.deleted_at IS NULL ${single ? 'AND r.scope = $4' : q.scopes === 'all' ? '' : 'AND r.scope = ANY($4::text[])'}
             ${single ? '' : 'ORDER BY r.scope '}LIMIT 1`;
    statement = { name, text };
    getStatements.set(name, statement);
  }
  // The stream's verification, as remembered, else asked beside the record (one scope) or after it.
  const verified = (scope: string) =>
    scopeLastVerifiedAt(pool, { accountId: q.accountId, resource: q.resource, scope }).then((at) => {
      remember(cache, streamKey(q.accountId, q.resource, scope), at, now);
      return at;
    });
  const alongside = lean ? Promise.resolve(known.at) : single ? verified(q.scopes[0] as string) : undefined;
  // Not awaited when no record is found: its failure is the query's to report, not an unhandled rejection.
  alongside?.catch(() => undefined);
  const { rows } = await pool.query<{ j: string; scope: string; m: Date }>(statement, params);
  const row = rows[0];
  if (!row) return undefined;
  const at = await (alongside ?? verified(row.scope));
  return { json: row.j, scope: row.scope, retrievedAt: later(at, row.m) };
}

/**
 * Streams known synced, per process, for at most `freshnessTtlMs` (only a yes is remembered: a stream
 * once synced stays so unless its account is purged): a list page is then one query, as the raw
 * baseline's is (the lookup was a second round trip on every page: page 1 ran at 0.49x the baseline).
 * Keyed by the account, resource and scopes, so no account ever sees another's answer.
 */
const syncedScopes = new WeakMap<Pool, Map<string, number>>();

/** Whether any pass of these streams has completed (a scope never synced is served from the upstream). */
export async function scopeSynced(pool: Pool, accountId: string, resource: string, scopes: readonly string[] | 'all'): Promise<boolean> {
  let known = syncedScopes.get(pool);
  if (!known) syncedScopes.set(pool, (known = new Map<string, number>()));
  const key = `${accountId}\u0000${resource}\u0000${scopes === 'all' ? '*all*' : JSON.stringify(scopes)}`;
  const now = Date.now();
  if ((known.get(key) ?? 0) > now) return true;
  const synced = await syncedNow(pool, accountId, resource, scopes);
  if (synced) {
    if (known.size >= 10_000) known.clear();
    known.set(key, now + freshnessTtlMs);
  }
  return synced;
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
