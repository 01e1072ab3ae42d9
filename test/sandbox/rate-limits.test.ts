// Contract tests of rate limits (service and source-system windows, headers, 429s, stats) and of
// the one-at-a-time queue of serial source systems.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { admin, call, link, sleep, start } from './helpers.ts';

test('service window: headers count down, 429 with a message when spent, reset after the window', async () => {
  const sb = await start({ rateLimits: { windowMs: 1500, accountLimit: 5 } });
  try {
    const a = await link(sb, 'fieldops');
    const remaining: string[] = [];
    for (let k = 0; k < 5; k++) {
      const r = await call(sb, 'GET', '/jobs?per_page=1', { headers: a.headers });
      assert.equal(r.status, 200);
      assert.equal(r.headers.get('svc-ratelimit-total'), '5');
      remaining.push(r.headers.get('svc-ratelimit-remaining')!);
    }
    assert.deepEqual(remaining, ['4', '3', '2', '1', '0']);
    const limited = await call(sb, 'GET', '/jobs?per_page=1', { headers: a.headers });
    assert.equal(limited.status, 429);
    assert.match(String(limited.body.message), /Rate limit exceeded/);
    assert.equal(limited.headers.get('svc-ratelimit-remaining'), '0');
    // Another account has its own window.
    const b = await link(sb, 'fieldops', 'another');
    assert.equal((await call(sb, 'GET', '/jobs', { headers: b.headers })).status, 200);
    await sleep(1600);
    const again = await call(sb, 'GET', '/jobs?per_page=1', { headers: a.headers });
    assert.equal(again.status, 200);
    assert.equal(again.headers.get('svc-ratelimit-remaining'), '4');
    const stats = await admin(sb, 'GET', '/_admin/stats');
    const accounts = Object.values(stats.body.accounts as Record<string, { reference_id: string; requests: number; rate_limited: number }>);
    const mine = accounts.find((x) => x.reference_id === 'ref-fieldops')!;
    assert.equal(mine.requests, 7);
    assert.equal(mine.rate_limited, 1);
    assert.equal((stats.body.source_systems as Record<string, { rate_limited: number }>).fieldops!.rate_limited, 1);
  } finally {
    await sb.close();
  }
});

test('source-system window: {Name}-RateLimit-* headers with a reset timestamp; its own 429', async () => {
  const sb = await start({ rateLimits: { accountLimit: 100, sourceSystemLimits: { crmcloud: 3 } } });
  try {
    const a = await link(sb, 'crmcloud');
    const r = await call(sb, 'GET', '/leads', { headers: a.headers });
    assert.equal(r.headers.get('crmcloud-ratelimit-total'), '3');
    assert.equal(r.headers.get('crmcloud-ratelimit-remaining'), '2');
    const reset = Number(r.headers.get('crmcloud-ratelimit-resetsattimestamp'));
    const now = Date.now() / 1000;
    assert.ok(reset > now && reset <= now + 11, 'crmcloud: 10-second window');
    await call(sb, 'GET', '/leads', { headers: a.headers });
    await call(sb, 'GET', '/leads', { headers: a.headers });
    const limited = await call(sb, 'GET', '/leads', { headers: a.headers });
    assert.equal(limited.status, 429);
    assert.match(String(limited.body.message), /CRM Cloud rate limit exceeded/);
    assert.equal(limited.headers.get('svc-ratelimit-remaining'), '96');
  } finally {
    await sb.close();
  }
});

test('limits change at runtime through PUT /_admin/rate-limits; rateLimits: false sends no headers', async () => {
  const sb = await start({ rateLimits: false });
  try {
    const a = await link(sb, 'docvault');
    const r = await call(sb, 'GET', '/projects', { headers: a.headers });
    assert.equal(r.headers.get('svc-ratelimit-total'), null);
    assert.equal(r.headers.get('docvault-ratelimit-total'), null);
    const put = await admin(sb, 'PUT', '/_admin/rate-limits', { enabled: true, windowMs: 5000, accountLimit: 2 });
    assert.equal(put.status, 200);
    assert.equal((await call(sb, 'GET', '/projects', { headers: a.headers })).headers.get('svc-ratelimit-total'), '2');
    await call(sb, 'GET', '/projects', { headers: a.headers });
    assert.equal((await call(sb, 'GET', '/projects', { headers: a.headers })).status, 429);
    const reset = await admin(sb, 'PUT', '/_admin/rate-limits', { reset: true, accountLimit: 10 });
    assert.equal(reset.body.accountLimit, 10);
    assert.equal((await call(sb, 'GET', '/projects', { headers: a.headers })).status, 200);
    const bad = await admin(sb, 'PUT', '/_admin/rate-limits', { accountLimit: -1 });
    assert.equal(bad.status, 400);
  } finally {
    await sb.close();
  }
});

test('sqlerp serves one request at a time: 1 runs, 5 wait, the rest get 429', async () => {
  const sb = await start();
  try {
    const a = await link(sb, 'sqlerp');
    assert.equal((await admin(sb, 'PUT', '/_admin/source-systems/sqlerp', { latency_ms: 150 })).status, 200);
    const t0 = Date.now();
    const results = await Promise.all(Array.from({ length: 8 }, () => call(sb, 'GET', '/customers?per_page=1', { headers: a.headers })));
    const statuses = results.map((r) => r.status).sort();
    assert.deepEqual(statuses, [200, 200, 200, 200, 200, 200, 429, 429]);
    assert.ok(Date.now() - t0 >= 6 * 150 - 20, 'the six admitted requests ran one after another');
    const busy = results.find((r) => r.status === 429)!;
    assert.match(String(busy.body.message), /one request at a time/);
    // Another account of the same system has its own lane.
    const b = await link(sb, 'sqlerp', 'other');
    const [x, y] = await Promise.all([call(sb, 'GET', '/jobs', { headers: a.headers }), call(sb, 'GET', '/jobs', { headers: b.headers })]);
    assert.equal(x.status, 200);
    assert.equal(y.status, 200);
  } finally {
    await sb.close();
  }
});

test('sqlerp cuts off requests past the maximum execution time (504)', async () => {
  const sb = await start();
  try {
    const a = await link(sb, 'sqlerp');
    await admin(sb, 'PUT', '/_admin/source-systems/sqlerp', { latency_ms: 400, max_execution_ms: 100 });
    const r = await call(sb, 'GET', '/customers', { headers: a.headers });
    assert.equal(r.status, 504);
    assert.match(String(r.body.message), /maximum execution time/);
    await admin(sb, 'PUT', '/_admin/source-systems/sqlerp', { latency_ms: 0, max_execution_ms: 90_000 });
    assert.equal((await call(sb, 'GET', '/customers', { headers: a.headers })).status, 200);
  } finally {
    await sb.close();
  }
});
