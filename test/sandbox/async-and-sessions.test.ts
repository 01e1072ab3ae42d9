// Contract tests of async requests, link sessions and the Link page.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import type { Sandbox } from '../../sandbox/server.ts';
import { admin, baseHeaders, call, link, sleep, start, type Json, type Linked } from './helpers.ts';

let sb: Sandbox;
let erp: Linked;
before(async () => {
  sb = await start({ size: 3000 });
  erp = await link(sb, 'sqlerp');
});
after(async () => {
  await sb.close();
});

async function poll(id: string, headers: Record<string, string>): Promise<Json> {
  for (let k = 0; k < 200; k++) {
    const r = await call(sb, 'GET', `/async-requests/${id}`, { headers });
    if (r.status !== 202) return r;
    await sleep(10);
  }
  throw new Error('async request never finished');
}

describe('async requests', () => {
  test('202 with empty body and state headers; the poll returns the stored answer', async () => {
    const r = await call(sb, 'GET', '/customers?per_page=5', { headers: { ...erp.headers, 'async-request': 'true' } });
    assert.equal(r.status, 202);
    assert.equal(r.text, '');
    const id = r.headers.get('svc-async-request-id')!;
    assert.match(id, /^[0-9a-f-]{36}$/);
    assert.equal(r.headers.get('svc-async-request-state'), 'pending');
    assert.equal(r.headers.get('svc-async-request-started-at'), '');
    assert.equal(r.headers.get('svc-async-request-finished-at'), '');
    const expires = Date.parse(r.headers.get('svc-async-request-expires-at')!);
    assert.ok(expires > Date.now() + 55 * 60_000 && expires < Date.now() + 65 * 60_000, 'about an hour');
    const done = await poll(id, erp.headers);
    assert.equal(done.status, 200);
    assert.equal(done.headers.get('svc-async-request-state'), 'executed');
    assert.ok(Date.parse(done.headers.get('svc-async-request-finished-at')!) >= Date.parse(done.headers.get('svc-async-request-started-at')!));
    const direct = await call(sb, 'GET', '/customers?per_page=5', { headers: erp.headers });
    assert.deepEqual(done.body, direct.body);
  });

  test('failed requests end in state failure with their error; other accounts cannot read them', async () => {
    const r = await call(sb, 'GET', '/leads', { headers: { ...erp.headers, 'async-request': 'true' } });
    const id = r.headers.get('svc-async-request-id')!;
    const done = await poll(id, erp.headers);
    assert.equal(done.headers.get('svc-async-request-state'), 'failure');
    assert.equal(done.status, 404);
    assert.match(String(done.body.message), /not supported/);
    const other = await link(sb, 'sqlerp', 'someone-else');
    assert.equal((await call(sb, 'GET', `/async-requests/${id}`, { headers: other.headers })).status, 404);
    assert.equal((await call(sb, 'GET', '/async-requests/00000000-0000-0000-0000-000000000000', { headers: erp.headers })).status, 404);
  });

  test('POST bodies are replayed (pass-through async)', async () => {
    const r = await call(sb, 'POST', '/passthrough', { headers: { ...erp.headers, 'async-request': 'true' }, body: { table: 'ARCM', operation: 'COUNT' } });
    assert.equal(r.status, 202);
    const done = await poll(r.headers.get('svc-async-request-id')!, erp.headers);
    assert.equal(done.status, 200);
    assert.deepEqual(done.body.body, { count: 3000 });
  });

  test('results over 2 MB answer 413; expired results answer 410', async () => {
    const big = await call(sb, 'GET', '/ap-invoices?per_page=500', { headers: { ...erp.headers, 'async-request': 'true', 'include-source-data': 'true' } });
    const r = await poll(big.headers.get('svc-async-request-id')!, erp.headers);
    assert.equal(r.status, 413);
    assert.match(String(r.body.message), /2 MB/);
    await admin(sb, 'PUT', '/_admin/storage', { async_result_ttl_ms: 150 });
    try {
      const small = await call(sb, 'GET', '/jobs?per_page=1', { headers: { ...erp.headers, 'async-request': 'true' } });
      await sleep(250);
      const expired = await call(sb, 'GET', `/async-requests/${small.headers.get('svc-async-request-id')!}`, { headers: erp.headers });
      assert.equal(expired.status, 410);
      assert.match(String(expired.body.message), /expired/);
    } finally {
      await admin(sb, 'PUT', '/_admin/storage', { async_result_ttl_ms: 3_600_000 });
    }
  });

  test('downloads cannot be async', async () => {
    const r = await call(sb, 'POST', '/passthrough-download', { headers: { ...erp.headers, 'async-request': 'true' }, body: { method: 'GET', path: '/x' } });
    assert.equal(r.status, 400);
  });
});

