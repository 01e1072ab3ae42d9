// Finishing a full pass marks deleted what the pass did not see: only records the mirror held before
// the pass began (a record an event wrote meanwhile is the upstream's too), and nothing at all after
// a pass that began on an empty stream (a first sync), which skips the look.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { createPool, type Pool } from '../../mirror/db/pool.ts';
import { finishPass } from '../../mirror/records/finish-pass.ts';
import { applyObjects } from '../../mirror/records/object-writes.ts';
import { writePage } from '../../mirror/records/page-write.ts';
import { beginOrResumePass, StalePassError, type StreamKey } from '../../mirror/streams/streams.ts';
import { createTestDatabase, insertBareAccount, type TestDatabase } from '../helpers/database.ts';

describe('finishing a full pass', () => {
  let db: TestDatabase;
  let pool: Pool;
  let key: StreamKey;

  before(async () => {
    db = await createTestDatabase('mirror_finish');
    pool = createPool(db.url);
    key = { accountId: await insertBareAccount(pool), resource: 'customers', scope: '' };
  });
  after(async () => {
    await pool?.end();
    await db?.drop();
  });

  const objects = (...ids: string[]) => ids.map((id) => ({ id, name: `customer ${id}` }));

  /** One full pass of one page holding `ids`, with `during` run between the page and the finish. */
  async function pass(passKey: string, ids: string[], during: () => Promise<unknown> = async () => undefined) {
    const p = await beginOrResumePass(pool, key, { passKey, mode: 'full', perPage: 100 });
    const seen = { page: 1, perPage: 100, digest: null, hasMore: false };
    await writePage(pool, { key, pass: p, records: { items: objects(...ids) }, ordinalBase: 0, seen, checkpoint: { ...p.checkpoint, page: 2 } });
    await during();
    const { rows } = await pool.query<{ checkpoint: Parameters<typeof finishPass>[3] }>('SELECT checkpoint FROM streams WHERE id = $1', [p.streamId]);
    return { started: p, deleted: await finishPass(pool, key, p, rows[0]!.checkpoint) };
  }

  async function live(): Promise<string[]> {
    const { rows } = await pool.query<{ id: string }>(
      `SELECT id FROM records WHERE account_id = $1 AND resource = 'customers' AND deleted_at IS NULL ORDER BY id`,
      [key.accountId],
    );
    return rows.map((r) => r.id);
  }

  it('skips the look after a first pass, and keeps what events wrote during a pass', async () => {
    const first = await pass('p1', ['a', 'b', 'c'], () => applyObjects(pool, key, objects('e1')));
    assert.equal(first.started.checkpoint.startedEmpty, true, 'a pass on an empty stream knows it');
    assert.equal(first.deleted, 0);
    assert.deepEqual(await live(), ['a', 'b', 'c', 'e1']);

    // b, c and e1 were held before the second pass began and it did not see them: deleted. e2 was
    // written by an event while it ran: kept.
    const second = await pass('p2', ['a'], () => applyObjects(pool, key, objects('e2')));
    assert.equal(second.started.checkpoint.startedEmpty, undefined);
    assert.equal(second.deleted, 3);
    assert.deepEqual(await live(), ['a', 'e2']);
  });

  it('commits a page with its checkpoint, and nothing of a page whose pass was replaced meanwhile', async () => {
    const old = await beginOrResumePass(pool, key, { passKey: 'p3', mode: 'full', perPage: 100 });
    const seen = { page: 1, perPage: 100, digest: 'd1', hasMore: true };
    const counts = await writePage(pool, {
      key,
      pass: old,
      records: { items: objects('s1', 's2') },
      ordinalBase: 0,
      seen,
      checkpoint: { ...old.checkpoint, page: 2 },
    });
    assert.deepEqual(counts, { inserted: 2, updated: 0, unchanged: 0 });
    const stream = async () =>
      (
        await pool.query<{ generation: number; pages: number; records: number; page: number; inserted: number }>(
          `SELECT generation, pages, records, (checkpoint->>'page')::int AS page, (checkpoint->'counts'->>'inserted')::int AS inserted FROM streams WHERE id = $1`,
          [old.streamId],
        )
      ).rows[0]!;
    assert.deepEqual(await stream(), { generation: old.generation, pages: 1, records: 2, page: 2, inserted: 2 }, 'the checkpoint was committed with the page');

    // Another pass takes the stream over before the old one writes its next page.
    const replacing = await beginOrResumePass(pool, key, { passKey: 'p4', mode: 'full', perPage: 100 });
    assert.equal(replacing.generation, old.generation + 1);
    await assert.rejects(
      writePage(pool, {
        key,
        pass: old,
        records: { items: objects('s3') },
        ordinalBase: 100,
        seen: { ...seen, page: 2 },
        checkpoint: { ...old.checkpoint, page: 3 },
      }),
      StalePassError,
    );
    const { rows: written } = await pool.query(`SELECT 1 FROM records WHERE account_id = $1 AND resource = 'customers' AND id = 's3'`, [key.accountId]);
    assert.equal(written.length, 0, "the stale pass's page rolled back");
    const { rows: pageRows } = await pool.query(`SELECT 1 FROM stream_pages WHERE stream_id = $1 AND generation = $2 AND page = 2`, [
      old.streamId,
      old.generation,
    ]);
    assert.equal(pageRows.length, 0, 'and its page row with it');
    assert.deepEqual(
      await stream(),
      { generation: replacing.generation, pages: 0, records: 0, page: 1, inserted: 0 },
      "the new pass's checkpoint is untouched",
    );
  });
});
