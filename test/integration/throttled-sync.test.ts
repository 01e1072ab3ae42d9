// A throttled source system, end to end: the sandbox enforces short rate-limit windows (2 s, 10
// requests per window for CRM Cloud), the mirror's governor learns them from the headers, and a
// sync in steady state (the budget known) trips no 429, with one worker and with two worker
// processes sharing the account's budget through Postgres. The sandbox counts what it answered.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { createServices, type Services } from '../../bin/services.ts';
import { startWorker, type WorkerHandle } from '../../bin/temporal-worker.ts';
import { sandboxAdmin, startHarness, type Harness } from '../helpers/harness.ts';

interface Counter {
  requests: number;
  rate_limited: number;
  peak_in_flight: number;
}
interface Stats {
  accounts: Record<string, Counter & { reference_id: string }>;
}

const limit = 10;
const windowMs = 2_000;

describe('a sync of a throttled source system', { timeout: 300_000 }, () => {
  let h: Harness;
  let accountId: string;
  let second: { services: Services; worker: WorkerHandle } | undefined;

  before(async () => {
    h = await startHarness({
      sandbox: {
        size: 20,
        // 20 + 10 pages of 200 plus the other lists: several windows' worth of requests.
        sizes: { customers: 4_000, leads: 2_000 },
        rateLimits: { windowMs, accountLimit: 1_000, sourceSystemLimits: { crmcloud: limit } },
      },
    });
    ({ accountId } = await h.link('crmcloud', 'throttled'));
  });

  after(async () => {
    await second?.worker.shutdown();
    await second?.services.close();
    await h?.close();
  });

  async function counted(): Promise<Counter> {
    const stats = await sandboxAdmin<Stats>(h, 'GET', '/_admin/stats');
    const mine = Object.values(stats.accounts).find((a) => a.reference_id === 'throttled');
    assert.ok(mine, 'the sandbox counted the account');
    return mine;
  }

  async function fullPass(): Promise<Counter> {
    await sandboxAdmin(h, 'DELETE', '/_admin/stats');
    const result = await (await h.sync.start({ accountId, mode: 'full' })).result();
    assert.deepEqual(result.failed, [], 'no stream failed');
    assert.equal(result.byResource.customers, 4_000);
    return counted();
  }

  it('learns the limits in a first pass, then syncs with zero 429s within the concurrency cap', async () => {
    await fullPass();
    const steady = await fullPass();
    assert.ok(steady.requests > 3 * limit, `the pass spans several windows (${steady.requests} requests)`);
    assert.equal(steady.rate_limited, 0, `no 429 once the budget is known (${steady.requests} requests)`);
    assert.ok(steady.peak_in_flight <= 10, `at most 10 requests in flight (${steady.peak_in_flight})`);
    const { rows } = await h.services.pool.query<{ key: string; window_ms: number; total: number | null }>(
      `SELECT key, window_ms, total FROM rate_budgets WHERE key LIKE $1`,
      ['%crmcloud%'],
    );
    assert.ok(
      rows.some((r) => r.total === limit),
      `the governor holds the reported total: ${JSON.stringify(rows)}`,
    );
  });

  it('keeps two worker processes sharing the account within the limit', async () => {
    // A second process: its own pool, governor and worker on the same task queue.
    const services = createServices(h.services.config, { name: 'second-worker' });
    second = { services, worker: await startWorker(services, { publicBaseUrl: h.apiUrl }) };
    const steady = await fullPass();
    assert.equal(steady.rate_limited, 0, `no 429 with two workers (${steady.requests} requests)`);
    assert.ok(steady.peak_in_flight <= 10, `at most 10 requests in flight across both (${steady.peak_in_flight})`);
  });
});
