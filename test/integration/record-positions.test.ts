// Dense positions per stream: once a pass finishes, every plain page of a list is read by
// position (a range, not an OFFSET) and is byte for byte the page the OFFSET query serves, at every page
// size; any write that changes the stream's records (a pass's page, an event, a delete) makes readers
// fall back to OFFSET until the next pass finishes, and they stay correct meanwhile. `reader.readPaths`
// says which way each page was read.
import assert from 'node:assert/strict';
import { randomBytes, randomUUID } from 'node:crypto';
import { after, before, describe, it } from 'node:test';
import { createPool, type Pool } from '../../mirror/db/pool.ts';
import type { ListQuery } from '../../mirror/reads/list-strategies.ts';
import { RecordReader } from '../../mirror/reads/records-read.ts';
import { markDeleted } from '../../mirror/records/deletes.ts';
import { finishPass } from '../../mirror/records/finish-pass.ts';
import { applyObjects } from '../../mirror/records/object-writes.ts';
import { writePage } from '../../mirror/records/page-write.ts';
import { beginOrResumePass, type StreamKey } from '../../mirror/streams/streams.ts';
import { createTestDatabase, type TestDatabase } from '../helpers/database.ts';

describe('list pages by dense positions', () => {
  let db: TestDatabase;
  let pool: Pool;
  let reader: RecordReader;

  before(async () => {
    db = await createTestDatabase('mirror_positions');
    pool = createPool(db.url);
    reader = new RecordReader(pool);
  });
  after(async () => {
    await pool?.end();
    await db?.drop();
  });

  async function account(): Promise<StreamKey> {
    const accountId = randomUUID();
    await pool.query(
      `INSERT INTO linked_accounts (id, reference_id, source_system, source_system_name, token_ciphertext, token_hash, updated_at)
       VALUES ($1, 'ref', 'fieldops', 'FieldOps', '\\x00', $2, now())`,
      [accountId, randomBytes(32).toString('hex')],
    );
    return { accountId, resource: 'customers', scope: '' };
  }

  const query = (key: StreamKey, page: number, perPage: number, includeSourceData = false): ListQuery => ({
    accountId: key.accountId,
    resource: key.resource,
    scopes: [key.scope],
    page,
    perPage,
    includeSourceData,
  });

  /** Every page of the list as served (each page's JSON and has_more), and how many were read by position. */
  async function readAll(
    key: StreamKey,
    perPage: number,
    includeSourceData = false,
  ): Promise<{ pages: string[]; first: number; positioned: number; offset: number }> {
    const before = { ...reader.readPaths };
    const pages: string[] = [];
    for (let page = 1; ; page++) {
      const r = await reader.listRecords(query(key, page, perPage, includeSourceData));
      pages.push(`${JSON.stringify(r.rows)} ${r.hasMore}`);
      if (!r.hasMore) break;
    }
    // One page past the end: empty, either way.
    const past = await reader.listRecords(query(key, pages.length + 1, perPage, includeSourceData));
    assert.deepEqual([past.rows, past.hasMore], [[], false]);
    return {
      pages,
      first: reader.readPaths.first - before.first,
      positioned: reader.readPaths.positioned - before.positioned,
      offset: reader.readPaths.offset - before.offset,
    };
  }

  /** The same pages by OFFSET: the positions marked out of date for the read, then as they were. */
  async function readAllByOffset(key: StreamKey, perPage: number, includeSourceData = false): Promise<string[]> {
    const { rows } = await pool.query<{ valid_version: string | null }>(
      `SELECT valid_version FROM record_position_sets WHERE account_id = $1 AND resource = $2 AND scope = $3`,
      [key.accountId, key.resource, key.scope],
    );
    await pool.query(`UPDATE record_position_sets SET valid_version = NULL WHERE account_id = $1 AND resource = $2 AND scope = $3`, [
      key.accountId,
      key.resource,
      key.scope,
    ]);
    try {
      const r = await readAll(key, perPage, includeSourceData);
      assert.equal(r.positioned, 0);
      return r.pages;
    } finally {
      await pool.query(`UPDATE record_position_sets SET valid_version = $4 WHERE account_id = $1 AND resource = $2 AND scope = $3`, [
        key.accountId,
        key.resource,
        key.scope,
        rows[0]?.valid_version ?? null,
      ]);
    }
  }

  async function upstreamOrder(key: StreamKey): Promise<string[]> {
    const { rows } = await pool.query<{ id: string }>(
      `SELECT id FROM records WHERE account_id = $1 AND resource = $2 AND scope = $3 AND deleted_at IS NULL ORDER BY ordinal, id`,
      [key.accountId, key.resource, key.scope],
    );
    return rows.map((r) => r.id);
  }

  const ids = (pages: string[]) =>
    pages.flatMap((p) => (JSON.parse(p.slice(0, p.lastIndexOf(' '))) as string[]).map((j) => (JSON.parse(j) as { id: string }).id));

  const customers = (from: number, n: number) =>
    Array.from({ length: n }, (_, i) => ({ id: `c${String(from + i).padStart(5, '0')}`, name: `customer ${from + i}`, source_data: { n: from + i } }));

  /** A full pass of `pages` (each a page of objects, in order), finished. */
  async function fullPass(key: StreamKey, passKey: string, pages: Record<string, unknown>[][], perPage: number): Promise<void> {
    const p = await beginOrResumePass(pool, key, { passKey, mode: 'full', perPage });
    for (const [i, items] of pages.entries()) {
      await writePage(pool, {
        key,
        pass: p,
        records: { items },
        ordinalBase: i * perPage,
        seen: { page: i + 1, perPage, digest: null, hasMore: i + 1 < pages.length },
        checkpoint: { ...p.checkpoint, page: i + 2 },
      });
    }
    const { rows } = await pool.query<{ checkpoint: Parameters<typeof finishPass>[3] }>('SELECT checkpoint FROM streams WHERE id = $1', [p.streamId]);
    await finishPass(pool, key, p, rows[0]!.checkpoint);
  }

  it('serves every page by position after a pass, byte for byte the OFFSET pages, at every page size', async () => {
    const key = await account();
    // 1,234 records over pages of 300, with ties (the second page's ordinals overlap the first's) so
    // the order falls back to the id.
    const pages = [customers(2000, 300), customers(1000, 300), customers(3000, 300), customers(500, 300), customers(9000, 34)];
    const p = await beginOrResumePass(pool, key, { passKey: 'one', mode: 'full', perPage: 300 });
    for (const [i, items] of pages.entries()) {
      const ordinalBase = i === 1 ? 150 : i * 300;
      await writePage(pool, {
        key,
        pass: p,
        records: { items },
        ordinalBase,
        seen: { page: i + 1, perPage: 300, digest: null, hasMore: i < 4 },
        checkpoint: { ...p.checkpoint, page: i + 2 },
      });
    }
    const { rows } = await pool.query<{ checkpoint: Parameters<typeof finishPass>[3] }>('SELECT checkpoint FROM streams WHERE id = $1', [p.streamId]);
    await finishPass(pool, key, p, rows[0]!.checkpoint);

    const expected = await upstreamOrder(key);
    assert.equal(expected.length, 1234);
    for (const perPage of [1, 7, 100, 499, 500, 501, 1000]) {
      const byPosition = await readAll(key, perPage);
      assert.equal(byPosition.offset, 0, `per_page=${perPage}: every page by position`);
      assert.equal(byPosition.first, 1, `per_page=${perPage}: the first page from the start of the index`);
      assert.equal(byPosition.positioned, byPosition.pages.length);
      assert.deepEqual(ids(byPosition.pages), expected, `per_page=${perPage}`);
      assert.deepEqual(byPosition.pages, await readAllByOffset(key, perPage), `per_page=${perPage}: the same bytes as OFFSET`);
    }
    const withSource = await readAll(key, 100, true);
    assert.equal(withSource.offset, 0);
    assert.deepEqual(withSource.pages, await readAllByOffset(key, 100, true), 'with source data');
  });

  it('reads a page at any offset as one range of the records index, not a lookup per record', async () => {
    const key = await account();
    await fullPass(key, 'one', [customers(0, 500), customers(500, 500), customers(1000, 200)], 500);
    const expected = await upstreamOrder(key);
    // Statistics, as autovacuum would have gathered them (without any, the planner takes 1,200 rows for none).
    await pool.query('ANALYZE records');
    // The statement's index scans and the records they fetched, from this backend's counters
    // (pg_stat_xact_*: what it counted since it last reported them, never inside a transaction).
    const client = await pool.connect();
    const onClient = new RecordReader(client as unknown as Pool);
    const counts = async () =>
      (
        await client.query<{ scans: number; fetched: number; toast: number }>(
          `SELECT coalesce(sum(idx_scan), 0)::int AS scans, coalesce(sum(idx_tup_fetch), 0)::int AS fetched,
                  (SELECT coalesce(sum(idx_scan), 0)::int FROM pg_stat_xact_all_tables
                    WHERE relid = (SELECT reltoastrelid FROM pg_class WHERE relname = 'record_position_chunks')) AS toast
             FROM pg_stat_xact_user_tables WHERE starts_with(relname, 'records')`,
        )
      ).rows[0]!;
    try {
      for (const [page, perPage] of [
        [7, 100],
        [5, 120],
        [2, 1000],
      ] as const) {
        await client.query('BEGIN');
        const before = { ...onClient.readPaths };
        const s0 = await counts();
        const r = await onClient.listRecords(query(key, page, perPage));
        const s1 = await counts();
        assert.equal(onClient.readPaths.positioned - before.positioned, 1);
        assert.deepEqual(
          r.rows.map((j) => (JSON.parse(j) as { id: string }).id),
          expected.slice((page - 1) * perPage, page * perPage),
        );
        // The first and last records' keys from the chunks, then one range: not one lookup per record
        // of the page, nor a scan of the rest of the list.
        assert.ok(s1.scans - s0.scans <= 1, `page ${page} of ${perPage}: ${s1.scans - s0.scans} scans of the records' indexes`);
        assert.ok(s1.fetched - s0.fetched <= r.rows.length + 4, `page ${page} of ${perPage}: ${s1.fetched - s0.fetched} records fetched`);
        // The positions are read from the chunk rows themselves: nothing out of line (500 ids to a row
        // were stored in TOAST, ~20 kB a chunk for uuids, read again for every page).
        assert.equal(s1.toast - s0.toast, 0, `page ${page} of ${perPage}: positions read from TOAST`);
        await client.query('ROLLBACK');
      }
    } finally {
      await client.query('ROLLBACK');
      client.release();
    }
  });

  it('keeps the positions it read: a page read again, or the next one, reads no position row, and new positions replace them', async () => {
    const key = await account();
    await fullPass(key, 'one', [customers(0, 500), customers(500, 500), customers(1000, 200)], 500);
    await pool.query('ANALYZE records');
    // One connection, so the counts are this backend's (pg_stat_xact_*, a transaction a page), and
    // its own pool as far as the positions the process holds go: nothing read before this test.
    const client = await pool.connect();
    const conn = new RecordReader(client as unknown as Pool);
    const counts = async () =>
      (
        await client.query<{ chunks: number; scans: number }>(
          `SELECT (SELECT coalesce(sum(idx_tup_fetch + seq_tup_read), 0)::int FROM pg_stat_xact_user_tables WHERE relname = 'record_position_chunks') AS chunks,
                  (SELECT coalesce(sum(idx_scan), 0)::int FROM pg_stat_xact_user_tables WHERE starts_with(relname, 'records')) AS scans`,
        )
      ).rows[0]!;
    const page = async (n: number) => {
      await client.query('BEGIN');
      const before = { ...conn.readPaths };
      const s0 = await counts();
      const r = await conn.listRecords(query(key, n, 100));
      const s1 = await counts();
      await client.query('ROLLBACK');
      assert.equal(conn.readPaths.positioned - before.positioned, n === 1 ? 0 : 1, `page ${n} by position`);
      return { ids: r.rows.map((j) => (JSON.parse(j) as { id: string }).id), hasMore: r.hasMore, chunks: s1.chunks - s0.chunks, scans: s1.scans - s0.scans };
    };
    try {
      let expected = await upstreamOrder(key);
      // The page's own chunks and the ones after it, then (behind the page, on the same connection here)
      // the rest of the set.
      const first = await page(7);
      assert.deepEqual(first.ids, expected.slice(600, 700));
      assert.ok(first.chunks > 0, 'the first read of the list reads its positions');
      await conn.positionsRead();
      for (const n of [7, 8, 9, 3, 2]) {
        const again = await page(n);
        assert.deepEqual([again.ids, again.hasMore], [expected.slice((n - 1) * 100, n * 100), true], `page ${n}`);
        // Pages before page 7 too: the set was read whole behind it.
        assert.equal(again.chunks, 0, `page ${n}: ${again.chunks} position rows read`);
        assert.ok(again.scans <= 1, `page ${n}: ${again.scans} scans of the records' indexes`);
      }
      const lastPage = await page(12);
      assert.deepEqual([lastPage.ids, lastPage.hasMore], [expected.slice(1100), false]);

      // A pass that moves records computes new positions: the ones held are not used for them.
      await fullPass(key, 'two', [[...customers(1100, 100), ...customers(0, 400)], customers(400, 500), customers(900, 200)], 500);
      expected = await upstreamOrder(key);
      assert.equal(expected[0], 'c01100');
      for (const n of [7, 1, 2, 12]) {
        const moved = await page(n);
        assert.deepEqual(moved.ids, expected.slice((n - 1) * 100, n * 100), `page ${n} after the pass`);
      }
      await conn.positionsRead();
      assert.equal((await page(2)).chunks, 0, 'the new positions held in turn');
      assert.equal((await page(11)).chunks, 0, 'the new positions held in turn, whole');
    } finally {
      await client.query('ROLLBACK');
      client.release();
    }
  });

  it('reads a filtered first page straight off the index, with no lookup per record', async () => {
    const key = await account();
    await fullPass(key, 'one', [customers(0, 500), customers(500, 500)], 500);
    await pool.query('ANALYZE records');
    const client = await pool.connect();
    const scans = async () =>
      (await client.query<{ n: number }>(`SELECT coalesce(sum(idx_scan), 0)::int AS n FROM pg_stat_xact_user_tables WHERE starts_with(relname, 'records')`))
        .rows[0]!.n;
    try {
      await client.query('BEGIN');
      const s0 = await scans();
      const r = await new RecordReader(client as unknown as Pool).listRecords({
        ...query(key, 1, 100),
        filters: [{ field: 'source_data.n', operator: '>=', value: 250 }],
      });
      const s1 = await scans();
      assert.deepEqual(
        r.rows.map((j) => (JSON.parse(j) as { id: string }).id),
        (await upstreamOrder(key)).slice(250, 350),
      );
      assert.equal(r.hasMore, true);
      assert.ok(s1 - s0 <= 1, `${s1 - s0} scans of the records' indexes`);
    } finally {
      await client.query('ROLLBACK');
      client.release();
    }
  });

  it('falls back to OFFSET after any write that changes the list, until the next pass finishes', async () => {
    const key = await account();
    const first = [customers(0, 250), customers(250, 250), customers(500, 100)];
    await fullPass(key, 'one', first, 250);
    assert.equal((await readAll(key, 100)).offset, 0);

    // An event's new record (appended), then an event's delete: each falls back, and is right.
    await applyObjects(pool, key, customers(7000, 1));
    let r = await readAll(key, 100);
    assert.equal(r.positioned, 0, 'a new record: positions out of date');
    assert.deepEqual(ids(r.pages), await upstreamOrder(key));
    assert.equal(ids(r.pages).at(-1), 'c07000');

    await fullPass(key, 'two', [...first.slice(0, 2), [...first[2]!, ...customers(7000, 1)]], 250);
    assert.equal((await readAll(key, 100)).offset, 0, 'the pass that finished computed them again');
    await markDeleted(pool, key, ['c00003']);
    r = await readAll(key, 100);
    assert.equal(r.positioned, 0, 'a delete: positions out of date');
    assert.deepEqual(ids(r.pages), await upstreamOrder(key));
    assert.ok(!ids(r.pages).includes('c00003'));

    // A pass running: its first page moves records to the front; every page falls back while it runs.
    const p = await beginOrResumePass(pool, key, { passKey: 'three', mode: 'full', perPage: 250 });
    await writePage(pool, {
      key,
      pass: p,
      records: { items: [...customers(400, 50), ...customers(0, 200)] },
      ordinalBase: 0,
      seen: { page: 1, perPage: 250, digest: null, hasMore: true },
      checkpoint: { ...p.checkpoint, page: 2 },
    });
    r = await readAll(key, 100);
    assert.equal(r.positioned, 0, 'a pass page: positions out of date');
    assert.deepEqual(ids(r.pages), await upstreamOrder(key));
    await writePage(pool, {
      key,
      pass: p,
      records: { items: customers(200, 100) },
      ordinalBase: 250,
      seen: { page: 2, perPage: 250, digest: null, hasMore: false },
      checkpoint: { ...p.checkpoint, page: 3 },
    });
    const { rows } = await pool.query<{ checkpoint: Parameters<typeof finishPass>[3] }>('SELECT checkpoint FROM streams WHERE id = $1', [p.streamId]);
    await finishPass(pool, key, p, rows[0]!.checkpoint);
    // The finish marked the records it did not see deleted (c00300.. and c07000) and computed positions.
    r = await readAll(key, 100);
    assert.equal(r.offset, 0);
    const expected = await upstreamOrder(key);
    assert.equal(expected.length, 350);
    assert.deepEqual(ids(r.pages), expected);
    assert.deepEqual(r.pages, await readAllByOffset(key, 100));
  });

  it('a write racing the computation of positions waits for it, then marks them out of date', async () => {
    const key = await account();
    await fullPass(key, 'one', [customers(0, 300)], 300);
    await applyObjects(pool, key, customers(4000, 1));
    // A computation in progress, as finishPass runs it on positions out of date: the set row locked,
    // then the positions marked valid in the same transaction. An event's write meanwhile (whose
    // snapshot sees them out of date already) must not leave them valid.
    const computing = await pool.connect();
    let wrote = false;
    try {
      await computing.query('BEGIN');
      await computing.query(`UPDATE record_position_sets SET version = version + 1 WHERE account_id = $1`, [key.accountId]);
      const event = applyObjects(pool, key, customers(5000, 1)).then(() => (wrote = true));
      await new Promise((resolve) => setTimeout(resolve, 300));
      assert.equal(wrote, false, 'the write waits for the computation');
      await computing.query(`UPDATE record_position_sets SET valid_version = version WHERE account_id = $1`, [key.accountId]);
      await computing.query('COMMIT');
      await event;
    } finally {
      computing.release();
    }
    const r = await readAll(key, 100);
    assert.equal(r.positioned, 0, 'the write that committed after the computation marked its positions out of date');
    assert.deepEqual(ids(r.pages), await upstreamOrder(key));
    assert.equal(ids(r.pages).at(-1), 'c05000');
  });

  it('a pass that changed nothing keeps the positions; a page whose records went from under them is read by OFFSET', async () => {
    const key = await account();
    const pages = [customers(0, 300), customers(300, 300)];
    await fullPass(key, 'one', pages, 300);
    const version = async () =>
      (await pool.query<{ v: string }>(`SELECT version || '/' || valid_version AS v FROM record_position_sets WHERE account_id = $1`, [key.accountId])).rows[0]!
        .v;
    const computed = await version();
    await fullPass(key, 'two', pages, 300);
    assert.equal(await version(), computed, 'nothing written: nothing to compute');
    assert.equal((await readAll(key, 100)).offset, 0);

    // Deletes that bypass the mirror's writers (a purge does): a page holding a record its positions
    // name but that is gone no longer matches them, and is read by OFFSET.
    await pool.query(`DELETE FROM records WHERE account_id = $1 AND id = 'c00450'`, [key.accountId]);
    const before = { ...reader.readPaths };
    const page5 = await reader.listRecords(query(key, 5, 100));
    assert.equal(reader.readPaths.offset - before.offset, 1);
    assert.deepEqual(
      page5.rows.map((j) => (JSON.parse(j) as { id: string }).id),
      (await upstreamOrder(key)).slice(400, 500),
    );
    await pool.query(`DELETE FROM records WHERE account_id = $1`, [key.accountId]);
    const purged = await reader.listRecords(query(key, 2, 100));
    assert.deepEqual([purged.rows, purged.hasMore], [[], false]);
    assert.equal(reader.readPaths.offset - before.offset, 2);
    const purgedFirst = await reader.listRecords(query(key, 1, 100));
    assert.deepEqual([purgedFirst.rows, purgedFirst.hasMore], [[], false]);
  });

  it('gives a partition its first statistics after its first pass, so a single-object read takes the primary key', async () => {
    // A resource no other test here writes, its partition as a fresh install has it: never analyzed
    // (another test's `ANALYZE records` reaches every partition, so its statistics are taken away).
    const key: StreamKey = { ...(await account()), resource: 'vendors' };
    await pool.query(`DELETE FROM pg_statistic WHERE starelid = 'records_vendors'::regclass`);
    await pool.query(`UPDATE pg_class SET reltuples = -1 WHERE oid = 'records_vendors'::regclass`);
    const never = async () =>
      (await pool.query<{ never: boolean }>(`SELECT reltuples < 0 AS never FROM pg_class WHERE oid = 'records_vendors'::regclass`)).rows[0]!.never;
    assert.equal(await never(), true, 'the partition starts without statistics');
    await fullPass(key, 'one', [customers(0, 1000), customers(1000, 1000), customers(2000, 1000)], 1000);
    // Not waited for by the pass: within a few seconds.
    for (let i = 0; i < 100 && (await never()); i++) await new Promise((r) => setTimeout(r, 100));
    assert.equal(await never(), false, 'the partition has statistics after its first pass');
    const plan = (
      await pool.query<{ 'QUERY PLAN': unknown }>(
        `EXPLAIN (FORMAT JSON) SELECT data FROM records WHERE account_id = $1 AND resource = 'vendors' AND id = 'c02999' AND deleted_at IS NULL AND scope = ''`,
        [key.accountId],
      )
    ).rows[0]!['QUERY PLAN'];
    const indexes = JSON.stringify(plan).match(/"Index Name":"[^"]+"/g) ?? [];
    assert.deepEqual(
      indexes.map((i) => i.includes('pkey')),
      [true],
      `a single-object read by ${indexes.join(', ') || 'no index'}`,
    );
  });

  it('positions of another chunk size (an earlier release computed them) are not read, and the next pass computes them again', async () => {
    const key = await account();
    const pages = [customers(0, 300), customers(300, 300)];
    await fullPass(key, 'one', pages, 300);
    assert.equal((await readAll(key, 100)).offset, 0);
    // As the release before this layout left them: 500 ids to a chunk, no ordinals, no chunk size.
    await pool.query(`DELETE FROM record_position_chunks WHERE account_id = $1`, [key.accountId]);
    await pool.query(
      `INSERT INTO record_position_chunks (account_id, resource, scope, chunk, ids)
       SELECT $1, 'customers', '', pos / 500 AS chunk, array_agg(id ORDER BY pos)
         FROM (SELECT id, (row_number() OVER (ORDER BY ordinal, id) - 1)::int AS pos FROM records WHERE account_id = $1 AND deleted_at IS NULL) x
        GROUP BY pos / 500`,
      [key.accountId],
    );
    await pool.query(`UPDATE record_position_sets SET chunk_size = NULL WHERE account_id = $1`, [key.accountId]);
    const old = await readAll(key, 100);
    assert.equal(old.positioned, 0, 'the earlier layout is not read');
    assert.deepEqual(ids(old.pages), await upstreamOrder(key));
    // A pass that changes no record still computes them in this layout.
    await fullPass(key, 'two', pages, 300);
    const again = await readAll(key, 100);
    assert.equal(again.offset, 0, 'every page by position again');
    assert.deepEqual(ids(again.pages), await upstreamOrder(key));
  });
});
