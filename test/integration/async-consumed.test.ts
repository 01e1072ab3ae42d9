// Upstream async requests, consumed: the SQL ERP is slow, so its list pages are asked for with
// `Async-Request: true` and polled from the stream's workflow with durable timers (never more often
// than every 5 seconds). A worker stopped while a request is pending resumes polling it, without
// asking again; results that expire are asked for once more, then fail the stream clearly; an async
// request that failed upstream is the error its stored answer says.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { startWorker } from '../../bin/temporal-worker.ts';
import { pollListPage, startListPage } from '../../connectors/operations.ts';
import { UpstreamNotFoundError } from '../../lib/errors.ts';
import { streamWorkflowId } from '../../workflows/shared.ts';
import { eventually, sandboxAdmin, startHarness, upstreamAll, type Harness } from '../helpers/harness.ts';

interface Stats {
  accounts: Record<string, { reference_id: string; by_path: Record<string, number> }>;
}

describe('async requests of a slow source system', { timeout: 300_000 }, () => {
  let h: Harness;

  before(async () => {
    // 1,100 customers: three pages of 500 (the SQL ERP's largest), so three async requests in a row.
    h = await startHarness({ sandbox: { size: 5, sizes: { customers: 1_100 } } });
  });

  after(async () => {
    await h?.close();
  });

  async function countsFor(referenceId: string): Promise<Record<string, number>> {
    const stats = await sandboxAdmin<Stats>(h, 'GET', '/_admin/stats');
    return Object.values(stats.accounts).find((a) => a.reference_id === referenceId)?.by_path ?? {};
  }

  async function timersOf(accountId: string, resource: string): Promise<number[]> {
    const history = await h.temporal.workflow.getHandle(streamWorkflowId(accountId, resource, '')).fetchHistory();
    return (history.events ?? [])
      .filter((e) => e.timerStartedEventAttributes)
      .map((e) => Number(e.timerStartedEventAttributes!.startToFireTimeout!.seconds ?? 0));
  }

  it('mirrors every page through async requests, polled with durable timers of at least 5 s', async () => {
    const { accountId, accountToken } = await h.link('sqlerp', 'erp-async');
    const result = await (await h.sync.start({ accountId, mode: 'full' })).result();
    assert.deepEqual(result.failed, []);

    const upstream = await upstreamAll(h, '/customers', { ...h.upstreamHeaders, 'account-token': accountToken }, 500);
    const { rows } = await h.services.pool.query<{ id: string }>(
      `SELECT id FROM records WHERE account_id = $1 AND resource = 'customers' AND deleted_at IS NULL ORDER BY ordinal`,
      [accountId],
    );
    assert.equal(upstream.length, 1_100);
    assert.deepEqual(
      rows.map((r) => r.id),
      upstream.map((r) => String(r.id)),
    );

    const timers = await timersOf(accountId, 'customers');
    assert.ok(timers.length >= 3, `one timer per page at least, saw ${timers.length}`);
    assert.ok(
      timers.every((s) => s >= 5),
      `never polled sooner than 5 s: ${timers.join(', ')}`,
    );
    const counts = await countsFor('erp-async');
    assert.ok((counts['GET /async-requests/:id'] ?? 0) >= 3, 'the results were read through /async-requests/{id}');
  });

  it('resumes polling a pending request after the worker restarts, without asking again', async () => {
    const { accountId } = await h.link('sqlerp', 'erp-restart');
    const run = await h.sync.start({ accountId, mode: 'full' });
    // Wait for the customers stream to hold a pending async request, then stop the worker.
    const pending = await eventually(
      'a pending async request',
      async () => {
        const { rows } = await h.services.pool.query<{ id: string | null }>(
          `SELECT checkpoint->'pendingAsync'->>'id' AS id FROM streams WHERE account_id = $1 AND resource = 'customers'`,
          [accountId],
        );
        return rows[0]?.id ?? undefined;
      },
      60_000,
      50,
    );
    await h.worker.shutdown();
    h.worker = await startWorker(h.services, { publicBaseUrl: h.apiUrl });
    const result = await run.result();
    assert.deepEqual(result.failed, []);
    assert.equal(result.byResource.customers, 1_100);

    // Each page asked once: the sandbox counts the request and its execution (two per page).
    const counts = await countsFor('erp-restart');
    assert.equal(counts['GET /customers'], 2 * 3, `each of the 3 pages asked for once (pending ${pending} was not sent again)`);
  });

  it('asks once more for results that expired, then fails the stream saying so', async () => {
    await sandboxAdmin(h, 'PUT', '/_admin/storage', { async_result_ttl_ms: 500 });
    try {
      const { accountId } = await h.link('sqlerp', 'erp-expiry');
      const result = await (await h.sync.start({ accountId, mode: 'full' })).result();
      const failed = result.failed.find((f) => f.resource === 'customers');
      assert.ok(failed, `the customers stream failed: ${JSON.stringify(result.failed)}`);
      assert.match(failed.error ?? '', /expired/);
      const counts = await countsFor('erp-expiry');
      assert.equal(counts['GET /customers'], 2 * 2, 'the first page was asked for twice, no more');
    } finally {
      await sandboxAdmin(h, 'PUT', '/_admin/storage', { async_result_ttl_ms: 3_600_000 });
    }
  });

  it('maps a failed async request to the error of its stored answer', async () => {
    const { accountId, accountToken } = await h.link('sqlerp', 'erp-failure');
    const ctx = { accountToken, accountId, sourceSystem: 'sqlerp' };
    const started = await startListPage(h.services.upstream, {
      ...ctx,
      path: '/ap-invoices/no-such-invoice/line-items',
      page: 1,
      perPage: 10,
      preferAsync: true,
    });
    assert.ok(started.pending, 'the upstream accepted the request as async');
    await sleep(5_000);
    await assert.rejects(
      pollListPage(h.services.upstream, { ...ctx, id: started.pending.id, page: 1 }),
      (error: unknown) => error instanceof UpstreamNotFoundError && /async request/.test(error.message),
    );
  });
});
