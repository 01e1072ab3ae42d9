// Retention: history past its setting goes (tombstones, finished passes, applied webhook events, the
// storage access log), in batches; what a subscription has not passed, live records, each stream's
// latest pass, pending events and every other account's rows stay exactly as they were.
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { after, before, describe, it } from 'node:test';
import { createPool, type Pool } from '../../mirror/db/pool.ts';
import { purgeExpired, type RetentionPolicy } from '../../mirror/ops/retention.ts';
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
});
