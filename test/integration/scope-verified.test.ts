// When a scope was last verified upstream (mirror/streams/freshness.ts), on the real Postgres: a list's own
// completed pass, a project's list verified by the list across projects, children by their parent's
// list, whichever is latest; never verified is null.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { listStaleness, scopeLastVerifiedAt, stalenessStats } from '../../mirror/streams/freshness.ts';
import { createPool, type Pool } from '../../mirror/db/pool.ts';
import { createTestDatabase, insertBareAccount, type TestDatabase } from '../helpers/database.ts';

describe('scope last verified', () => {
  let db: TestDatabase;
  let pool: Pool;
  let accountId: string;

  before(async () => {
    db = await createTestDatabase();
    pool = createPool(db.url);
    accountId = await insertBareAccount(pool);
    const rows: [string, string, string | null][] = [
      ['budget-line-items', 'project=1', '2026-11-28T10:00:00Z'],
      ['budget-line-items', 'project=2', '2026-11-28T08:00:00Z'],
      ['rfis', 'project=*', '2026-11-28T11:00:00Z'],
      ['rfis', 'project=1', '2026-11-28T09:00:00Z'],
      ['ap-invoices', '', '2026-11-28T12:00:00Z'],
      ['ap-invoice-line-items', 'ap-invoices=7', '2026-11-28T06:00:00Z'],
      ['vendors', '', null],
    ];
    for (const [resource, scope, at] of rows) {
      await pool.query(`INSERT INTO streams (account_id, resource, scope, state, last_pass_started_at) VALUES ($1, $2, $3, 'synced', $4)`, [
        accountId,
        resource,
        scope,
        at,
      ]);
    }
  });
  after(async () => {
    await pool?.end();
    await db?.drop();
  });

  const at = (resource: string, scope: string) => scopeLastVerifiedAt(pool, { accountId, resource, scope }).then((d) => d?.toISOString() ?? null);

  it("is the start of the list's last completed pass", async () => {
    assert.equal(await at('budget-line-items', 'project=1'), '2026-11-28T10:00:00.000Z');
    assert.equal(await at('budget-line-items', 'project=2'), '2026-11-28T08:00:00.000Z');
  });

  it('counts the list across projects for a project, and the parent list for children, whichever is later', async () => {
    assert.equal(await at('rfis', 'project=1'), '2026-11-28T11:00:00.000Z');
    assert.equal(await at('rfis', 'project=3'), '2026-11-28T11:00:00.000Z');
    assert.equal(await at('ap-invoice-line-items', 'ap-invoices=7'), '2026-11-28T12:00:00.000Z');
  });

  it('is null for a list never verified or unknown', async () => {
    assert.equal(await at('vendors', ''), null);
    assert.equal(await at('budget-line-items', 'project=9'), null);
  });

  it("gives every list's staleness, lists across projects left out", async () => {
    const lists = await listStaleness(pool, { accountId });
    assert.equal(lists.length, 6);
    assert.ok(!lists.some((l) => l.scope === 'project=*'));
    const rfi = lists.find((l) => l.resource === 'rfis')!;
    const bli = lists.find((l) => l.scope === 'project=1' && l.resource === 'budget-line-items')!;
    // Verified an hour later than the budget line items of project 1 (by the list across projects).
    assert.ok(Math.abs(bli.stalenessSeconds! - rfi.stalenessSeconds! - 3600) < 1);
    const stats = stalenessStats(lists.map((l) => l.stalenessSeconds));
    assert.equal(stats.never, 1);
    assert.equal(stats.lists, 6);
    assert.ok(stats.max! >= stats.p95! && stats.p95! >= stats.p50!);
  });
});
