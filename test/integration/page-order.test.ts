// List pages: every page of a list, read page by page while a pass is writing, is the upstream's order
// (ordinal, then id, over live records), at several page sizes. The guard for any faster way to reach
// page N (an index walk, a dense position per stream): it must serve exactly these pages.
import assert from 'node:assert/strict';
import { randomBytes, randomUUID } from 'node:crypto';
import { after, before, describe, it } from 'node:test';
import { createPool, type Pool } from '../../mirror/pool.ts';
import { listRecords, type ListQuery } from '../../mirror/records-read.ts';
import { finishPass, writePage } from '../../mirror/records-store.ts';
import { beginOrResumePass, type StreamKey } from '../../mirror/streams.ts';
import { createTestDatabase, type TestDatabase } from '../helpers/database.ts';

describe('list pages', () => {
  let db: TestDatabase;
  let pool: Pool;

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
  });
  after(async () => {
    await pool?.end();
    await db?.drop();
  });

  const query = (accountId: string, page: number, perPage: number): ListQuery => ({
    accountId,
    resource: 'customers',
    scopes: [''],
    page,
    perPage,
    includeSourceData: false,
  });

  /** Every page of the list, read one after another, as the ids served. */
  async function readAll(accountId: string, perPage: number): Promise<string[]> {
    const out: string[] = [];
    for (let page = 1; ; page++) {
      const r = await listRecords(pool, query(accountId, page, perPage));
      out.push(...r.rows.map((j) => (JSON.parse(j) as { id: string }).id));
      if (!r.hasMore) return out;
    }
  }

  async function upstreamOrder(accountId: string): Promise<string[]> {
    const { rows } = await pool.query<{ id: string }>(
      `SELECT id FROM records WHERE account_id = $1 AND resource = 'customers' AND scope = '' AND deleted_at IS NULL ORDER BY ordinal, id`,
      [accountId],
    );
    return rows.map((r) => r.id);
  }

  it('pages in the upstream order while a pass writes, deleted records left out', async () => {
    const accountId = await account();
    const key: StreamKey = { accountId, resource: 'customers', scope: '' };
    const items = (from: number, n: number) =>
      Array.from({ length: n }, (_, i) => ({ id: `c${String(from + i).padStart(4, '0')}`, name: `customer ${from + i}` }));
    // A first pass of three upstream pages, finished.
    const p1 = await beginOrResumePass(pool, key, { passKey: 'one', mode: 'full', perPage: 100 });
    for (let page = 1; page <= 3; page++) {
      await writePage(pool, {
        key,
        pass: p1,
        records: { items: items(page * 100, 100) },
        ordinalBase: (page - 1) * 100,
        seen: { page, perPage: 100, digest: null, hasMore: page < 3 },
        checkpoint: { ...p1.checkpoint, page: page + 1 },
      });
    }
    const { rows } = await pool.query<{ checkpoint: Parameters<typeof finishPass>[3] }>('SELECT checkpoint FROM streams WHERE id = $1', [p1.streamId]);
    await finishPass(pool, key, p1, rows[0]!.checkpoint);
    // A second pass has written its first page only: new records at the front (ordinals 0..99 again,
    // ties with the first pass's), some of the old ones gone from the upstream and marked deleted.
    const p2 = await beginOrResumePass(pool, key, { passKey: 'two', mode: 'full', perPage: 100 });
    await writePage(pool, {
      key,
      pass: p2,
      records: { items: [...items(900, 50), ...items(150, 50)] },
      ordinalBase: 0,
      seen: { page: 1, perPage: 100, digest: null, hasMore: true },
      checkpoint: { ...p2.checkpoint, page: 2 },
    });
    await pool.query(`UPDATE records SET deleted_at = now() WHERE account_id = $1 AND id IN ('c0105', 'c0250', 'c0399')`, [accountId]);

    const expected = await upstreamOrder(accountId);
    assert.equal(expected.length, 350 - 3);
    for (const perPage of [1, 7, 100, 1000]) assert.deepEqual(await readAll(accountId, perPage), expected, `per_page=${perPage}`);
  });
});
