// Each way of reading a list page (mirror/reads/list-strategies.ts), on its own, against the real
// Postgres: what it answers where it serves the page, and that it declines (undefined, or the error a
// list across projects gets) where it does not, so the reader falls back. Pages are compared with the
// upstream's order as the records hold it (ordinal, then id).
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { createPool, type Pool } from '../../mirror/db/pool.ts';
import {
  AcrossOrderUnknown,
  acrossPage,
  cachedPositionsPage,
  firstPage,
  offsetPage,
  pageByPositions,
  positionedPage,
  type ListContext,
  type ListQuery,
} from '../../mirror/reads/list-strategies.ts';
import { PartitionTables } from '../../mirror/reads/partition-tables.ts';
import { PositionCache } from '../../mirror/reads/position-cache.ts';
import { CompiledFilters } from '../../mirror/reads/record-filters.ts';
import { ReadStatements } from '../../mirror/reads/read-statements.ts';
import { finishPass } from '../../mirror/records/finish-pass.ts';
import { applyObjects } from '../../mirror/records/object-writes.ts';
import { writePage } from '../../mirror/records/page-write.ts';
import { beginOrResumePass, type StreamKey } from '../../mirror/streams/streams.ts';
import { createTestDatabase, insertBareAccount, type TestDatabase } from '../helpers/database.ts';

