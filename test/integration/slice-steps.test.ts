// The slice loop driven page by page (activities/sync-slice.ts: SliceRunner.open gives the loop, each
// `step` takes, judges and writes one page): a pass of three full pages steps through them, confirms
// the end with one more page and is done with every record; a page that comes back as the page
// before it throws from its own step (the failure the stall guard counts), before anything is written
// for it. Real Postgres and the sandbox upstream.
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { after, before, describe, it } from 'node:test';
import { SliceRunner } from '../../activities/sync-slice.ts';
import { SamePageError } from '../../lib/errors.ts';
import { createLogger } from '../../lib/logger.ts';
import { sandboxAdmin, startHarness, type Harness } from '../helpers/harness.ts';

describe('the slice loop, step by step', { timeout: 240_000 }, () => {
  let h: Harness;

  before(async () => {
    // 600 customers: three full pages of 200 in crmcloud.
    h = await startHarness({ sandbox: { sizes: { customers: 600 } } });
  });
  after(async () => {
    await h?.close();
  });

  const runner = () =>
    new SliceRunner({
      upstream: h.services.upstream,
      pool: h.services.pool,
      accounts: h.services.accounts,
      logger: createLogger({ level: 'silent' }),
      pageBound: 100,
    });

  async function open(referenceId: string) {
    const { accountId } = await h.link('crmcloud', referenceId);
    const input = { accountId, resource: 'customers', scope: '', path: '/customers', passKey: randomUUID(), mode: 'full' as const };
    const loop = await runner().open(input, { accountId, resource: 'customers', scope: '' });
    assert.ok('step' in loop, 'a pass not done yet opens a loop');
    return { accountId, input, loop };
  }

  it('steps through three full pages, confirms the end with a fourth, and is done with every record', async () => {
    const { accountId, input, loop } = await open(`steps-${Date.now()}`);
    for (const n of [0, 1, 2]) assert.equal(await loop.step(n), undefined, `page ${n + 1} does not end the slice`);
    const end = await loop.step(3);
    assert.equal(end?.done, true, 'the empty fourth page confirms the end');
    assert.equal(end?.records, 600);
    const { rows } = await h.services.pool.query<{ n: number }>(`SELECT count(*)::int AS n FROM records WHERE account_id = $1 AND resource = 'customers'`, [
      accountId,
    ]);
    assert.equal(rows[0]!.n, 600);
    const again = await runner().open(input, { accountId, resource: 'customers', scope: '' });
    assert.ok(!('step' in again) && again.done, 'the pass is done: no loop to run');
  });

  it('throws from the step of a page that comes back as the page before it', async () => {
    const fault = await sandboxAdmin<{ id: string }>(h, 'POST', '/_admin/faults/stall', { resource: 'customers', page: 2, mode: 'same-page' });
    try {
      const { loop } = await open(`steps-same-${Date.now()}`);
      assert.equal(await loop.step(0), undefined);
      await assert.rejects(loop.step(1), SamePageError);
    } finally {
      await sandboxAdmin(h, 'DELETE', `/_admin/faults/${fault.id}`).catch(() => undefined);
    }
  });
});
