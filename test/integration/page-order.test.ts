// List pages: every page of a list, read page by page while a pass is writing, is the upstream's order
// (ordinal, then id, over live records), at several page sizes. The guard for any faster way to reach
// page N (an index walk, a dense position per stream): it must serve exactly these pages, for every
// resource (each its own partition and statements).
import assert from 'node:assert/strict';
import { randomBytes, randomUUID } from 'node:crypto';
import { after, before, describe, it } from 'node:test';
import { createPool, type Pool } from '../../mirror/db/pool.ts';
import type { ListQuery } from '../../mirror/reads/list-strategies.ts';
import { RecordReader } from '../../mirror/reads/records-read.ts';
import { finishPass } from '../../mirror/records/finish-pass.ts';
import { writePage } from '../../mirror/records/page-write.ts';
import { beginOrResumePass, type StreamKey } from '../../mirror/streams/streams.ts';
import { resources } from '../../lib/resources.ts';
import { createTestDatabase, type TestDatabase } from '../helpers/database.ts';

describe('list pages', () => {
  let db: TestDatabase;
  let pool: Pool;
  let reader: RecordReader;

  async function account(): Promise<string> {
    const accountId = randomUUID();
    await pool.query(
      `INSERT INTO linked_accounts (id, reference_id, source_system, source_system_name, token_ciphertext, token_hash, updated_at)
       VALUES ($1, 'ref', 'fieldops', 'FieldOps', '\\x00', $2, now())`,
      [accountId, randomBytes(32).toString('hex')],
    );
    return accountId;
  }

  before(async () => {
    db = await createTestDatabase('mirror_page_order');
    pool = createPool(db.url);
    reader = new RecordReader(pool);
  });
  after(async () => {
    await pool?.end();
    await db?.drop();
  });

  const query = (accountId: string, page: number, perPage: number, resource = 'customers', scope = ''): ListQuery => ({
    accountId,
    resource,
    scopes: [scope],
    page,
    perPage,
    includeSourceData: false,
  });

  /** Every page of the list, read one after another, as the ids served. */
  async function readAll(accountId: string, perPage: number, resource = 'customers', scope = ''): Promise<string[]> {
    const out: string[] = [];
    for (let page = 1; ; page++) {
      const r = await reader.listRecords(query(accountId, page, perPage, resource, scope));
      out.push(...r.rows.map((j) => (JSON.parse(j) as { id: string }).id));
      if (!r.hasMore) return out;
    }
  }

  async function upstreamOrder(accountId: string, resource = 'customers', scope = ''): Promise<string[]> {
    const { rows } = await pool.query<{ id: string }>(
      `SELECT id FROM records WHERE account_id = $1 AND resource = $2 AND scope = $3 AND deleted_at IS NULL ORDER BY ordinal, id`,
      [accountId, resource, scope],
    );
    return rows.map((r) => r.id);
  }

  /** One upstream page of a pass: the records of `ids`, in that order, at ordinals from `ordinalBase`. */
  async function write(
    key: StreamKey,
    pass: Awaited<ReturnType<typeof beginOrResumePass>>,
    page: number,
    ids: string[],
    ordinalBase: number,
    hasMore: boolean,
  ) {
    await writePage(pool, {
      key,
      pass,
      records: { items: ids.map((id) => ({ id, name: `record ${id}` })) },
      ordinalBase,
      seen: { page, perPage: ids.length, digest: null, hasMore },
      checkpoint: { ...pass.checkpoint, page: page + 1 },
    });
  }

  /** Finishes a pass at the checkpoint its pages left (the positions are then computed). */
  async function finish(key: StreamKey, pass: Awaited<ReturnType<typeof beginOrResumePass>>) {
    const { rows } = await pool.query<{ checkpoint: Parameters<typeof finishPass>[3] }>('SELECT checkpoint FROM streams WHERE id = $1', [pass.streamId]);
    await finishPass(pool, key, pass, rows[0]!.checkpoint);
  }

  it('pages in the upstream order while a pass writes, deleted records left out', async () => {
    const accountId = await account();
    const key: StreamKey = { accountId, resource: 'customers', scope: '' };
    const ids = (from: number, n: number) => Array.from({ length: n }, (_, i) => `c${String(from + i).padStart(4, '0')}`);
    // A first pass of three upstream pages, finished.
    const p1 = await beginOrResumePass(pool, key, { passKey: 'one', mode: 'full', perPage: 100 });
    for (let page = 1; page <= 3; page++) await write(key, p1, page, ids(page * 100, 100), (page - 1) * 100, page < 3);
    await finish(key, p1);
    // A second pass has written its first page only: new records at the front (ordinals 0..99 again,
    // ties with the first pass's), some of the old ones gone from the upstream and marked deleted.
    const p2 = await beginOrResumePass(pool, key, { passKey: 'two', mode: 'full', perPage: 100 });
    await write(key, p2, 1, [...ids(900, 50), ...ids(150, 50)], 0, true);
    await pool.query(`UPDATE records SET deleted_at = now() WHERE account_id = $1 AND id IN ('c0105', 'c0250', 'c0399')`, [accountId]);

    const expected = await upstreamOrder(accountId);
    assert.equal(expected.length, 350 - 3);
    for (const perPage of [1, 7, 100, 1000]) assert.deepEqual(await readAll(accountId, perPage), expected, `per_page=${perPage}`);
  });

  it('every resource: pages in the upstream order by positions after a pass, and while the next pass writes', async () => {
    const accountId = await account();
    const before = { ...reader.readPaths };
    for (const { name: resource } of resources) {
      const key: StreamKey = { accountId, resource, scope: 'project=p1' };
      const ids = (from: number, n: number) => Array.from({ length: n }, (_, i) => `${resource}-${String(from + i).padStart(3, '0')}`);
      const p1 = await beginOrResumePass(pool, key, { passKey: 'one', mode: 'full', perPage: 40 });
      // Ids out of their sort order within a page (the upstream's order is the ordinal's), and an odd last page.
      await write(key, p1, 1, [...ids(100, 20), ...ids(0, 20)], 0, true);
      await write(key, p1, 2, ids(40, 33), 40, false);
      await finish(key, p1);
      const done = await upstreamOrder(accountId, resource, key.scope);
      assert.equal(done.length, 73, resource);
      for (const perPage of [3, 10, 100]) assert.deepEqual(await readAll(accountId, perPage, resource, key.scope), done, `${resource} per_page=${perPage}`);
      // The next pass has written its first page: new records at the front, ties with the last pass's.
      const p2 = await beginOrResumePass(pool, key, { passKey: 'two', mode: 'full', perPage: 40 });
      await write(key, p2, 1, [...ids(500, 10), ...ids(45, 30)], 0, true);
      const writing = await upstreamOrder(accountId, resource, key.scope);
      assert.equal(writing.length, 85, resource);
      for (const perPage of [3, 10, 100])
        assert.deepEqual(await readAll(accountId, perPage, resource, key.scope), writing, `${resource} per_page=${perPage}, pass writing`);
    }
    // Both ways were read for every resource: by positions after the first pass, by OFFSET during the second.
    assert.ok(
      reader.readPaths.positioned - before.positioned >= resources.length * 10,
      `pages by positions: ${reader.readPaths.positioned - before.positioned}`,
    );
    assert.ok(reader.readPaths.offset - before.offset >= resources.length * 10, `pages by OFFSET: ${reader.readPaths.offset - before.offset}`);
  });
});
