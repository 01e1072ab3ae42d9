// /metrics after real work: a sync under the sandbox's rate limits with one injected 429, a webhook
// event applied, and a subscriber that cannot be reached. Each figure the issue names shows up, with
// the values Postgres and the sandbox say.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { startHarness, type Harness } from '../helpers/harness.ts';
import { startOperatorApp, type OperatorApp } from '../helpers/operator-app.ts';

function sample(text: string, name: string, labels: Record<string, string> = {}): number | undefined {
  for (const line of text.split('\n')) {
    if (!line.startsWith(`${name}{`) && !line.startsWith(`${name} `)) continue;
    if (Object.entries(labels).every(([k, v]) => line.includes(`${k}="${v}"`))) return Number(line.slice(line.lastIndexOf(' ') + 1));
  }
  return undefined;
}

describe('/metrics', { timeout: 120_000 }, () => {
  let h: Harness;
  let op: OperatorApp;
  let accountId: string;
  let accountToken: string;

  before(async () => {
    h = await startHarness({ sandbox: { size: 20, rateLimits: { windowMs: 60_000, accountLimit: 1000 } } });
    op = await startOperatorApp(h);
    ({ accountId, accountToken } = await h.link('crmcloud', 'metrics'));
    // One 429 on the first page of leads: the activity is retried after the reset.
    const fault = await fetch(`${h.sandbox.url}/_admin/faults`, {
      method: 'POST',
      headers: { ...h.upstreamHeaders, 'content-type': 'application/json' },
      body: JSON.stringify({ match: { path: '/leads' }, kind: 'rate-limit', times: 1, retry_after: 1 }),
    });
    assert.equal(fault.status, 201);
    const result = (await (await h.sync.start({ accountId, mode: 'full' })).result()) as { failed: unknown[] };
    assert.deepEqual(result.failed, []);
  });
  after(async () => {
    await op?.close();
    await h?.close();
  });

  async function scrape(): Promise<string> {
    const res = await fetch(`${op.url}/metrics`, { headers: { authorization: `Bearer ${op.operatorToken}` } });
    assert.equal(res.status, 200);
    assert.match(res.headers.get('content-type') ?? '', /^text\/plain; version=0\.0\.4/);
    return res.text();
  }

  it('needs operator credentials', async () => {
    assert.equal((await fetch(`${op.url}/metrics`)).status, 401);
    const basic = Buffer.from(`${h.clientHeaders['client-id']}:${h.clientHeaders['client-secret']}`).toString('base64');
    assert.equal((await fetch(`${op.url}/metrics`, { headers: { authorization: `Basic ${basic}` } })).status, 200);
  });

  it('counts records written, pages, streams and lag per source system', async () => {
    const text = await scrape();
    const { rows } = await h.services.pool.query<{ resource: string; n: number }>(
      `SELECT resource, count(*)::int AS n FROM records WHERE account_id = $1 AND deleted_at IS NULL GROUP BY resource`,
      [accountId],
    );
    assert.equal(rows.length, 4);
    for (const r of rows) {
      assert.equal(sample(text, 'mirror_records', { source_system: 'crmcloud', resource: r.resource }), r.n, `records of ${r.resource}`);
      assert.equal(
        sample(text, 'mirror_records_written_total', { source_system: 'crmcloud', resource: r.resource, kind: 'inserted' }),
        r.n,
        `inserted ${r.resource}`,
      );
      assert.ok(sample(text, 'mirror_pages_total', { source_system: 'crmcloud', resource: r.resource })! >= 1);
      assert.ok(sample(text, 'mirror_stream_lag_seconds', { account: accountId, resource: r.resource })! >= 0);
    }
    assert.equal(sample(text, 'mirror_streams', { source_system: 'crmcloud', state: 'synced' }), 4);
    assert.equal(sample(text, 'mirror_sync_runs_total', { status: 'succeeded' }), 4);
  });

  it('reports upstream requests and 429s per source system, and the governor budget', async () => {
    const text = await scrape();
    assert.ok(sample(text, 'mirror_upstream_requests_total', { source_system: 'crmcloud', status: '2xx' })! >= 4);
    assert.equal(sample(text, 'mirror_upstream_rate_limited_total', { source_system: 'crmcloud' }), 1, 'the injected 429');
    assert.equal(sample(text, 'mirror_upstream_requests_total', { source_system: 'crmcloud', status: '429' }), 1);
    const serviceTotal = sample(text, 'mirror_governor_budget_total', { kind: 'service', account: accountId });
    assert.equal(serviceTotal, 1000, 'the service window the sandbox reported');
    const sourceTotal = sample(text, 'mirror_governor_budget_total', { kind: 'source_system', account: accountId, source_system: 'crmcloud' });
    assert.ok(sourceTotal! > 0, 'the source system window the sandbox reported');
    assert.ok(sample(text, 'mirror_governor_budget_remaining', { kind: 'service', account: accountId })! < 1000);
    assert.ok(sample(text, 'mirror_api_request_duration_seconds_count', { route: '/metrics' })! >= 1, 'API latency of this very route');
  });

  it('reports webhook latency, the inbox backlog and outbound delivery failures', async () => {
    // An event received 3 s before it was applied, and one still waiting.
    await h.services.pool.query(
      `INSERT INTO inbox_events (account_id, dedupe_key, event, type, target, body, received_at, applied_at, outcome)
       VALUES ($1, repeat('a', 64), 'UPDATE', 'customer', 'x', '{}', now() - interval '3 seconds', now(), 'upserted'),
              ($1, repeat('b', 64), 'UPDATE', 'customer', 'y', '{}', now(), NULL, NULL)`,
      [accountId],
    );
    // A subscriber nobody listens to, then a change to deliver: its deliveries fail and are retried.
    const sub = await fetch(`${op.url}/webhooks`, {
      method: 'POST',
      headers: { ...h.clientHeaders, 'account-token': accountToken, 'content-type': 'application/json' },
      body: JSON.stringify({ callback_url: 'http://127.0.0.1:1/hook', event: 'UPDATE', type: 'customer' }),
    });
    assert.equal(sub.status, 201);
    const { rows } = await h.services.pool.query<{ id: string }>(
      `SELECT id FROM records WHERE account_id = $1 AND resource = 'customers' ORDER BY ordinal LIMIT 1`,
      [accountId],
    );
    const patched = await fetch(`${h.sandbox.url}/_admin/objects`, {
      method: 'PATCH',
      headers: { ...h.upstreamHeaders, 'content-type': 'application/json' },
      body: JSON.stringify({ account_token: accountToken, resource: 'customers', id: rows[0]!.id, patch: { name: 'Renamed for the metrics test' } }),
    });
    assert.equal(patched.status, 200);
    await (await h.sync.start({ accountId, mode: 'full', resource: 'customers' })).result();
    let text = '';
    for (let i = 0; i < 60; i++) {
      await new Promise((r) => setTimeout(r, 500));
      text = await scrape();
      if ((sample(text, 'mirror_outbound_delivery_failures_total', { type: 'customer' }) ?? 0) >= 1) break;
    }
    assert.ok(sample(text, 'mirror_outbound_delivery_failures_total', { type: 'customer' })! >= 1, 'a failed delivery is counted');
    assert.equal(sample(text, 'mirror_outbound_subscriptions_failing', { type: 'customer' }), 1);
    assert.equal(sample(text, 'mirror_inbox_backlog'), 1);
    assert.equal(sample(text, 'mirror_webhook_apply_latency_seconds_bucket', { le: '2.5' }), 0);
    assert.equal(sample(text, 'mirror_webhook_apply_latency_seconds_bucket', { le: '5' }), 1);
    assert.equal(sample(text, 'mirror_webhook_apply_latency_seconds_count'), 1);
    const status = (await (await fetch(`${op.url}/status.json`, { headers: { authorization: `Bearer ${op.operatorToken}` } })).json()) as {
      deliveries: { lastError: string | null; backlog: number }[];
      inbox: { pending: number }[];
      errors: { kind: string }[];
    };
    assert.equal(status.inbox[0]?.pending, 1);
    assert.ok(status.deliveries[0]?.lastError, 'the status page shows the delivery error');
    assert.ok(status.deliveries[0].backlog > 0, 'and the changes waiting for it');
    assert.ok(status.errors.some((e) => e.kind === 'delivery'));
  });
});
