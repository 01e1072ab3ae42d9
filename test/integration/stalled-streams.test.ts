// Stalled passes at the activity: attempts that leave a stream's checkpoint where it was are counted,
// retried while they are few, and make the stream `stalled` at MIRROR_STALL_ATTEMPTS or once the
// checkpoint has not moved for MIRROR_STALL_AFTER; a stalled stream asks the upstream nothing until
// its backoff ends. Two activity instances stand for two workers (nothing of the count is in memory).
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { stallKindOf } from '../../activities/stalls.ts';
import { createSyncActivities, type SyncSliceInput } from '../../activities/sync.ts';
import { RepeatedPageError, SamePageError, UpstreamError, UpstreamUnavailableError } from '../../lib/errors.ts';
import { createLogger } from '../../lib/logger.ts';
import { retryStalledNow, type StallPolicy } from '../../mirror/streams/stalls.ts';
import { sandboxAdmin, startHarness, type Harness } from '../helpers/harness.ts';

describe('stalled streams', { timeout: 240_000 }, () => {
  let h: Harness;

  before(async () => {
    // 600 customers: three pages of 200 in crmcloud.
    h = await startHarness({ sandbox: { sizes: { customers: 600 } } });
  });
  after(async () => {
    await h?.close();
  });

  const worker = (stalls: StallPolicy) =>
    createSyncActivities({
      upstream: h.services.upstream,
      pool: h.services.pool,
      accounts: h.services.accounts,
      logger: createLogger({ level: 'silent' }),
      stalls,
    });

  async function row(accountId: string) {
    const { rows } = await h.services.pool.query<{
      state: string;
      stall_attempts: number;
      stalls: number;
      stall_reason: string | null;
      stall_retry_at: Date | null;
    }>(`SELECT state, stall_attempts, stalls, stall_reason, stall_retry_at FROM streams WHERE account_id = $1 AND resource = 'customers' AND scope = ''`, [
      accountId,
    ]);
    return rows[0]!;
  }

  async function served(referenceId: string): Promise<number> {
    const stats = await sandboxAdmin<{ accounts: Record<string, { reference_id: string; by_path: Record<string, number> }> }>(h, 'GET', '/_admin/stats');
    return Object.values(stats.accounts).find((a) => a.reference_id === referenceId)?.by_path['GET /customers'] ?? 0;
  }

  const slice = (accountId: string, passKey: string): SyncSliceInput => ({
    accountId,
    resource: 'customers',
    scope: '',
    path: '/customers',
    passKey,
    mode: 'full',
  });

  it('names the failures that leave a checkpoint where it is', () => {
    assert.equal(stallKindOf(new SamePageError('page 3 is page 2')), 'same-page');
    const headers = Object.assign(new Error('Headers Timeout Error'), { code: 'UND_ERR_HEADERS_TIMEOUT' });
    assert.equal(stallKindOf(new UpstreamError('Upstream could not be reached', undefined, { cause: headers })), 'timeout');
    assert.equal(stallKindOf(new UpstreamUnavailableError('gateway timeout', 504)), 'timeout');
    assert.equal(stallKindOf(new UpstreamUnavailableError('unavailable', 503)), undefined, 'an outage is retried, not a stall');
    assert.equal(stallKindOf(new RepeatedPageError('page 3 repeats page 1')), undefined, 'paging that loops fails');
    assert.equal(stallKindOf(new Error('boom')), undefined);
  });

  it('counts attempts at one checkpoint across workers, stalls at the count, then asks nothing until the backoff ends', async () => {
    const referenceId = `stall-count-${Date.now()}`;
    const account = await h.link('crmcloud', referenceId);
    const fault = await sandboxAdmin<{ id: string }>(h, 'POST', '/_admin/faults/stall', { resource: 'customers', page: 2, mode: 'same-page' });
    const policy = { attempts: 3, afterMs: 3_600_000, backoffMs: 2_000, backoffMaxMs: 8_000 };
    try {
      for (const n of [1, 2]) {
        await assert.rejects(worker(policy).syncSlice(slice(account.accountId, 'p1')), (error: Error) => {
          assert.match(error.message, new RegExp(`same page twice .*attempt ${n} at this checkpoint; stalled after 3`));
          return true;
        });
        const r = await row(account.accountId);
        assert.notEqual(r.state, 'failed', 'an attempt short of the stall does not fail the stream');
        assert.equal(r.stall_attempts, n);
      }
      const stalled = await worker(policy).syncSlice(slice(account.accountId, 'p1'));
      assert.equal(stalled.done, true);
      assert.match((stalled as { stalled?: string }).stalled ?? '', /same page returned 3 times: customers page 2 came back as page 1 again/);
      let r = await row(account.accountId);
      assert.deepEqual([r.state, r.stalls], ['stalled', 1]);

      // Another pass within the backoff asks nothing.
      const before = await served(referenceId);
      const skipped = await worker(policy).syncSlice(slice(account.accountId, 'p2'));
      assert.match((skipped as { stalled?: string }).stalled ?? '', /tried again after/);
      // A sweep that holds it says so too: stalled (which, and why), not failed.
      const swept = await worker(policy).sweepScopes({
        accountId: account.accountId,
        passKey: 'p2',
        mode: 'full',
        items: [{ resource: 'customers', scope: '', path: '/customers' }],
      });
      assert.deepEqual(swept.failed, []);
      assert.deepEqual(
        swept.stalled?.map((s) => [s.resource, s.scope]),
        [['customers', '']],
      );
      assert.match(swept.stalled[0]!.reason, /same page returned 3 times: customers page 2 came back as page 1 again; tried again after/);
      assert.equal(await served(referenceId), before, 'no request within the backoff');

      // After it: one attempt, resumed at page 2 (the other pass takes it over), stalled again, the backoff doubled.
      await sleep(Math.max(0, r.stall_retry_at!.getTime() - Date.now()) + 100);
      const again = await worker(policy).syncSlice(slice(account.accountId, 'p2'));
      assert.ok((again as { stalled?: string }).stalled);
      assert.equal((await served(referenceId)) - before, 1, 'page 2 once');
      r = await row(account.accountId);
      assert.deepEqual([r.state, r.stalls, r.stall_attempts], ['stalled', 2, 4]);
      assert.ok(r.stall_retry_at!.getTime() - Date.now() > 2_000, 'the backoff doubled');

      // The page moves: the next try completes the pass, and the stall is gone.
      await sandboxAdmin(h, 'DELETE', `/_admin/faults/${fault.id}`);
      await sleep(Math.max(0, r.stall_retry_at!.getTime() - Date.now()) + 100);
      let done = await worker(policy).syncSlice(slice(account.accountId, 'p3'));
      while (!done.done) done = await worker(policy).syncSlice(slice(account.accountId, 'p3'));
      r = await row(account.accountId);
      assert.deepEqual([r.state, r.stalls, r.stall_attempts, r.stall_reason], ['synced', 0, 0, null]);
      const { rows } = await h.services.pool.query<{ event: string; resource: string }>(
        `SELECT event, resource FROM account_events WHERE account_id = $1 ORDER BY id`,
        [account.accountId],
      );
      assert.deepEqual(
        rows.map((e) => [e.event, e.resource]),
        [
          ['stream.stalled', 'customers'],
          ['stream.recovered', 'customers'],
        ],
      );
      const { rows: records } = await h.services.pool.query<{ n: number }>(
        `SELECT count(*)::int AS n FROM records WHERE account_id = $1 AND resource = 'customers' AND deleted_at IS NULL`,
        [account.accountId],
      );
      assert.equal(records[0]!.n, 600);
    } finally {
      await sandboxAdmin(h, 'DELETE', `/_admin/faults/${fault.id}`).catch(() => undefined);
    }
  });

  it('stalls once the checkpoint has not moved for MIRROR_STALL_AFTER, whatever the count; a pass an operator starts tries it at once', async () => {
    const referenceId = `stall-time-${Date.now()}`;
    const account = await h.link('crmcloud', referenceId);
    const fault = await sandboxAdmin<{ id: string }>(h, 'POST', '/_admin/faults/stall', { resource: 'customers', page: 3, mode: 'same-page' });
    const policy = { attempts: 8, afterMs: 1_500, backoffMs: 60_000, backoffMaxMs: 60_000 };
    try {
      await assert.rejects(worker(policy).syncSlice(slice(account.accountId, 'p1')), /attempt 1 at this checkpoint/);
      assert.equal((await row(account.accountId)).state, 'syncing');
      await sleep(1_600);
      const stalled = await worker(policy).syncSlice(slice(account.accountId, 'p1'));
      assert.match((stalled as { stalled?: string }).stalled ?? '', /same page returned 2 times: customers page 3/);
      assert.equal((await row(account.accountId)).state, 'stalled');
      const before = await served(referenceId);
      await worker(policy).syncSlice(slice(account.accountId, 'p2'));
      assert.equal(await served(referenceId), before, 'within the backoff (a minute): nothing asked');
      assert.equal(await retryStalledNow(h.services.pool, { accountId: account.accountId, resource: 'customers' }), 1);
      await worker(policy).syncSlice(slice(account.accountId, 'p2'));
      assert.equal((await served(referenceId)) - before, 1, 'tried at once: page 3 asked again');
    } finally {
      await sandboxAdmin(h, 'DELETE', `/_admin/faults/${fault.id}`).catch(() => undefined);
    }
  });
});
