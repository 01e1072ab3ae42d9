// Contract tests of authentication, versioning, errors and the link flow.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import type { Sandbox } from '../../sandbox/server.ts';
import { admin, baseHeaders, call, clientId, clientSecret, link, start } from './helpers.ts';

let sb: Sandbox;
before(async () => {
  sb = await start();
});
after(async () => {
  await sb.close();
});

describe('authentication and versioning', () => {
  test('missing or wrong API-Version answers 401 {"error": "Invalid API-Version header"}', async () => {
    const a = await link(sb, 'buildpro');
    for (const version of [undefined, '2020-01-01']) {
      const headers: Record<string, string> = { ...a.headers };
      if (version) headers['api-version'] = version;
      else delete headers['api-version'];
      const r = await call(sb, 'GET', '/projects', { headers });
      assert.equal(r.status, 401);
      assert.deepEqual(r.body, { error: 'Invalid API-Version header' });
      assert.ok(r.headers.get('svc-debug-id'));
    }
  });

  test('bad client credentials answer 401 with a message, on link-token routes too', async () => {
    const r = await call(sb, 'POST', '/link/token/create', { headers: { ...baseHeaders, 'client-secret': 'x'.repeat(40) }, body: { reference_id: 'a' } });
    assert.equal(r.status, 401);
    assert.equal(typeof r.body.message, 'string');
    const r2 = await call(sb, 'GET', '/projects', { headers: { 'api-version': '2021-11-21', 'client-id': clientId } });
    assert.equal(r2.status, 401);
  });

  test('Account-Token is required and must be known', async () => {
    const missing = await call(sb, 'GET', '/projects', { headers: baseHeaders });
    assert.equal(missing.status, 401);
    assert.match(String(missing.body.message), /Account-Token/);
    const unknown = await call(sb, 'GET', '/projects', { headers: { ...baseHeaders, 'account-token': 'nope' } });
    assert.equal(unknown.status, 401);
  });

  test('unknown routes answer 404 naming the route; every answer has a unique Svc-Debug-Id', async () => {
    const a = await link(sb, 'buildpro');
    const r = await call(sb, 'GET', '/nothing-here', { headers: a.headers });
    assert.equal(r.status, 404);
    assert.deepEqual(r.body, { message: 'Route GET /nothing-here not found' });
    const deep = await call(sb, 'GET', '/a/b/c/d/e', { headers: a.headers });
    assert.equal(deep.status, 404);
    assert.equal(deep.body.message, 'Route GET /a/b/c/d/e not found');
    const r2 = await call(sb, 'GET', '/projects', { headers: a.headers });
    assert.notEqual(r.headers.get('svc-debug-id'), r2.headers.get('svc-debug-id'));
    assert.equal(r2.headers.get('svc-billing-id'), (a.account.linked_company as { id: string }).id);
    assert.equal(r2.headers.get('svc-billing-enabled'), 'false');
    const stats = await call(sb, 'GET', '/_admin/stats', { headers: { 'client-id': clientId, 'client-secret': clientSecret } });
    const mine = Object.values(stats.body.accounts as Record<string, { by_path: Record<string, number> }>);
    assert.ok(
      mine.some((x) => x.by_path['GET /projects'] === 1),
      'per-route counts name the resource',
    );
  });

  test('the header prefix is configurable', async () => {
    const other = await start({ headerPrefix: 'Agave', rateLimits: {} });
    try {
      const a = await link(other, 'fieldops');
      const r = await call(other, 'GET', '/jobs', { headers: a.headers });
      assert.equal(r.status, 200);
      assert.ok(r.headers.get('agave-debug-id'));
      assert.ok(r.headers.get('agave-data-retrieved-at'));
      assert.equal(r.headers.get('agave-ratelimit-total'), '150');
      assert.equal(r.headers.get('svc-debug-id'), null);
    } finally {
      await other.close();
    }
  });
});

