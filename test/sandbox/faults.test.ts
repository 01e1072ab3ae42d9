// Contract tests of fault injection: every kind, matching, counting and clearing.
import assert from 'node:assert/strict';
import { after, afterEach, before, test } from 'node:test';
import type { Sandbox } from '../../sandbox/server.ts';
import { admin, call, link, start, type Linked } from './helpers.ts';

let sb: Sandbox;
let crm: Linked;
let fo: Linked;
before(async () => {
  sb = await start();
  crm = await link(sb, 'crmcloud');
  fo = await link(sb, 'fieldops');
});
afterEach(async () => {
  await admin(sb, 'DELETE', '/_admin/faults');
});
after(async () => {
  await sb.close();
});

test('status: 5xx with Retry-After, `times` limits it, then normal answers', async () => {
  const f = await admin(sb, 'POST', '/_admin/faults', { match: { path: '/customers' }, kind: 'status', status: 503, retry_after: 7, times: 2 });
  assert.equal(f.status, 201);
  assert.match(String(f.body.id), /^[0-9a-f-]{36}$/);
  const r1 = await call(sb, 'GET', '/customers', { headers: crm.headers });
  assert.equal(r1.status, 503);
  assert.equal(r1.headers.get('retry-after'), '7');
  assert.equal(typeof r1.body.message, 'string');
  assert.equal((await call(sb, 'GET', '/customers', { headers: crm.headers })).status, 503);
  assert.equal((await call(sb, 'GET', '/customers', { headers: crm.headers })).status, 200);
  assert.equal((await admin(sb, 'GET', '/_admin/faults')).body.data.length, 0, 'spent faults disappear');
});

test('matching by method, regex path and source system', async () => {
  await admin(sb, 'POST', '/_admin/faults', { match: { path: '/^\\/cust/', source_system: 'fieldops' }, kind: 'status', status: 500 });
  assert.equal((await call(sb, 'GET', '/customers', { headers: crm.headers })).status, 200, 'other source system');
  assert.equal((await call(sb, 'GET', '/customers', { headers: fo.headers })).status, 500);
  assert.equal((await call(sb, 'GET', '/jobs', { headers: fo.headers })).status, 200, 'other path');
  await admin(sb, 'DELETE', '/_admin/faults');
  await admin(sb, 'POST', '/_admin/faults', { match: { method: 'POST' }, kind: 'status', status: 502 });
  assert.equal((await call(sb, 'GET', '/jobs', { headers: fo.headers })).status, 200);
  assert.equal((await call(sb, 'POST', '/appointments', { headers: fo.headers, body: {} })).status, 502);
  await admin(sb, 'DELETE', '/_admin/faults');
  await admin(sb, 'POST', '/_admin/faults', { match: {}, kind: 'status', probability: 0 });
  for (let k = 0; k < 5; k++) assert.equal((await call(sb, 'GET', '/jobs', { headers: fo.headers })).status, 200);
  const bad = await admin(sb, 'POST', '/_admin/faults', { kind: 'explode' });
  assert.equal(bad.status, 400);
});

test('admin routes are never faulted', async () => {
  await admin(sb, 'POST', '/_admin/faults', { kind: 'status', status: 500 });
  assert.equal((await admin(sb, 'GET', '/_admin/stats')).status, 200);
});

test('rate-limit: a 429 storm with reset headers', async () => {
  await admin(sb, 'POST', '/_admin/faults', { match: { path: '/leads' }, kind: 'rate-limit', retry_after: 3, times: 3 });
  for (let k = 0; k < 3; k++) {
    const r = await call(sb, 'GET', '/leads', { headers: crm.headers });
    assert.equal(r.status, 429);
    assert.equal(r.headers.get('crmcloud-ratelimit-remaining'), '0');
    const reset = Number(r.headers.get('crmcloud-ratelimit-resetsattimestamp'));
    assert.ok(reset >= Math.floor(Date.now() / 1000) + 2);
  }
  assert.equal((await call(sb, 'GET', '/leads', { headers: crm.headers })).status, 200);
  const stats = await admin(sb, 'GET', '/_admin/stats');
  assert.ok((stats.body.total as { rate_limited: number }).rate_limited >= 3);
});

test('slow adds latency; timeout never answers; reset destroys the socket', async () => {
  await admin(sb, 'POST', '/_admin/faults', { match: { path: '/opportunities' }, kind: 'slow', delay_ms: 300, times: 1 });
  const t0 = Date.now();
  assert.equal((await call(sb, 'GET', '/opportunities', { headers: crm.headers })).status, 200);
  assert.ok(Date.now() - t0 >= 290);

  await admin(sb, 'POST', '/_admin/faults', { match: { path: '/activities' }, kind: 'timeout', times: 1 });
  await assert.rejects(fetch(`${sb.url}/activities`, { headers: crm.headers, signal: AbortSignal.timeout(300) }), /aborted|timeout/i);
  assert.equal((await call(sb, 'GET', '/activities', { headers: crm.headers })).status, 200);

  await admin(sb, 'POST', '/_admin/faults', { match: { path: '/activities' }, kind: 'reset', times: 1 });
  await assert.rejects(fetch(`${sb.url}/activities`, { headers: crm.headers }), /fetch failed/);
});