describe('list strategies', () => {
  let db: TestDatabase;
  let pool: Pool;

  before(async () => {
    db = await createTestDatabase('mirror_list_strategies');
    pool = createPool(db.url);
  });
  after(async () => {
    await pool?.end();
    await db?.drop();
  });

  /** A context of its own (nothing held, no statement built), reading the resource's table. */
  const context = async (resource = 'customers'): Promise<ListContext> => ({
    pool,
    statements: new ReadStatements(),
    positions: new PositionCache(pool),
    filters: new CompiledFilters(),
    table: await new PartitionTables(pool).tableOf(resource),
  });

  const query = (key: StreamKey, page: number, perPage: number, more: Partial<ListQuery> = {}): ListQuery => ({
    accountId: key.accountId,
    resource: key.resource,
    scopes: [key.scope],
    page,
    perPage,
    includeSourceData: false,
    ...more,
  });

  const customers = (from: number, n: number) =>
    Array.from({ length: n }, (_, i) => ({ id: `c${String(from + i).padStart(5, '0')}`, name: `customer ${from + i}`, source_data: { n: from + i } }));

  /** A stream of 250 customers from a finished full pass (positions valid), listed in pages of 100 in an order that is not the ids'. */
  async function stream(): Promise<{ key: StreamKey; order: string[] }> {
    const key = { accountId: await insertBareAccount(pool), resource: 'customers', scope: '' };
    const pages = [customers(200, 100), customers(0, 100), customers(100, 50)];
    const p = await beginOrResumePass(pool, key, { passKey: 'one', mode: 'full', perPage: 100 });
    for (const [i, items] of pages.entries()) {
      await writePage(pool, {
        key,
        pass: p,
        records: { items },
        ordinalBase: i * 100,
        seen: { page: i + 1, perPage: 100, digest: null, hasMore: i + 1 < pages.length },
        checkpoint: { ...p.checkpoint, page: i + 2 },
      });
    }
    const { rows } = await pool.query<{ checkpoint: Parameters<typeof finishPass>[3] }>('SELECT checkpoint FROM streams WHERE id = $1', [p.streamId]);
    await finishPass(pool, key, p, rows[0]!.checkpoint);
    return { key, order: pages.flat().map((c) => c.id) };
  }

  const ids = (page: { rows: string[] } | undefined) => page?.rows.map((j) => (JSON.parse(j) as { id: string }).id);

  it('first page: the list from the start of its index, with no positions needed', async () => {
    const { key, order } = await stream();
    const ctx = await context();
    const page = await firstPage(ctx, query(key, 1, 100), '');
    assert.deepEqual([ids(page), page.hasMore, new Set(page.rowScopes)], [order.slice(0, 100), true, new Set([''])]);
    // Its positions out of date changes nothing for it.
    await applyObjects(pool, key, [{ id: 'c00210', name: 'renamed' }]);
    const again = await firstPage(ctx, query(key, 1, 300), '');
    assert.deepEqual([ids(again), again.hasMore], [order, false]);
  });

  it('positions in Postgres: any page while they are valid, none once a write marked them out of date', async () => {
    const { key, order } = await stream();
    const ctx = await context();
    for (const [page, perPage] of [
      [2, 100],
      [3, 100],
      [2, 120],
      [1, 1000],
    ] as const) {
      const got = await positionedPage(ctx, query(key, page, perPage), '');
      assert.deepEqual([ids(got), got?.hasMore], [order.slice((page - 1) * perPage, page * perPage), page * perPage < order.length], `${page} of ${perPage}`);
    }
    // Past the list's end: an empty page, not a miss.
    assert.deepEqual(await positionedPage(ctx, query(key, 4, 100), ''), { rows: [], rowScopes: [], hasMore: false });
    await applyObjects(pool, key, [{ id: 'c00210', name: 'renamed' }]);
    assert.equal(await positionedPage(ctx, query(key, 2, 100), ''), undefined);
  });

  it('positions the process holds: a page by its records alone, and forgotten where the records are not the ones they name', async () => {
    const { key, order } = await stream();
    const ctx = await context();
    const page2 = await cachedPositionsPage(ctx, query(key, 2, 100), '');
    assert.deepEqual([ids(page2), page2?.hasMore], [order.slice(100, 200), true]);
    await ctx.positions.settled();
    // A page past the list's end is the statement's to answer (one snapshot), not the held positions'.
    assert.equal(await cachedPositionsPage(ctx, query(key, 4, 100), ''), undefined);
    // A delete that bypasses the mirror's writers (as a purge does): the held positions no longer
    // name the page's records, so they are not used, and are forgotten.
    await pool.query(`DELETE FROM records WHERE account_id = $1 AND id = $2`, [key.accountId, order[150]]);
    assert.equal(await cachedPositionsPage(ctx, query(key, 2, 100), ''), undefined);
    // The positions in Postgres are checked against the records too; OFFSET then serves the page.
    assert.equal(await pageByPositions(ctx, query(key, 2, 100), ''), undefined);
    const byOffset = await offsetPage(ctx, query(key, 2, 100));
    assert.deepEqual(ids(byOffset), [...order.slice(100, 150), ...order.slice(151, 201)]);
  });

  it('OFFSET: filters, orders, deleted records and several scopes, in the list order after its own keys', async () => {
    const { key, order } = await stream();
    const ctx = await context();
    const filtered = await offsetPage(ctx, query(key, 1, 10, { filters: [{ field: 'source_data.n', operator: '>=', value: 240 }] }));
    assert.deepEqual([ids(filtered), filtered.hasMore], [order.filter((id) => Number(id.slice(1)) >= 240).slice(0, 10), true]);
    const ordered = await offsetPage(ctx, query(key, 2, 5, { orderBy: [{ field: 'name', dir: 'DESC' }] }));
    const name = (id: string) => `customer ${Number(id.slice(1))}`;
    const byNameDesc = [...order].sort((a, b) => (name(a) < name(b) ? 1 : name(a) > name(b) ? -1 : 0));
    assert.deepEqual(ids(ordered), byNameDesc.slice(5, 10));
    const several = await offsetPage(ctx, query(key, 1, 3, { scopes: ['', 'project=none'] }));
    assert.deepEqual([ids(several), several.rowScopes], [order.slice(0, 3), ['', '', '']]);
  });

  it('across projects: no page by positions that do not exist, and OFFSET says the order is not known', async () => {
    const { key } = await stream();
    const ctx = await context();
    assert.equal(await acrossPage(ctx, query(key, 1, 100, { scopes: 'all' })), undefined);
    await assert.rejects(offsetPage(ctx, query(key, 1, 100, { scopes: 'all', orderBy: [{ field: 'name', dir: 'ASC' }] })), AcrossOrderUnknown);
  });
});
