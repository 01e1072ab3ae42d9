// Security: a page that repeats an earlier page of its pass stops the pass,
// also when the earlier page was committed before a resume in another worker (whose memory holds
// nothing of the pass). Two activity instances stand for two workers: the first commits pages 1 and
// 2 of a stream whose upstream pages cycle (1, 2, 1, 2, ...), the second resumes at page 3. A full
// pass knows its pages again from stream_pages, an incremental one from its checkpoint.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { createSyncActivities, type SyncSliceInput } from '../../activities/sync.ts';
import { createLogger } from '../../lib/logger.ts';
import { sandboxAdmin, startHarness, type Harness } from '../helpers/harness.ts';

describe('page repeats across a resume', { timeout: 240_000 }, () => {
  let h: Harness;

  before(async () => {
    // 1200 customers: six pages of 200 in crmcloud, three of 500 in sqlerp (which answers has_more_results null).
    h = await startHarness({ sandbox: { sizes: { customers: 1200 } } });
  });
  after(async () => {
    await h?.close();
  });

  /** A new worker's sync activities (nothing of any pass in memory). */
  const worker = () =>
    createSyncActivities({ upstream: h.services.upstream, pool: h.services.pool, accounts: h.services.accounts, logger: createLogger({ level: 'silent' }) });

  async function checkpointOf(accountId: string): Promise<{ page: number; mode: string; pageFingerprints?: string[] }> {
    const { rows } = await h.services.pool.query<{ checkpoint: { page: number; mode: string; pageFingerprints?: string[] } }>(
      `SELECT checkpoint FROM streams WHERE account_id = $1 AND resource = 'customers' AND scope = ''`,
      [accountId],
    );
    return rows[0]!.checkpoint;
  }

  async function resumedPassStops(sourceSystem: string, mode: 'full' | 'incremental'): Promise<{ page: number; pageFingerprints?: string[] }> {
    const account = await h.link(sourceSystem);
    // A clean pass first: an incremental pass needs one before it; a full one then has pages to delete.
    const clean = await (await h.sync.start({ accountId: account.accountId, mode: 'full', resource: 'customers' })).result();
    assert.deepEqual(clean.failed, []);
    const fault = await sandboxAdmin<{ id: string }>(h, 'POST', '/_admin/faults', {
      kind: 'alternating-pages',
      match: { path: '^/customers\\?page=', source_system: sourceSystem },
    });
    try {
      const slice: SyncSliceInput = {
        accountId: account.accountId,
        resource: 'customers',
        scope: '',
        path: '/customers',
        passKey: `${mode}-${sourceSystem}`,
        mode,
        maxPages: 2,
      };
      const first = await worker().syncSlice(slice);
      assert.equal(first.done, false);
      assert.equal(first.pages, 2);
      const committed = await checkpointOf(account.accountId);
      assert.equal(committed.page, 3);
      assert.equal(committed.mode, mode);
      await assert.rejects(worker().syncSlice(slice), (error: Error) => {
        assert.match(error.message, /customers page 3 repeats page 1/);
        return true;
      });
      const { rows } = await h.services.pool.query<{ state: string; last_error: string; deleted: number }>(
        `SELECT s.state, s.last_error, (SELECT count(*)::int FROM records r WHERE r.account_id = s.account_id AND r.deleted_at IS NOT NULL) AS deleted
           FROM streams s WHERE s.account_id = $1 AND s.resource = 'customers'`,
        [account.accountId],
      );
      assert.equal(rows[0]!.state, 'failed');
      assert.match(rows[0]!.last_error, /repeats page 1/);
      assert.equal(rows[0]!.deleted, 0, 'nothing was marked deleted');
      return committed;
    } finally {
      await sandboxAdmin(h, 'DELETE', `/_admin/faults/${fault.id}`).catch(() => undefined);
    }
  }

  it('a full pass knows the pages it committed before a resume (stream_pages)', async () => {
    const committed = await resumedPassStops('crmcloud', 'full');
    assert.equal(committed.pageFingerprints, undefined, 'a full pass keeps no fingerprints in its checkpoint');
  });

  it('an incremental pass knows them from its checkpoint', async () => {
    const committed = await resumedPassStops('sqlerp', 'incremental');
    assert.equal(committed.pageFingerprints?.length, 2, 'one stored fingerprint per committed page');
  });
});
