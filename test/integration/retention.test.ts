// Retention: history past its setting goes (tombstones, finished passes, applied webhook events, the
// storage access log), in batches; what a subscription has not passed, live records, each stream's
// latest pass, pending events and every other account's rows stay exactly as they were. An unlinked
// account's data goes in batches too, and linking it again stops its purge. The tombstones' purge reads
// only tombstones (its plan, at 200k records).
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { after, before, describe, it } from 'node:test';
import { createPool, type Pool } from '../../mirror/db/pool.ts';
import { purgeExpired, purgeUnlinkedAccount, tombstonesBatch, type RetentionPolicy } from '../../mirror/ops/retention.ts';
import { createTestDatabase, insertBareAccount, type TestDatabase } from '../helpers/database.ts';

const day = 86_400_000;
const policy: RetentionPolicy = { tombstonesMs: 30 * day, runsMs: 30 * day, logsMs: 30 * day, afterUnlinkMs: 30 * day };
const daysAgo = (n: number) => new Date(Date.now() - n * day);

describe('retention', () => {
  let db: TestDatabase;
  let pool: Pool;
  /** No subscription: its old history goes. */
  let a: string;
  /** Subscribed to its records' changes and to completed passes, cursors 90 days back: its history stays. */
  let b: string;
  /** Only recent history: nothing of it goes. */
  let c: string;

  async function seed(accountId: string, opts: { oldTombstones: number; recentTombstones: number; live: number; oldRunsDays: number; oldLogs?: boolean }) {
    const { rows } = await pool.query<{ id: string }>(
      `INSERT INTO streams (account_id, resource, scope, state, generation, updated_at) VALUES ($1, 'customers', '', 'synced', 3, now()) RETURNING id::text`,
      [accountId],
    );
    const streamId = rows[0]!.id;
    const record = async (id: string, mirroredAt: Date, deleted: boolean) =>
      pool.query(
        `INSERT INTO records (account_id, resource, scope, id, data, hash, generation, ordinal, first_seen_at, mirrored_at, deleted_at)
         VALUES ($1, 'customers', '', $2, '{}'::jsonb, $3, 1, 0, $4, $4, $5)`,
        [accountId, id, randomUUID(), mirroredAt, deleted ? mirroredAt : null],
      );
    for (let i = 0; i < opts.live; i++) await record(`live-${i}`, daysAgo(200), false);
    for (let i = 0; i < opts.oldTombstones; i++) await record(`old-${i}`, daysAgo(60 + i / 10), true);
    for (let i = 0; i < opts.recentTombstones; i++) await record(`recent-${i}`, daysAgo(1), true);
    for (const generation of [1, 2, 3])
      await pool.query(`INSERT INTO sync_runs (stream_id, generation, mode, status, started_at, finished_at) VALUES ($1, $2, 'full', 'succeeded', $3, $3)`, [
        streamId,
        generation,
        daysAgo(opts.oldRunsDays - generation),
      ]);
    const inbox = async (appliedAt: Date | null, receivedAt: Date) =>
      pool.query(
        `INSERT INTO inbox_events (account_id, dedupe_key, event, type, target, body, received_at, applied_at) VALUES ($1, $2, 'UPDATE', 'customer', 'x', '{}', $3, $4)`,
        [accountId, randomUUID().replace(/-/g, '').padEnd(64, '0'), receivedAt, appliedAt],
      );
    const old = opts.oldLogs === false ? 0 : 1;
    await inbox(daysAgo(60 * old + 1), daysAgo(60 * old + 1));
    await inbox(daysAgo(59 * old + 1), daysAgo(59 * old + 1));
    await inbox(null, daysAgo(60)); // pending: never purged
    await inbox(daysAgo(1), daysAgo(1));
    for (const at of [daysAgo(60 * old + 1), daysAgo(45 * old + 1), daysAgo(2)])
      await pool.query(
        `INSERT INTO storage_accesses (account_id, resource, scope, record_id, field, status, at) VALUES ($1, 'files', '', 'f', 'url', 200, $2)`,
        [accountId, at],
      );
  }

  /** Rows per table of one account, each kind apart. */
  async function counts(accountId: string): Promise<Record<string, number>> {
    const q = async (sql: string) => (await pool.query<{ n: number }>(sql, [accountId])).rows[0]!.n;
    return {
      live: await q(`SELECT count(*)::int AS n FROM records WHERE account_id = $1 AND deleted_at IS NULL`),
      tombstones: await q(`SELECT count(*)::int AS n FROM records WHERE account_id = $1 AND deleted_at IS NOT NULL`),
      runs: await q(`SELECT count(*)::int AS n FROM sync_runs r JOIN streams s ON s.id = r.stream_id WHERE s.account_id = $1`),
      streams: await q(`SELECT count(*)::int AS n FROM streams WHERE account_id = $1`),
      inbox: await q(`SELECT count(*)::int AS n FROM inbox_events WHERE account_id = $1`),
      pending: await q(`SELECT count(*)::int AS n FROM inbox_events WHERE account_id = $1 AND applied_at IS NULL`),
      accesses: await q(`SELECT count(*)::int AS n FROM storage_accesses WHERE account_id = $1`),
      subscriptions: await q(`SELECT count(*)::int AS n FROM subscriptions WHERE account_id = $1`),
    };
  }

  before(async () => {
    db = await createTestDatabase('mirror_retention');
    pool = createPool(db.url);
    [a, b, c] = [await insertBareAccount(pool), await insertBareAccount(pool), await insertBareAccount(pool)];
    await seed(a, { oldTombstones: 12, recentTombstones: 3, live: 7, oldRunsDays: 60 });
    await seed(b, { oldTombstones: 12, recentTombstones: 3, live: 7, oldRunsDays: 60 });
    await seed(c, { oldTombstones: 0, recentTombstones: 2, live: 5, oldRunsDays: 5, oldLogs: false });
    for (const event of ['*', 'SYNCED'])
      await pool.query(
        `INSERT INTO subscriptions (id, account_id, callback_url, event, type, cursor_at) VALUES ($1, $2, 'https://example.com/hook', $3, 'customer', $4)`,
        [randomUUID(), b, event, daysAgo(90)],
      );
  });
  after(async () => {
    await pool?.end();
    await db?.drop();
  });

  it('a dry run counts what would go and removes nothing', async () => {
    const [beforeA, beforeB, beforeC] = [await counts(a), await counts(b), await counts(c)];
    const would = await purgeExpired(pool, policy, { dryRun: true });
    // Account a: 12 old tombstones, its stream's two older passes, two applied events, two old accesses.
    // Account b: the same accesses and applied events (no subscription follows those); tombstones and passes stay.
    assert.deepEqual(would, { tombstones: 12, syncRuns: 2, inboxEvents: 4, storageAccesses: 4, asyncRequests: 0, unlinkedAccounts: [] });
    assert.deepEqual([await counts(a), await counts(b), await counts(c)], [beforeA, beforeB, beforeC]);
  });

  it('purges in batches only what is past its retention and passed by every subscription', async () => {
    const [beforeA, beforeB, beforeC] = [await counts(a), await counts(b), await counts(c)];
    const done = await purgeExpired(pool, policy, { batch: 5 });
    assert.deepEqual(done, { tombstones: 12, syncRuns: 2, inboxEvents: 4, storageAccesses: 4, asyncRequests: 0, unlinkedAccounts: [] });
    assert.deepEqual(await counts(a), { ...beforeA, tombstones: 3, runs: 1, inbox: 2, accesses: 1 });
    assert.deepEqual(await counts(b), { ...beforeB, inbox: 2, accesses: 1 }, "a subscriber's undelivered tombstones and passes stay");
    assert.deepEqual(await counts(c), beforeC, 'an account with only recent history is untouched');
    // The latest pass of a's stream stays whatever its age.
    const { rows } = await pool.query<{ generation: number }>(
      `SELECT r.generation FROM sync_runs r JOIN streams s ON s.id = r.stream_id WHERE s.account_id = $1`,
      [a],
    );
    assert.deepEqual(
      rows.map((r) => r.generation),
      [3],
    );
    assert.deepEqual(await purgeExpired(pool, policy, { dryRun: true }), {
      tombstones: 0,
      syncRuns: 0,
      inboxEvents: 0,
      storageAccesses: 0,
      asyncRequests: 0,
      unlinkedAccounts: [],
    });
  });

  it('once the subscriptions have passed them, their history goes too', async () => {
    await pool.query(`UPDATE subscriptions SET cursor_at = $2 WHERE account_id = $1`, [b, daysAgo(40)]);
    const done = await purgeExpired(pool, policy);
    assert.equal(done.tombstones, 12);
    assert.equal(done.syncRuns, 2);
  });

  it('purges an account unlinked past its retention whose purge never ran, and no other', async () => {
    const gone = await insertBareAccount(pool);
    await seed(gone, { oldTombstones: 1, recentTombstones: 1, live: 3, oldRunsDays: 1, oldLogs: false });
    await pool.query(`UPDATE linked_accounts SET status = 'unlinked', unlinked_at = $2 WHERE id = $1`, [gone, daysAgo(31)]);
    const recent = await insertBareAccount(pool);
    await seed(recent, { oldTombstones: 0, recentTombstones: 1, live: 3, oldRunsDays: 1, oldLogs: false });
    await pool.query(`UPDATE linked_accounts SET status = 'unlinked', unlinked_at = $2 WHERE id = $1`, [recent, daysAgo(2)]);
    const [beforeA, beforeB, beforeC, beforeRecent] = [await counts(a), await counts(b), await counts(c), await counts(recent)];
    assert.deepEqual((await purgeExpired(pool, policy, { dryRun: true })).unlinkedAccounts, [gone]);
    assert.deepEqual((await purgeExpired(pool, policy)).unlinkedAccounts, [gone]);
    assert.equal((await counts(gone)).live, 0);
    assert.deepEqual([await counts(a), await counts(b), await counts(c), await counts(recent)], [beforeA, beforeB, beforeC, beforeRecent]);
  });

  it("purges an unlinked account's data a batch a transaction, and stops once the account is linked again", async () => {
    const gone = await insertBareAccount(pool);
    await pool.query(`UPDATE linked_accounts SET status = 'unlinked', unlinked_at = now() WHERE id = $1`, [gone]);
    const ids = Array.from({ length: 30 }, (_, i) => `r${String(i).padStart(2, '0')}`);
    await pool.query(
      `INSERT INTO records (account_id, resource, scope, id, data, hash, generation, ordinal, first_seen_at, mirrored_at)
       SELECT $1, 'customers', '', id, '{}'::jsonb, md5(id)::uuid, 1, 0, now(), now() FROM unnest($2::text[]) AS id`,
      [gone, ids],
    );
    const remaining = async () => (await pool.query<{ n: number }>(`SELECT count(*)::int AS n FROM records WHERE account_id = $1`, [gone])).rows[0]!.n;
    // Another transaction holds r20: the purge (5 a batch, in key order) waits at the batch that holds it.
    const holder = await pool.connect();
    const relinker = await pool.connect();
    try {
      await holder.query('BEGIN');
      await holder.query(`SELECT 1 FROM records WHERE account_id = $1 AND resource = 'customers' AND id = 'r20' FOR UPDATE`, [gone]);
      const purge = purgeUnlinkedAccount(pool, gone, { batch: 5 });
      const until = Date.now() + 10_000;
      while ((await remaining()) > 10 && Date.now() < until) await new Promise((resolve) => setTimeout(resolve, 20));
      assert.equal(await remaining(), 10, 'the batches before the held row are committed while it waits');
      // Linked again meanwhile: the link waits for the batch under way, and the purge stops after it.
      const relinked = relinker.query(`UPDATE linked_accounts SET status = 'linked', unlinked_at = NULL WHERE id = $1`, [gone]);
      const queued = Date.now() + 10_000;
      const waiting = async () =>
        (
          await pool.query<{ n: number }>(
            `SELECT count(*)::int AS n FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query LIKE 'UPDATE linked_accounts SET status = ''linked''%'`,
          )
        ).rows[0]!.n;
      while ((await waiting()) === 0 && Date.now() < queued) await new Promise((resolve) => setTimeout(resolve, 20));
      await holder.query('ROLLBACK');
      await relinked;
      assert.equal(await purge, null, 'the purge stopped: the account is linked');
      assert.equal(await remaining(), 5, 'the batch under way went; nothing after it');
      const { rows } = await pool.query<{ status: string; purged_at: Date | null }>('SELECT status, purged_at FROM linked_accounts WHERE id = $1', [gone]);
      assert.deepEqual(rows[0], { status: 'linked', purged_at: null });
    } finally {
      await holder.query('ROLLBACK').catch(() => undefined);
      holder.release();
      relinker.release();
    }
  });

  it('reads only tombstones to purge them, not the live records between them (200k records)', async () => {
    const big = await insertBareAccount(pool);
    // 199,000 live records and 1,000 tombstones, mirrored over the same 100 days, in one resource.
    await pool.query(
      `INSERT INTO records (account_id, resource, scope, id, data, hash, generation, ordinal, first_seen_at, mirrored_at, deleted_at)
       SELECT $1, 'customers', '', 'c' || n, '{}'::jsonb, md5(n::text)::uuid, 1, n, now(), now() - (n % 100) * interval '1 day' - n * interval '1 second',
              CASE WHEN n % 200 = 0 THEN now() - interval '1 day' END
         FROM generate_series(1, 200000) AS n`,
      [big],
    );
    await pool.query('ANALYZE records');
    const { rows } = await pool.query<{ 'QUERY PLAN': [{ Plan: PlanNode }] }>(`EXPLAIN (ANALYZE, FORMAT JSON) ${tombstonesBatch}`, [
      big,
      'customers',
      new Date(0),
      new Date(),
      new Date(),
      5000,
    ]);
    const plan = rows[0]!['QUERY PLAN'][0].Plan;
    const nodes = flatten(plan);
    const read = nodes.reduce((n, p) => n + (p['Rows Removed by Filter'] ?? 0) + (p['Rows Removed by Index Recheck'] ?? 0), 0);
    const scans = nodes.filter((p) => p['Relation Name'] !== undefined).map((p) => `${p['Node Type']} ${p['Index Name'] ?? ''}`.trim());
    console.log('tombstones purge plan at 200k records:', scans.join(', '), `rows read and dropped: ${read}, rows: ${plan['Actual Rows']}`);
    assert.equal(plan['Actual Rows'], 1000, 'every tombstone');
    assert.ok(read <= 100, `the plan reads ${read} rows it does not take (live records): ${scans.join(', ')}`);
    assert.ok(
      scans.every((s) => s.includes('tombstones_idx')),
      `read through the index of tombstones: ${scans.join(', ')}`,
    );
  });
});

interface PlanNode {
  'Node Type': string;
  'Relation Name'?: string;
  'Index Name'?: string;
  'Actual Rows': number;
  'Rows Removed by Filter'?: number;
  'Rows Removed by Index Recheck'?: number;
  Plans?: PlanNode[];
}

function flatten(p: PlanNode): PlanNode[] {
  return [p, ...(p.Plans ?? []).flatMap(flatten)];
}
