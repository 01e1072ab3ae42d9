// A full pass keeps a page whose body is byte for byte the one the previous pass committed, without
// parsing or writing it, but only while the mirror still holds exactly what that page wrote. These
// cases change the upstream and the mirror between passes and check that the mirror ends equal to the
// upstream every time, and which pages were kept (a kept page keeps the time it was written).
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { markDeleted } from '../../mirror/records/deletes.ts';
import { sandboxAdmin, startHarness, upstreamAll, type Harness } from '../helpers/harness.ts';

const customers = 2_500; // three pages of 1,000

describe('unchanged pages of a full pass', { timeout: 240_000 }, () => {
  let h: Harness;
  let account: { accountId: string; accountToken: string };

  before(async () => {
    h = await startHarness({ sandbox: { sizes: { customers, projects: 1, jobs: 0, appointments: 0 } } });
    account = await h.link('fieldops');
    await pass();
  });
  after(async () => {
    await h?.close();
  });

  async function pass(mode: 'full' | 'incremental' = 'full') {
    const result = await (await h.sync.start({ accountId: account.accountId, mode, resource: 'customers' })).result();
    assert.deepEqual(result.failed, []);
  }

  /** The pages of the stream's latest pass: when each was written, and its ids. */
  async function pages() {
    const { rows } = await h.services.pool.query<{ page: number; generation: number; written_at: Date; ids: string[]; digest: string | null }>(
      `SELECT p.page, p.generation, p.written_at, p.ids, p.digest FROM stream_pages p JOIN streams s ON s.id = p.stream_id
        WHERE s.account_id = $1 AND s.resource = 'customers' AND s.scope = '' AND p.generation = s.generation ORDER BY p.page`,
      [account.accountId],
    );
    return rows;
  }

  async function assertMirrorEqualsUpstream() {
    const upstream = await upstreamAll(h, '/customers', { 'account-token': account.accountToken, 'include-source-data': 'true' });
    const { rows } = await h.services.pool.query<{ data: Record<string, unknown>; source_data: unknown }>(
      `SELECT data, source_data FROM records WHERE account_id = $1 AND resource = 'customers' AND scope = '' AND deleted_at IS NULL ORDER BY ordinal`,
      [account.accountId],
    );
    assert.equal(rows.length, upstream.length);
    assert.deepEqual(
      rows.map((r) => ({ ...r.data, source_data: r.source_data })),
      upstream,
    );
  }

  async function lastRun() {
    const { rows } = await h.services.pool.query<{ inserted: number; updated: number; unchanged: number; deleted: number }>(
      `SELECT r.inserted, r.updated, r.unchanged, r.deleted FROM sync_runs r JOIN streams s ON s.id = r.stream_id
        WHERE s.account_id = $1 AND s.resource = 'customers' AND r.generation = s.generation`,
      [account.accountId],
    );
    return rows[0]!;
  }

  it('keeps every page of an unchanged pass, writing no record', async () => {
    const first = await pages();
    assert.equal(first.length, 3);
    assert.ok(first.every((p) => p.digest !== null));
    const before = await h.services.pool.query<{ max: Date }>(`SELECT max(mirrored_at) AS max FROM records WHERE account_id = $1`, [account.accountId]);
    await pass();
    const second = await pages();
    assert.equal(second[0]!.generation, first[0]!.generation + 1);
    assert.deepEqual(
      second.map((p) => [p.page, p.written_at.getTime(), p.ids]),
      first.map((p) => [p.page, p.written_at.getTime(), p.ids]),
      'every page kept as the first pass wrote it',
    );
    const afterPass = await h.services.pool.query<{ max: Date }>(`SELECT max(mirrored_at) AS max FROM records WHERE account_id = $1`, [account.accountId]);
    assert.equal(afterPass.rows[0]!.max.getTime(), before.rows[0]!.max.getTime());
    assert.deepEqual(await lastRun(), { inserted: 0, updated: 0, unchanged: customers, deleted: 0 });
    await assertMirrorEqualsUpstream();
  });

  it('writes a page again when one of its records was marked deleted in the mirror meanwhile', async () => {
    const before = await pages();
    const victim = before[1]!.ids[10]!;
    // As a DELETE event would (the upstream still lists it, unchanged).
    await markDeleted(h.services.pool, { accountId: account.accountId, resource: 'customers', scope: '' }, [victim]);
    await pass();
    const after = await pages();
    assert.equal(after[0]!.written_at.getTime(), before[0]!.written_at.getTime(), 'page 1 kept');
    assert.ok(after[1]!.written_at > before[1]!.written_at, 'page 2 written again');
    assert.equal(after[2]!.written_at.getTime(), before[2]!.written_at.getTime(), 'page 3 kept');
    const { rows } = await h.services.pool.query<{ deleted_at: Date | null }>(
      `SELECT deleted_at FROM records WHERE account_id = $1 AND resource = 'customers' AND scope = '' AND id = $2`,
      [account.accountId, victim],
    );
    assert.equal(rows[0]!.deleted_at, null, 'the upstream still lists it: live again');
    await assertMirrorEqualsUpstream();
  });

  it('writes the page of a record changed upstream, and marks a record deleted upstream deleted', async () => {
    const before = await pages();
    const changed = before[2]!.ids[5]!;
    const removed = before[2]!.ids[7]!;
    await sandboxAdmin(h, 'PATCH', '/_admin/objects', {
      account_token: account.accountToken,
      resource: 'customers',
      id: changed,
      patch: { name: 'Changed between passes' },
    });
    await sandboxAdmin(h, 'DELETE', '/_admin/objects', { account_token: account.accountToken, resource: 'customers', id: removed });
    await pass();
    const after = await pages();
    assert.equal(after[0]!.written_at.getTime(), before[0]!.written_at.getTime(), 'page 1 kept');
    assert.equal(after[1]!.written_at.getTime(), before[1]!.written_at.getTime(), 'page 2 kept');
    assert.ok(after[2]!.written_at > before[2]!.written_at, 'page 3 written');
    const run = await lastRun();
    assert.equal(run.updated, 1);
    assert.equal(run.deleted, 1);
    assert.equal(run.unchanged, customers - 2);
    await assertMirrorEqualsUpstream();
  });

  it('an incremental pass leaves changed records where the upstream lists them', async () => {
    // The changes come as a short list filtered on update time; their places are those of the whole list.
    const before = await pages();
    const changed = [before[1]!.ids[300]!, before[2]!.ids[40]!];
    for (const id of changed) {
      await sandboxAdmin(h, 'PATCH', '/_admin/objects', {
        account_token: account.accountToken,
        resource: 'customers',
        id,
        patch: { name: 'Changed before an incremental pass' },
      });
    }
    await pass('incremental');
    const { rows } = await h.services.pool.query<{ name: string }>(
      `SELECT data->>'name' AS name FROM records WHERE account_id = $1 AND resource = 'customers' AND scope = '' AND id = ANY($2::text[])`,
      [account.accountId, changed],
    );
    assert.deepEqual(
      rows.map((r) => r.name),
      changed.map(() => 'Changed before an incremental pass'),
      'the incremental pass wrote the changes',
    );
    await assertMirrorEqualsUpstream();
  });
});
