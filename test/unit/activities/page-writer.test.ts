// The writing side of a slice (activities/page-writer.ts): pages staged a few at a time, committed in
// page order with checkpoints that add up, a page that shares a record with one in flight held back,
// and pages after a failed one abandoned. Staged pages here are stand-ins that record what happened
// (the store's own two-phase write is test/integration/staged-pages.test.ts).
import assert from 'node:assert/strict';
import { setTimeout as sleep } from 'node:timers/promises';
import { describe, it } from 'node:test';
import { PageWriter, writeDepth, type WrittenCounts } from '../../../activities/page-writer.ts';
import type { StagedPage, WriteCounts } from '../../../mirror/records/page-write.ts';
import type { Checkpoint } from '../../../mirror/streams/streams.ts';

const base: Checkpoint = {
  passKey: 'p',
  mode: 'full',
  page: 1,
  perPage: 2,
  lastFingerprint: null,
  since: null,
  done: false,
  counts: { inserted: 5, updated: 0, unchanged: 0, deleted: 1 },
};

function setup(insertOnly = false) {
  const events: string[] = [];
  const checkpoints: Checkpoint[] = [];
  const written: WrittenCounts = { pages: 0, records: 0, inserted: 0, updated: 0, unchanged: 0 };
  const beats: number[] = [];
  const writer = new PageWriter(base.counts, insertOnly, written, (page) => beats.push(page));
  let staging = 0;
  let mostStaging = 0;
  /** A page whose staging takes `ms` and counts `counts`; `fail` makes its staging or commit fail. */
  const page = (
    n: number,
    o: { ms?: number; ids?: string[]; counts?: WriteCounts; conflicted?: boolean; fail?: 'stage' | 'commit'; insertOnly?: boolean[] } = {},
  ) => ({
    page: n,
    ids: o.ids ?? [`${n}a`, `${n}b`],
    checkpoint: { ...base, page: n + 1 },
    stage: async (asInsert: boolean): Promise<StagedPage> => {
      o.insertOnly?.push(asInsert);
      staging++;
      mostStaging = Math.max(mostStaging, staging);
      events.push(`stage ${n}`);
      await sleep(o.ms ?? 1);
      if (o.fail === 'stage') {
        staging--;
        throw new Error(`page ${n} failed`);
      }
      return {
        counts: o.counts ?? { inserted: 2, updated: 0, unchanged: 0 },
        records: 2,
        conflicted: o.conflicted ?? false,
        commit: async (checkpoint) => {
          staging--;
          if (o.fail === 'commit') throw new Error(`commit ${n} failed`);
          events.push(`commit ${n}`);
          checkpoints.push(checkpoint);
        },
        abandon: async () => {
          staging--;
          events.push(`abandon ${n}`);
        },
      };
    },
  });
  return { writer, page, events, checkpoints, written, beats, mostStaging: () => mostStaging };
}

describe('the page writer', () => {
  it('commits pages in order, each with the counts through it, however fast each was staged', async () => {
    const t = setup();
    await t.writer.add(t.page(1, { ms: 40 }));
    await t.writer.add(t.page(2, { ms: 1, counts: { inserted: 0, updated: 1, unchanged: 1 } }));
    await t.writer.add(t.page(3, { ms: 10 }));
    await t.writer.drained();
    assert.deepEqual(
      t.events.filter((e) => e.startsWith('commit')),
      ['commit 1', 'commit 2', 'commit 3'],
    );
    assert.deepEqual(
      t.checkpoints.map((c) => [c.page, c.counts]),
      [
        [2, { inserted: 7, updated: 0, unchanged: 0, deleted: 1 }],
        [3, { inserted: 7, updated: 1, unchanged: 1, deleted: 1 }],
        [4, { inserted: 9, updated: 1, unchanged: 1, deleted: 1 }],
      ],
    );
    assert.deepEqual(t.writer.committed, { inserted: 9, updated: 1, unchanged: 1, deleted: 1 });
    assert.deepEqual(t.written, { pages: 3, records: 6, inserted: 4, updated: 1, unchanged: 1 });
    assert.deepEqual(t.beats, [1, 2, 3]);
  });

  it(`stages at most ${writeDepth} pages at once, and holds back a page sharing a record with one in flight`, async () => {
    const t = setup();
    for (let n = 1; n <= 6; n++) await t.writer.add(t.page(n, { ms: 5 }));
    await t.writer.drained();
    assert.ok(t.mostStaging() <= writeDepth, `at most ${writeDepth} staged (${t.mostStaging()})`);

    const u = setup();
    await u.writer.add(u.page(1, { ms: 30, ids: ['x', 'y'] }));
    await u.writer.add(u.page(2, { ids: ['z', 'x'] }));
    await u.writer.drained();
    assert.deepEqual(u.events, ['stage 1', 'commit 1', 'stage 2', 'commit 2']);
  });

  it('abandons the pages after one that failed, and fails as it did', async () => {
    const t = setup();
    await t.writer.add(t.page(1, { ms: 30, fail: 'commit' }));
    await t.writer.add(t.page(2));
    await t.writer.add(t.page(3));
    await assert.rejects(t.writer.drained(), /commit 1 failed/);
    await t.writer.settled();
    assert.deepEqual(t.events.filter((e) => !e.startsWith('stage')).sort(), ['abandon 2', 'abandon 3']);
    assert.deepEqual(t.checkpoints, []);
    assert.deepEqual(t.writer.committed, base.counts);
  });

  it('stages pages as inserts until one met a record already there', async () => {
    const t = setup(true);
    const asInsert: boolean[] = [];
    await t.writer.add(t.page(1, { conflicted: true, insertOnly: asInsert }));
    await t.writer.drained();
    await t.writer.add(t.page(2, { insertOnly: asInsert }));
    await t.writer.drained();
    assert.deepEqual(asInsert, [true, false]);
  });
});
