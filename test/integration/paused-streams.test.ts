// A stream whose pass is under way (`syncing`) when the upstream refuses the account's credentials is
// `paused`, not failed and not left `syncing`: through a stream's own slice and through a sweep of
// small streams alike. The refusal is the sandbox's own (a token revoked at the source), confirmed by
// the mirror's cheap call as in production.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { AccountCredentials } from '../../connectors/credentials.ts';
import { createSyncActivities, type SyncSliceInput } from '../../activities/sync.ts';
import { createLogger } from '../../lib/logger.ts';
import { sandboxAdmin, startHarness, type Harness } from '../helpers/harness.ts';

describe('streams paused while syncing', { timeout: 180_000 }, () => {
  let h: Harness;

  before(async () => {
    // 600 customers: three pages of 200 in crmcloud.
    h = await startHarness({ sandbox: { sizes: { customers: 600 } } });
  });
  after(async () => {
    await h?.close();
  });

  const worker = () =>
    createSyncActivities({
      upstream: h.services.upstream,
      pool: h.services.pool,
      accounts: h.services.accounts,
      logger: createLogger({ level: 'silent' }),
      credentials: new AccountCredentials({ upstream: h.services.upstream, accounts: h.services.accounts }),
    });

  const slice = (accountId: string, passKey: string, maxPages?: number): SyncSliceInput => ({
    accountId,
    resource: 'customers',
    scope: '',
    path: '/customers',
    passKey,
    mode: 'full',
    ...(maxPages === undefined ? {} : { maxPages }),
  });

  async function state(accountId: string): Promise<{ state: string; page: number }> {
    const { rows } = await h.services.pool.query<{ state: string; page: number }>(
      `SELECT state, (checkpoint->>'page')::int AS page FROM streams WHERE account_id = $1 AND resource = 'customers' AND scope = ''`,
      [accountId],
    );
    return rows[0]!;
  }

  /** Links an account and runs the first page of its customers' pass: the stream is `syncing` at page 2. */
  async function syncingAccount(referenceId: string): Promise<{ accountId: string; accountToken: string }> {
    const account = await h.link('crmcloud', referenceId);
    const first = await worker().syncSlice(slice(account.accountId, 'p1', 1));
    assert.equal(first.done, false);
    assert.deepEqual(await state(account.accountId), { state: 'syncing', page: 2 });
    await sandboxAdmin(h, 'POST', '/_admin/accounts/revoke', { account_token: account.accountToken });
    return account;
  }

  it('pauses a stream whose slice is refused mid-pass', async () => {
    const account = await syncingAccount(`paused-slice-${Date.now()}`);
    await assert.rejects(worker().syncSlice(slice(account.accountId, 'p1')), /refuses the account's credentials/);
    assert.equal((await h.services.accounts.status(account.accountId)).status, 'credentials_refused');
    assert.deepEqual(await state(account.accountId), { state: 'paused', page: 2 }, 'paused at its checkpoint');
  });

  it('pauses a stream a sweep was running when refused mid-pass', async () => {
    const account = await syncingAccount(`paused-sweep-${Date.now()}`);
    await assert.rejects(
      worker().sweepScopes({ accountId: account.accountId, passKey: 'p1', mode: 'full', items: [{ resource: 'customers', scope: '', path: '/customers' }] }),
      /refuses the account's credentials/,
    );
    assert.deepEqual(await state(account.accountId), { state: 'paused', page: 2 }, 'paused at its checkpoint');
  });
});