test('truncated and malformed JSON bodies', async () => {
  await admin(sb, 'POST', '/_admin/faults', { match: { path: '/customers' }, kind: 'truncated-json', times: 1 });
  const t = await call(sb, 'GET', '/customers', { headers: crm.headers });
  assert.equal(t.status, 200);
  assert.throws(() => JSON.parse(t.text) as unknown);
  assert.ok(t.text.startsWith('{"data":['));
  await admin(sb, 'POST', '/_admin/faults', { match: { path: '/customers' }, kind: 'malformed-json', times: 1 });
  const m = await call(sb, 'GET', '/customers', { headers: crm.headers });
  assert.throws(() => JSON.parse(m.text) as unknown);
  assert.equal((await call(sb, 'GET', '/customers', { headers: crm.headers })).body.data.length, 10);
});

test('lying-has-more inverts (or sets) has_more_results; repeat-page serves page 1 again', async () => {
  await admin(sb, 'POST', '/_admin/faults', { match: { path: '/customers' }, kind: 'lying-has-more', times: 2 });
  const p1 = await call(sb, 'GET', '/customers?page=1', { headers: crm.headers });
  assert.equal(p1.body.meta.has_more_results, false, 'there are more, it says no');
  const last = await call(sb, 'GET', '/customers?page=6', { headers: crm.headers });
  assert.equal(last.body.meta.has_more_results, true, 'the last page says there is more');
  await admin(sb, 'POST', '/_admin/faults', { match: { path: '/customers' }, kind: 'lying-has-more', has_more_results: null, times: 1 });
  assert.equal((await call(sb, 'GET', '/customers', { headers: crm.headers })).body.meta.has_more_results, null);

  const page1 = await call(sb, 'GET', '/customers?page=1', { headers: crm.headers });
  await admin(sb, 'POST', '/_admin/faults', { match: { path: '/customers' }, kind: 'repeat-page' });
  const page2 = await call(sb, 'GET', '/customers?page=2', { headers: crm.headers });
  const page3 = await call(sb, 'GET', '/customers?page=3', { headers: crm.headers });
  assert.deepEqual(page2.body.data, page1.body.data);
  assert.deepEqual(page3.body.data, page1.body.data);
  assert.equal(page3.body.meta.current_page, 3);
});

test('stall: one page answers as the page before it forever, or never answers; the pages before it are untouched', async () => {
  const page = (n: number) => call(sb, 'GET', `/customers?page=${n}&per_page=3`, { headers: crm.headers });
  const [p2, p3] = [await page(2), await page(3)];
  const stall = await admin(sb, 'POST', '/_admin/faults/stall', { resource: 'customers', page: 3, mode: 'same-page', source_system: 'crmcloud' });
  assert.equal(stall.status, 201, stall.text);
  assert.deepEqual((await page(2)).body.data, p2.body.data, 'the page before answers as usual');
  for (let k = 0; k < 3; k++) {
    const again = await page(3);
    assert.deepEqual(again.body.data, p2.body.data, 'page 3 is page 2 again');
    assert.equal(again.body.meta.current_page, 3);
    assert.equal(again.body.meta.has_more_results, true, 'and says there is more');
  }
  assert.notDeepEqual(p3.body.data, p2.body.data);
  assert.equal((await call(sb, 'GET', '/customers?page=3&per_page=3', { headers: fo.headers })).status, 200, 'other source systems untouched');
  assert.equal((await call(sb, 'GET', '/customers?per_page=3&page=13', { headers: crm.headers })).body.meta.current_page, 13, 'page 13 is not page 3');
  await admin(sb, 'DELETE', `/_admin/faults/${String(stall.body.id)}`);
  assert.deepEqual((await page(3)).body.data, p3.body.data, 'removed like any fault');

  await admin(sb, 'POST', '/_admin/faults/stall', { resource: '/customers', page: 2, mode: 'timeout' });
  assert.equal((await page(1)).status, 200);
  await assert.rejects(fetch(`${sb.url}/customers?page=2&per_page=3`, { headers: crm.headers, signal: AbortSignal.timeout(300) }), /aborted|timeout/i);

  const bad = await admin(sb, 'POST', '/_admin/faults/stall', { resource: 'customers', page: 1, mode: 'same-page' });
  assert.equal(bad.status, 400);
  assert.match(bad.text, /page must be 2 or more/);
  assert.equal((await admin(sb, 'POST', '/_admin/faults/stall', { resource: 'customers?page=2', mode: 'timeout' })).status, 400);
});