describe('link sessions', () => {
  test('file-picker session: scopes, Session header instead of credentials, limited to its scopes', async () => {
    const bp = await link(sb, 'buildpro', 'picker');
    const created = await call(sb, 'POST', '/link/sessions', { headers: bp.headers, body: { name: 'picker', ttl: '1800', mode: 'file-picker' } });
    assert.equal(created.status, 201);
    assert.deepEqual(created.body.scopes, ['link:read', 'projects:read', 'documents:read', 'drawings:read', 'specification-sections:read']);
    const expiresIn = Date.parse(String(created.body.expires_at)) - Date.now();
    assert.ok(expiresIn > 1790_000 && expiresIn <= 1800_000);
    const session = String(created.body.session);
    const s = { 'api-version': '2021-11-21', session };
    const projects = await call(sb, 'GET', '/projects', { headers: s });
    assert.equal(projects.status, 200);
    const pid = String(projects.body.data[0]!.id);
    assert.equal((await call(sb, 'GET', '/drawings', { headers: { ...s, 'project-id': pid } })).status, 200);
    assert.equal((await call(sb, 'GET', '/link/account', { headers: s })).status, 200);
    const denied = await call(sb, 'GET', '/files', { headers: { ...s, 'project-id': pid } });
    assert.equal(denied.status, 403);
    assert.match(String(denied.body.message), /files:read/);
    assert.equal((await call(sb, 'POST', '/vendors', { headers: s, body: { name: 'x' } })).status, 403);
    assert.equal((await call(sb, 'GET', '/projects', { headers: { 'api-version': '2021-11-21', session: 'sess_nope' } })).status, 401);

    const list = await call(sb, 'GET', '/link/sessions', { headers: bp.headers });
    assert.equal(list.body.data.length, 1);
    assert.equal(list.body.data[0]!.session, undefined, 'the secret is shown once');
    const extended = await call(sb, 'POST', `/link/sessions/${String(created.body.id)}/extend`, { headers: bp.headers, body: { ttl: '7200' } });
    assert.ok(Date.parse(String(extended.body.expires_at)) > Date.now() + 7100_000);
    const expired = await call(sb, 'POST', `/link/sessions/${String(created.body.id)}/expire`, { headers: bp.headers });
    assert.equal(expired.status, 200);
    const after = await call(sb, 'GET', '/projects', { headers: s });
    assert.equal(after.status, 401);
    assert.match(String(after.body.message), /expired/);
  });

  test('construction-file-picker and explicit scopes; invalid bodies answer 400', async () => {
    const bp = await link(sb, 'buildpro', 'picker2');
    const c = await call(sb, 'POST', '/link/sessions', { headers: bp.headers, body: { name: 'c', ttl: '60', mode: 'construction-file-picker' } });
    assert.ok((c.body.scopes as string[]).includes('construction.projects:read'));
    assert.equal((await call(sb, 'GET', '/projects', { headers: { 'api-version': '2021-11-21', session: String(c.body.session) } })).status, 200);
    const custom = await call(sb, 'POST', '/link/sessions', { headers: bp.headers, body: { name: 'v', ttl: '60', scopes: ['vendors:read'] } });
    assert.equal((await call(sb, 'GET', '/vendors', { headers: { 'api-version': '2021-11-21', session: String(custom.body.session) } })).status, 200);
    for (const body of [
      { name: 'x', ttl: 'soon', mode: 'file-picker' },
      { name: 'x', ttl: '60' },
      { name: 'x', ttl: '60', mode: 'everything' },
    ]) {
      assert.equal((await call(sb, 'POST', '/link/sessions', { headers: bp.headers, body })).status, 400, JSON.stringify(body));
    }
  });
});

describe('Link page', () => {
  test('a person picks a source system and signs in; the page shows or redirects with a public token', async () => {
    const lt = await call(sb, 'POST', '/link/token/create', { headers: baseHeaders, body: { reference_id: 'browser-user' } });
    const token = String(lt.body.link_token);
    const form = await fetch(`${sb.url}/link?link_token=${encodeURIComponent(token)}`);
    assert.equal(form.status, 200);
    const html = await form.text();
    assert.match(html, /<form/);
    for (const slug of ['buildpro', 'docvault', 'sqlerp', 'xmlbooks', 'graphledger', 'crmcloud', 'fieldops']) assert.ok(html.includes(`value="${slug}"`), slug);
    const signIn = await fetch(`${sb.url}/link/sign-in`, {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      body: new URLSearchParams({ link_token: token, source_system: 'xmlbooks', username: 'me', password: 'pw' }).toString(),
    });
    assert.equal(signIn.status, 200);
    const publicToken = /id="public-token">([^<]+)</.exec(await signIn.text())![1]!;
    const ex = await call(sb, 'POST', '/link/token/exchange', { headers: baseHeaders, body: { public_token: publicToken } });
    assert.equal(ex.status, 200);
    assert.equal((ex.body.source_system as { slug: string }).slug, 'xmlbooks');

    const lt2 = await call(sb, 'POST', '/link/token/create', { headers: baseHeaders, body: { reference_id: 'redirected' } });
    const redirect = await fetch(`${sb.url}/link/sign-in`, {
      method: 'POST',
      redirect: 'manual',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      body: new URLSearchParams({
        link_token: String(lt2.body.link_token),
        source_system: 'crmcloud',
        redirect_uri: 'https://app.example.com/done',
      }).toString(),
    });
    assert.equal(redirect.status, 302);
    assert.match(redirect.headers.get('location')!, /^https:\/\/app\.example\.com\/done\?public_token=public-sandbox-/);
    const used = await fetch(`${sb.url}/link?link_token=${encodeURIComponent(token)}`);
    assert.equal(used.status, 400);
  });
});
