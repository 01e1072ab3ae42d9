// The ways a list page is read, each a unit of its own: a plain list's first page from the start of its
// index; a plain list's other pages by the stream's dense positions (those the process holds, else
// those in Postgres); a plain list across projects by its positions; and every other page by OFFSET.
// `listStrategy` says which a query takes; the reader (records-read.ts) runs it.
import type { Pool } from '../db/pool.ts';
import { allProjectsScope } from '../../lib/resources.ts';
import { orderSql, type CompiledFilters, type RecordFilter, type RecordOrder } from './record-filters.ts';
import type { CachedPositions, PositionCache } from './position-cache.ts';
import { positionChunk } from './record-positions.ts';
import { objectSql, type ReadStatements } from './read-statements.ts';

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

/** A page as a strategy reads it. */
export interface ListPage {
  /** Each row's JSON text. */
  rows: string[];
  /** Each row's scope (same order as `rows`). */
  rowScopes: string[];
  hasMore: boolean;
}

/** What a strategy reads with: the reader's pool, statements, held positions and compiled filters, and the list's table. */
export interface ListContext {
  pool: Pool;
  statements: ReadStatements;
  positions: PositionCache;
  filters: CompiledFilters;
  /** The table the list reads (partition-tables.ts). */
  table: string;
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

/**
 * How a page is read: `first` (a plain list's first page of one stream), `positions` (a plain list's
 * later page of one stream, by OFFSET where its positions do not serve it), `across` (a plain list
 * across projects: by its positions or not at all), `offset` (every other list). Plain: no filter,
 * order, deleted records or time bound.
 */
type ListStrategy = 'first' | 'positions' | 'across' | 'offset';

export function listStrategy(q: ListQuery): ListStrategy {
  const plain = !q.includeDeleted && !q.modifiedAfter && !q.filters?.length && !q.orderBy?.length;
  if (!plain) return 'offset';
  if (q.scopes === 'all') return 'across';
  if (q.scopes.length !== 1) return 'offset';
  return q.page === 1 ? 'first' : 'positions';
}

/** The one scope of a list (undefined for several, or all). */
const oneScopeOf = (q: ListQuery): string | undefined => (q.scopes !== 'all' && q.scopes.length === 1 ? q.scopes[0] : undefined);

/** Positions are int4: a page past them is past any list the mirror holds (the OFFSET query answers it). */
const pastPositions = (offset: number, perPage: number) => offset + perPage >= 2 ** 31;

/** The first page of a plain list of one stream, straight off its index (the raw SQL's read). */
export async function firstPage(ctx: ListContext, q: ListQuery, scope: string): Promise<ListPage> {
  const res = await ctx.pool.query<[string]>({
    ...ctx.statements.firstPage(q.includeSourceData, ctx.table),
    values: [q.accountId, q.resource, scope, q.perPage + 1],
    rowMode: 'array',
  });
  const hasMore = res.rows.length > q.perPage;
  const rows = (hasMore ? res.rows.slice(0, q.perPage) : res.rows).map((r) => r[0]);
  return { rows, rowScopes: rows.map(() => scope), hasMore };
}

/**
 * A plain page by positions: up to a chunk's positions (what applications ask) by the ones the process
 * holds; else, or where they do not serve it, by the positions' rows in the statement. Undefined where
 * neither serves it (the OFFSET query then does).
 */
export async function pageByPositions(ctx: ListContext, q: ListQuery, scope: string): Promise<ListPage | undefined> {
  return (q.perPage <= positionChunk ? await cachedPositionsPage(ctx, q, scope) : undefined) ?? positionedPage(ctx, q, scope);
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
export async function cachedPositionsPage(ctx: ListContext, q: ListQuery, scope: string): Promise<ListPage | undefined> {
  const offset = (q.page - 1) * q.perPage;
  if (pastPositions(offset, q.perPage)) return undefined;
  const key = { accountId: q.accountId, resource: q.resource, scope };
  const set = await ctx.positions.positionsFor(key, Math.floor(offset / positionChunk), Math.floor((offset + q.perPage) / positionChunk));
  if (set === undefined || offset >= set.live) return undefined;
  // The page and one more (whether more follow), as far as the list goes.
  const last = Math.min(offset + q.perPage, set.live - 1);
  const head = heldAt(set, offset);
  const tail = heldAt(set, last);
  if (head === undefined || tail === undefined) return undefined;
  const expected = last - offset + 1;
  const { rows } = await ctx.pool.query<[string]>({
    ...ctx.statements.cachedPage(q.includeSourceData, ctx.table),
    values: [q.accountId, q.resource, scope, head[1], tail[1], head[0], tail[0], set.version, set.computedAt, expected],
    rowMode: 'array',
  });
  const objects = rows.length === expected ? heldObjects(set, offset, rows) : undefined;
  if (objects === undefined) {
    ctx.positions.forget(key);
    return undefined;
  }
  const hasMore = objects.length > q.perPage;
  if (hasMore) objects.length = q.perPage;
  return { rows: objects, rowScopes: objects.map(() => scope), hasMore };
}

/** The rows' objects where each is the record its held position names, in order (a chunk's ids at a time); else undefined. */
function heldObjects(set: CachedPositions, offset: number, rows: readonly (readonly [string])[]): string[] | undefined {
  const objects: string[] = [];
  for (let i = 0, position = offset; i < rows.length;) {
    const at = position % positionChunk;
    const count = Math.min(positionChunk - at, rows.length - i);
    if (!(set.chunks.get(Math.floor(position / positionChunk))?.objectsOf(at, rows, i, count, objects) ?? false)) return undefined;
    i += count;
    position += count;
  }
  return objects;
}

/**
 * The page by the positions' rows in Postgres, or undefined where they do not serve it (not valid in
 * the statement's snapshot, or, as a guard against a write that did not mark them, a page whose records
 * are not the ones its positions name).
 */
export async function positionedPage(ctx: ListContext, q: ListQuery, scope: string): Promise<ListPage | undefined> {
  const offset = (q.page - 1) * q.perPage;
  if (pastPositions(offset, q.perPage)) return undefined;
  const span = q.perPage <= positionChunk ? 'two' : 'many';
  // Rows as arrays: the head (live, expected, the ids as JSON), then (id, object) a record; no
  // object made a row (as the first page reads).
  const { rows } = await ctx.pool.query<[number | null, number | null, string | null, string | null]>({
    ...ctx.statements.positioned(q.includeSourceData, ctx.table, span),
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
  const kept = hasMore ? page.slice(0, q.perPage) : page;
  return { rows: kept, rowScopes: kept.map(() => scope), hasMore };
}

/** A plain page across projects by its positions, or undefined where they are not valid (or do not hold). */
export async function acrossPage(ctx: ListContext, q: ListQuery): Promise<ListPage | undefined> {
  const offset = (q.page - 1) * q.perPage;
  if (pastPositions(offset, q.perPage)) return undefined;
  const { rows } = await ctx.pool.query<[number, number | null, string | null, string | null]>({
    ...ctx.statements.acrossPage(q.includeSourceData, ctx.table),
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
  return { rows: objects, rowScopes: scopes, hasMore };
}

/** The WHERE of a page read by OFFSET, its parameters from $5 on ($1-$4: account, resource, limit, offset). */
function offsetWhere(ctx: ListContext, q: ListQuery): { where: string[]; params: unknown[] } {
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
    const f = ctx.filters.sql(q.filters, params.length + 1, q.indexed);
    params.push(...f.params);
    if (f.sql) where.push(f.sql);
  }
  // Across projects, the upstream's order is the records' ordinals (its last full pass wrote them in the
  // order it listed them across projects), read only while its positions say every record holds its place.
  if (q.scopes === 'all')
    where.push(
      `EXISTS (SELECT FROM record_position_sets s WHERE s.account_id = $1 AND s.resource = $2 AND s.scope = '${allProjectsScope}' AND s.valid_version = s.version)`,
    );
  return { where, params };
}

/**
 * The statement of a page read by OFFSET. The page's keys first, then its objects by primary key: the
 * rows skipped by OFFSET and the sort carry only (scope, ordinal, id) and the sort keys, and only the
 * page's objects are turned into text (at a large offset this is several times cheaper than sorting
 * every object's text). A plain page (no order_by) is the index order of (account, resource, scope,
 * ordinal). A first page of one scope in the list's own order skips nothing and sorts nothing: its
 * records straight off the (scope, ordinal) index, each turned into text once, as the raw SQL would.
 */
function offsetSql(ctx: ListContext, q: ListQuery, where: readonly string[], params: unknown[]): string {
  const oneScope = oneScopeOf(q);
  if (q.page === 1 && oneScope !== undefined && !q.orderBy?.length)
    return `SELECT ${objectSql(q.includeSourceData)} FROM ${ctx.table} WHERE ${where.join(' AND ')} ORDER BY scope, ordinal, id LIMIT $3 OFFSET $4`;
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
  const own = q.scopes === 'all' ? 'ordinal, scope, id' : 'scope, ordinal, id';
  const ownOf = (alias: string) => own.replace(/(\w+)/g, `${alias}.$1`);
  // Each row's scope is read only where the list has several (one scope's rows all carry it).
  return `SELECT ${objectSql(q.includeSourceData, 'r')}${oneScope === undefined ? ', r.scope' : ''}
                 FROM (SELECT scope, ordinal, id${keys} FROM ${ctx.table} WHERE ${where.join(' AND ')}
                        ORDER BY ${innerOrder}${own} LIMIT $3 OFFSET $4) p
                 JOIN ${ctx.table} r ON r.account_id = $1 AND r.resource = $2 AND r.scope = p.scope AND r.id = p.id
                ORDER BY ${outerOrder}${ownOf('p')}`;
}

/**
 * A page by OFFSET: any list (filters, orders, several scopes, deleted records, a time bound). Across
 * projects it throws AcrossOrderUnknown where the order is not known (no row, and no valid positions).
 */
export async function offsetPage(ctx: ListContext, q: ListQuery): Promise<ListPage> {
  const { where, params } = offsetWhere(ctx, q);
  const sql = offsetSql(ctx, q, where, params);
  // Rows as arrays ([object] or [object, scope]): no object made a row.
  const res = await ctx.pool.query<[string, string?]>({ ...ctx.statements.list(sql), values: params, rowMode: 'array' });
  // No row across projects: an empty page, or an order not known (the test above held for no row).
  if (q.scopes === 'all' && res.rows.length === 0 && !(await acrossOrderKnown(ctx.pool, q.accountId, q.resource))) throw new AcrossOrderUnknown(q.resource);
  const oneScope = oneScopeOf(q);
  const hasMore = res.rows.length > q.perPage;
  const page = hasMore ? res.rows.slice(0, q.perPage) : res.rows;
  return { rows: page.map((r) => r[0]), rowScopes: page.map((r) => oneScope ?? r[1]!), hasMore };
}

/** Whether the positions of the list across projects hold (valid), in a statement of its own. */
async function acrossOrderKnown(pool: Pool, accountId: string, resource: string): Promise<boolean> {
  const { rows } = await pool.query(
    `SELECT 1 FROM record_position_sets WHERE account_id = $1 AND resource = $2 AND scope = '${allProjectsScope}' AND valid_version = version`,
    [accountId, resource],
  );
  return rows.length > 0;
}
