// The store's two-phase write of a pass's page (mirror/records/page-write.ts, kept-pages.ts): a staged page's records are
// written in a transaction left open, seen by no one until the page commits with its checkpoint, in
// the order its caller commits pages; abandoned, nothing of it remains. Real Postgres throughout.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { createPool, type Pool } from '../../mirror/db/pool.ts';
import { knownPages, stageKeptPage } from '../../mirror/records/kept-pages.ts';
import { applyObjects } from '../../mirror/records/object-writes.ts';
import { stagePage } from '../../mirror/records/page-write.ts';
import { beginOrResumePass, StalePassError, type Checkpoint, type StreamKey } from '../../mirror/streams/streams.ts';
import { createTestDatabase, insertBareAccount, type TestDatabase } from '../helpers/database.ts';

describe('pages staged, then committed with their checkpoint', () => {
  let db: TestDatabase;
  let pool: Pool;
  let key: StreamKey;

  before(async () => {
    db = await createTestDatabase('mirror_staged');
    pool = createPool(db.url);
    key = { accountId: await insertBareAccount(pool), resource: 'customers', scope: '' };
  });
  after(async () => {
    await pool?.end();
    await db?.drop();
  });

  const objects = (ids: string[], name = 'customer') => ids.map((id) => ({ id, name: `${name} ${id}` }));
  const seen = (page: number, digest: string | null = null) => ({ page, perPage: 2, digest, hasMore: true });
  const counts = (inserted: number, updated = 0, unchanged = 0) => ({ inserted, updated, unchanged, deleted: 0 });

  async function live(): Promise<string[]> {
    const { rows } = await pool.query<{ id: string }>(
      `SELECT id FROM records WHERE account_id = $1 AND resource = 'customers' AND deleted_at IS NULL ORDER BY id`,
      [key.accountId],
    );
    return rows.map((r) => r.id);
  }

  async function stream(): Promise<{ checkpoint: Checkpoint; pages: number; records: number; seenPages: number[] }> {
    const { rows } = await pool.query<{ id: number; generation: number; checkpoint: Checkpoint; pages: number; records: number }>(
      'SELECT id, generation, checkpoint, pages, records FROM streams WHERE account_id = $1 AND resource = $2 AND scope = $3',
      [key.accountId, key.resource, key.scope],
    );
    const row = rows[0]!;
    const { rows: pages } = await pool.query<{ page: number }>('SELECT page FROM stream_pages WHERE stream_id = $1 AND generation = $2 ORDER BY page', [
      row.id,
      row.generation,
    ]);
    return { checkpoint: row.checkpoint, pages: row.pages, records: row.records, seenPages: pages.map((p) => p.page) };
  }

  /** Connections checked out of the pool (a staged page holds one until it commits or is abandoned). */
  const checkedOut = () => pool.totalCount - pool.idleCount;

  it('writes nothing anyone sees until a page commits, and commits pages in the order the caller chooses', async () => {
    const p = await beginOrResumePass(pool, key, { passKey: 'p1', mode: 'full', perPage: 2 });
    const first = await stagePage(pool, { key, pass: p, records: { items: objects(['a', 'b']) }, ordinalBase: 0, seen: seen(1), insertOnly: true });
    const second = await stagePage(pool, { key, pass: p, records: { items: objects(['c', 'd']) }, ordinalBase: 2, seen: seen(2), insertOnly: true });
    assert.deepEqual(first.counts, { inserted: 2, updated: 0, unchanged: 0 });
    assert.equal(first.records, 2);
    assert.equal(first.conflicted, false);
    assert.equal(checkedOut(), 2, 'each staged page holds its transaction');
    assert.deepEqual(await live(), [], 'staged records are not committed');
    assert.deepEqual((await stream()).seenPages, []);

    await first.commit({ ...p.checkpoint, page: 2, counts: counts(2) });
    assert.deepEqual(await live(), ['a', 'b']);
    let s = await stream();
    assert.deepEqual([s.checkpoint.page, s.checkpoint.counts, s.pages, s.records, s.seenPages], [2, counts(2), 1, 2, [1]]);

    await second.commit({ ...p.checkpoint, page: 3, counts: counts(4) });
    assert.deepEqual(await live(), ['a', 'b', 'c', 'd']);
    s = await stream();
    assert.deepEqual([s.checkpoint.page, s.checkpoint.counts, s.pages, s.records, s.seenPages], [3, counts(4), 2, 4, [1, 2]]);
    assert.equal(checkedOut(), 0);
  });

  it('leaves nothing of an abandoned page, and gives its connection back', async () => {
    const p = await beginOrResumePass(pool, key, { passKey: 'p1', mode: 'full', perPage: 2 });
    const staged = await stagePage(pool, { key, pass: p, records: { items: objects(['e', 'f']) }, ordinalBase: 4, seen: seen(3) });
    await staged.abandon();
    assert.equal(checkedOut(), 0);
    assert.deepEqual(await live(), ['a', 'b', 'c', 'd']);
    const s = await stream();
    assert.deepEqual([s.checkpoint.page, s.pages, s.records, s.seenPages], [3, 2, 4, [1, 2]]);
  });

  it('says when a page meant to be inserted met a record already there (it was upserted)', async () => {
    const p = await beginOrResumePass(pool, key, { passKey: 'p2', mode: 'full', perPage: 2 });
    const staged = await stagePage(pool, {
      key,
      pass: p,
      records: { items: [...objects(['a'], 'renamed'), ...objects(['x'])] },
      ordinalBase: 0,
      seen: seen(1, 'digest-1'),
      insertOnly: true,
    });
    assert.equal(staged.conflicted, true);
    assert.deepEqual(staged.counts, { inserted: 1, updated: 1, unchanged: 0 });
    await staged.commit({ ...p.checkpoint, page: 2, counts: counts(1, 1) });
    const upserted = await stagePage(pool, { key, pass: p, records: { items: objects(['b', 'c']) }, ordinalBase: 2, seen: seen(2, 'digest-2') });
    assert.equal(upserted.conflicted, false);
    assert.deepEqual(upserted.counts, { inserted: 0, updated: 0, unchanged: 2 });
    await upserted.commit({ ...p.checkpoint, page: 3, counts: counts(1, 1, 2) });
    assert.deepEqual(await live(), ['a', 'b', 'c', 'd', 'x']);
  });

  it('stages a page kept unchanged without writing its records, and none whose records changed since', async () => {
    const p = await beginOrResumePass(pool, key, { passKey: 'p3', mode: 'full', perPage: 2 });
    const known = await knownPages(pool, p, { from: 1, to: 2 });
    assert.deepEqual([...known.keys()], [1, 2]);
    const kept = await stageKeptPage(pool, { key, pass: p, known: known.get(1)! });
    assert.ok(kept);
    assert.deepEqual(kept.counts, { inserted: 0, updated: 0, unchanged: 2 });
    await kept.commit({ ...p.checkpoint, page: 2, counts: counts(0, 0, 2) });
    let s = await stream();
    assert.deepEqual([s.checkpoint.page, s.pages, s.records, s.seenPages], [2, 1, 2, [1]]);

    // An event changed a record of page 2 since it was written: the page is not kept.
    await applyObjects(pool, key, objects(['c'], 'changed'));
    assert.equal(await stageKeptPage(pool, { key, pass: p, known: known.get(2)! }), null);
    assert.equal(checkedOut(), 0, 'a page not kept holds no connection');
    s = await stream();
    assert.deepEqual([s.checkpoint.page, s.seenPages], [2, [1]]);
  });

  it('rolls a page back whose pass was replaced before it committed', async () => {
    const p = await beginOrResumePass(pool, key, { passKey: 'p4', mode: 'full', perPage: 2 });
    const staged = await stagePage(pool, { key, pass: p, records: { items: objects(['g']) }, ordinalBase: 0 });
    await beginOrResumePass(pool, key, { passKey: 'p5', mode: 'full', perPage: 2 });
    await assert.rejects(staged.commit({ ...p.checkpoint, page: 2, counts: counts(1) }), StalePassError);
    assert.equal(checkedOut(), 0);
    assert.ok(!(await live()).includes('g'));
  });
});