describe('link flow', () => {
  test('link token -> public token -> exchange gives the linked account object', async () => {
    const a = await link(sb, 'buildpro', 'customer-42');
    const acct = a.account;
    assert.equal(acct.reference_id, 'customer-42');
    assert.equal(acct.status, 'linked');
    assert.deepEqual(acct.source_system, { slug: 'buildpro', name: 'BuildPro', supports_cross_account_uuid: true });
    assert.ok(a.token.length >= 48);
    const company = acct.linked_company as Record<string, unknown>;
    assert.match(String(company.id), /^[0-9a-f-]{36}$/);
    assert.equal(typeof company.source_id, 'string');
    const user = acct.linked_user as Record<string, unknown>;
    assert.ok(user.id && user.source_id && user.name && user.email);
    const me = await call(sb, 'GET', '/link/account', { headers: a.headers });
    assert.equal(me.status, 200);
    assert.equal(me.body.reference_id, 'customer-42');
    assert.equal(me.body.account_token, undefined, 'the token is handed out at exchange only');
  });

  test('link and public tokens are single use; bad ones answer 400', async () => {
    const lt = await call(sb, 'POST', '/link/token/create', { headers: baseHeaders, body: { reference_id: 'single' } });
    const linkToken = String(lt.body.link_token);
    const pt = await admin(sb, 'POST', '/_admin/link/public-token', { link_token: linkToken, source_system: 'crmcloud' });
    assert.equal(pt.status, 200);
    const again = await admin(sb, 'POST', '/_admin/link/public-token', { link_token: linkToken, source_system: 'crmcloud' });
    assert.equal(again.status, 400);
    const ex1 = await call(sb, 'POST', '/link/token/exchange', { headers: baseHeaders, body: { public_token: pt.body.public_token } });
    assert.equal(ex1.status, 200);
    const ex2 = await call(sb, 'POST', '/link/token/exchange', { headers: baseHeaders, body: { public_token: pt.body.public_token } });
    assert.equal(ex2.status, 400);
    const unknownSystem = await admin(sb, 'POST', '/_admin/link/public-token', { link_token: 'x', source_system: 'nope' });
    assert.equal(unknownSystem.status, 400);
  });

  test('reference_id is required and at most 255 characters', async () => {
    const long = await call(sb, 'POST', '/link/token/create', { headers: baseHeaders, body: { reference_id: 'x'.repeat(256) } });
    assert.equal(long.status, 400);
    const none = await call(sb, 'POST', '/link/token/create', { headers: baseHeaders, body: {} });
    assert.equal(none.status, 400);
    const ok = await call(sb, 'POST', '/link/token/create', { headers: baseHeaders, body: { reference_id: 'x'.repeat(255) } });
    assert.equal(ok.status, 200);
  });

  test('same reference id + source system -> same ids; another reference id -> other ids', async () => {
    const a1 = await link(sb, 'sqlerp', 'same-ref');
    const a2 = await link(sb, 'sqlerp', 'same-ref');
    const b = await link(sb, 'sqlerp', 'other-ref');
    assert.notEqual(a1.token, a2.token);
    const p1 = await call(sb, 'GET', '/customers?per_page=5', { headers: a1.headers });
    const p2 = await call(sb, 'GET', '/customers?per_page=5', { headers: a2.headers });
    const p3 = await call(sb, 'GET', '/customers?per_page=5', { headers: b.headers });
    assert.deepEqual(
      p1.body.data.map((c) => c.id),
      p2.body.data.map((c) => c.id),
    );
    assert.notDeepEqual(
      p1.body.data.map((c) => c.id),
      p3.body.data.map((c) => c.id),
    );
    assert.deepEqual(a1.account.linked_company, a2.account.linked_company);
  });

  test('a token revoked, expired or unlinked at the source answers 401 saying why; the other links of its reference id keep working', async () => {
    const first = await link(sb, 'sqlerp', 'revoke-ref');
    const second = await link(sb, 'sqlerp', 'revoke-ref');
    const expiring = await link(sb, 'buildpro', 'expire-ref');
    const leaving = await link(sb, 'buildpro', 'unlink-ref');
    const session = await call(sb, 'POST', '/link/sessions', { headers: first.headers, body: { name: 's', ttl: '600', mode: 'file-picker' } });
    assert.equal(session.status, 201);
    const revoked = await admin(sb, 'POST', '/_admin/accounts/revoke', { account_token: first.token });
    assert.equal(revoked.status, 200);
    assert.equal(revoked.body.status, 'revoked');
    assert.equal((await admin(sb, 'POST', '/_admin/accounts/revoke', { account_token: expiring.token, reason: 'expired' })).status, 200);
    assert.equal((await admin(sb, 'POST', '/_admin/accounts/unlink', { account_token: leaving.token })).status, 200);
    const answers = await Promise.all([first, expiring, leaving].map((a) => call(sb, 'GET', '/link/account', { headers: a.headers })));
    assert.deepEqual(
      answers.map((r) => [r.status, r.body.message]),
      [
        [401, 'Invalid Account-Token: the token was revoked'],
        [401, 'Invalid Account-Token: the token has expired'],
        [401, 'Invalid Account-Token: the linked account was unlinked'],
      ],
    );
    // Its link session ends with it; the other link of the same reference id answers as before.
    const bySession = await call(sb, 'GET', '/projects', { headers: { 'api-version': '2021-11-21', session: String(session.body.session) } });
    assert.equal(bySession.status, 401);
    assert.equal((await call(sb, 'GET', '/customers?per_page=5', { headers: second.headers })).status, 200);
    // A token the admin API no longer knows, or a missing one, is a clear 4xx.
    assert.equal((await admin(sb, 'POST', '/_admin/accounts/unlink', { account_token: first.token })).status, 404);
    const bad = await admin(sb, 'POST', '/_admin/accounts/revoke', { account_token: second.token, reason: 'lost' });
    assert.equal(bad.status, 400);
    assert.equal((await admin(sb, 'POST', '/_admin/accounts/unlink', {})).status, 400);
  });

  test('admin routes need the client credentials', async () => {
    const r = await call(sb, 'GET', '/_admin/stats');
    assert.equal(r.status, 401);
    const ok = await call(sb, 'GET', '/_admin/stats', { headers: { 'client-id': clientId, 'client-secret': clientSecret } });
    assert.equal(ok.status, 200);
  });

  test('cross-company: /link/companies and Company-Id switch the data; foreign companies answer 403', async () => {
    const a = await link(sb, 'buildpro', 'multi-company');
    const companies = await call(sb, 'GET', '/link/companies', { headers: a.headers });
    assert.equal(companies.status, 200);
    assert.equal(companies.body.data.length, 3);
    const [first, second] = companies.body.data;
    const p1 = await call(sb, 'GET', '/projects', { headers: { ...a.headers, 'company-id': String(first!.id) } });
    const p2 = await call(sb, 'GET', '/projects', { headers: { ...a.headers, 'company-id': String(second!.id) } });
    assert.equal(p1.status, 200);
    assert.notDeepEqual(
      p1.body.data.map((p) => p.name),
      p2.body.data.map((p) => p.name),
    );
    const bad = await call(sb, 'GET', '/projects', { headers: { ...a.headers, 'company-id': '00000000-0000-0000-0000-000000000000' } });
    assert.equal(bad.status, 403);
    const single = await link(sb, 'fieldops');
    const one = await call(sb, 'GET', '/link/companies', { headers: single.headers });
    assert.equal(one.body.data.length, 1);
  });
});

test('buildSandboxApp builds an app for inject() without listening', async () => {
  const { buildSandboxApp } = await import('../../sandbox/server.ts');
  const app = await buildSandboxApp({ clientId, clientSecret, logger: false });
  try {
    const r = await app.inject({ method: 'GET', url: '/projects', headers: { ...baseHeaders } });
    assert.equal(r.statusCode, 401);
    const lt = await app.inject({ method: 'POST', url: '/link/token/create', headers: baseHeaders, payload: { reference_id: 'inject' } });
    assert.equal(lt.statusCode, 200);
    assert.match(lt.json<{ link_token: string }>().link_token, /^link-sandbox-/);
  } finally {
    await app.close();
  }
});
