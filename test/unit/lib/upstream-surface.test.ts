// The forwarder's path rule over a table of hostile paths: what is refused (and with which status),
// what is allowed for each credential kind, and the exact upstream path rebuilt for what is allowed.
// The surface's table is compared with the reference file of the real service when it is at hand.
import assert from 'node:assert/strict';
import { existsSync, readFileSync } from 'node:fs';
import { describe, it } from 'node:test';
import { resourceDef, resources } from '../../../lib/resources.ts';
import { maxSegmentLength, realServiceCollections, upstreamPath, upstreamSurface, type UpstreamCredential } from '../../../lib/upstream-surface.ts';

const account: UpstreamCredential = { kind: 'account' };
const client: UpstreamCredential = { kind: 'client' };
const picker: UpstreamCredential = {
  kind: 'session',
  scopes: ['link:read', 'projects:read', 'documents:read', 'drawings:read', 'specification-sections:read'],
};

const reference = '/work/shared/reference/real-service-collections.json';

/** [method, raw target, status]: refused for an account token (the widest credential). */
const hostile: [string, string, 400 | 403 | 404][] = [
  // The reported trick: an HTTP client turns `\` into `/` and resolves `..`.
  ['GET', '/link/sessions/x\\..\\..\\..\\_admin\\accounts', 400],
  ['PUT', '/vendors/x\\..\\..\\_admin\\objects', 400],
  ['GET', '/\\evil', 400],
  ['GET', '/\\\\evil\\x', 400],
  ['GET', '/vendors\\..\\_admin', 400],
  // Dot segments, raw and encoded.
  ['GET', '/link/sessions/..', 400],
  ['GET', '/link/sessions/.', 400],
  ['GET', '/link/sessions/%2e%2e', 400],
  ['GET', '/link/sessions/%2E%2E', 400],
  ['GET', '/link/sessions/.%2e', 400],
  ['GET', '/link/sessions/%2e.', 400],
  ['GET', '/link/sessions/...', 400],
  ['GET', '/vendors/x/../../_admin/accounts', 400],
  ['GET', '/vendors/./x', 400],
  // Encoded separators.
  ['GET', '/vendors/..%2f..%2f_admin%2faccounts', 400],
  ['GET', '/vendors/%2e%2e%2f%2e%2e%2f_admin', 400],
  ['GET', '/vendors/a%2Fb', 400],
  ['GET', '/vendors/x%5c..%5c_admin', 400],
  ['GET', '/vendors/%5C', 400],
  // Double encoding.
  ['GET', '/vendors/%252e%252e', 400],
  ['GET', '/vendors/%252e%252e%252f_admin', 400],
  ['GET', '/vendors/%255c', 400],
  ['GET', '/vendors/%252f', 400],
  ['GET', '/vendors/100%25', 400],
  // Hosts and absolute URLs.
  ['GET', '//host/x', 400],
  ['GET', '//127.0.0.1:6379/x', 400],
  ['GET', 'http://evil/', 400],
  ['GET', 'https://evil/vendors', 400],
  ['GET', 'http://127.0.0.1:4010/_admin/accounts', 400],
  ['GET', 'vendors/x', 400],
  ['GET', '', 400],
  // Empty segments.
  ['GET', '/vendors//x', 400],
  ['GET', '/vendors//', 400],
  ['GET', '/', 400],
  // Control characters, raw and encoded; malformed or non-UTF-8 escapes.
  ['GET', '/vendors/x%00', 400],
  ['GET', '/vendors/%00', 400],
  ['GET', '/vendors/x\u0000', 400],
  ['GET', '/vendors/a%0d%0aHost:%20evil', 400],
  ['GET', '/vendors/a%7f', 400],
  ['GET', '/vendors/a%c2%85', 400],
  ['GET', '/vendors/a b', 400],
  ['GET', '/vendors/caf\u00e9', 400],
  ['GET', '/vendors/%c0%ae%c0%ae', 400],
  ['GET', '/vendors/%e0%80%ae', 400],
  ['GET', '/vendors/%zz', 400],
  ['GET', '/vendors/%', 400],
  // Overlong.
  ['GET', `/vendors/${'a'.repeat(maxSegmentLength + 1)}`, 400],
  ['GET', `/vendors/${'%61'.repeat(maxSegmentLength + 1)}`, 400],
  ['GET', `/vendors/${'a'.repeat(5000)}`, 400],
  ['GET', `/vendors${'/a'.repeat(20)}`, 400],
  ['GET', `/vendors?x=${'a'.repeat(9000)}`, 400],
  // Fragments and hostile query strings.
  ['GET', '/vendors#/../../_admin', 400],
  ['GET', '/vendors?x=a b', 400],
  ['GET', '/vendors?x=\u0000', 400],
  ['GET', '/vendors?x=%zz', 400],
  // The admin APIs, for anyone.
  ['GET', '/_admin/accounts', 403],
  ['GET', '/admin/accounts', 403],
  ['POST', '/admin/accounts/x/revoke-tokens', 403],
  ['GET', '/_admin', 403],
  ['DELETE', '/_admin/faults', 403],
  ['GET', '/%5fadmin/accounts', 403],
  ['GET', '/%61dmin/accounts', 403],
  // Off the surface.
  ['GET', '/ADMIN/accounts', 404],
  ['GET', '/_Admin/accounts', 404],
  ['GET', '/etc/passwd', 404],
  ['GET', '/vendors/x/y', 404],
  ['GET', '/link/sessions/x/y', 404],
  ['GET', '/passthrough/x', 404],
  ['GET', '/storage/x', 404],
  ['GET', '/mirror/accounts', 404],
  // Methods the upstream's API does not take.
  ['TRACE', '/vendors', 400],
  ['CONNECT', '/vendors', 400],
  ['OPTIONS', '/vendors', 400],
];

/** [method, raw target, rebuilt upstream path]: allowed for an account token. */
const allowed: [string, string, string][] = [
  ['GET', '/vendors', '/vendors'],
  ['GET', '/vendors?page=2&per_page=10', '/vendors?page=2&per_page=10'],
  ['GET', '/vendors?filters=[{"a":1}]', '/vendors?filters=[%7B%22a%22:1%7D]'],
  ['GET', "/vendors?q=it's\\x", '/vendors?q=it%27s%5Cx'],
  ['GET', '/vendors/abc-123', '/vendors/abc-123'],
  ['HEAD', '/vendors/abc', '/vendors/abc'],
  ['GET', '/vendors/source_id:12', '/vendors/source_id%3A12'],
  ['GET', '/vendors/source_id%3A12', '/vendors/source_id%3A12'],
  ['GET', '/vendors/@127.0.0.1:9', '/vendors/%40127.0.0.1%3A9'],
  ['GET', '/vendors/%40127.0.0.1%3A9', '/vendors/%40127.0.0.1%3A9'],
  ['GET', '/vendors/a;b', '/vendors/a%3Bb'],
  ['GET', '/vendors/a%20b', '/vendors/a%20b'],
  ['GET', '/vendors/caf%C3%A9', '/vendors/caf%C3%A9'],
  ['GET', '/vendors/admin', '/vendors/admin'],
  ['GET', '/vendors/_admin', '/vendors/_admin'],
  ['GET', '/vendors/..a', '/vendors/..a'],
  ['GET', `/vendors/${'a'.repeat(maxSegmentLength)}`, `/vendors/${'a'.repeat(maxSegmentLength)}`],
  ['GET', '/vendors/compliances', '/vendors/compliances'],
  ['PUT', '/vendors/v1', '/vendors/v1'],
  ['PATCH', '/vendors/v1', '/vendors/v1'],
  ['DELETE', '/vendors/v1', '/vendors/v1'],
  ['POST', '/vendors', '/vendors'],
  ['PATCH', '/vendors', '/vendors'],
  ['GET', '/ap-invoices/i1/line-items', '/ap-invoices/i1/line-items'],
  ['GET', '/ap-invoices/i1/line-items/l2', '/ap-invoices/i1/line-items/l2'],
  ['GET', '/files/f1/versions/v1', '/files/f1/versions/v1'],
  ['GET', '/documents/d1', '/documents/d1'],
  ['GET', '/root-folder', '/root-folder'],
  ['POST', '/submittals/s1/submittal-reviewers/r2/attachments', '/submittals/s1/submittal-reviewers/r2/attachments'],
  ['POST', '/rfis/r1/responses', '/rfis/r1/responses'],
  ['POST', '/ledger-journals/j1', '/ledger-journals/j1'],
  ['GET', '/cost-codes?x=1', '/cost-codes?x=1'],
  ['POST', '/passthrough', '/passthrough'],
  ['POST', '/passthrough-download', '/passthrough-download'],
  ['POST', '/passthrough-multipart', '/passthrough-multipart'],
  ['POST', '/passthrough-upload', '/passthrough-upload'],
  ['GET', '/link/account', '/link/account'],
  ['GET', '/link/companies', '/link/companies'],
  ['POST', '/link/sessions', '/link/sessions'],
  ['GET', '/link/sessions/s1', '/link/sessions/s1'],
  ['POST', '/link/sessions/s1/extend', '/link/sessions/s1/extend'],
  ['POST', '/link/sessions/s1/expire', '/link/sessions/s1/expire'],
  ['GET', '/async-requests/a1', '/async-requests/a1'],
  ['GET', '/webhooks', '/webhooks'],
  ['DELETE', '/webhooks/w1', '/webhooks/w1'],
  ['GET', '/ping', '/ping'],
];

describe("the forwarder's path rule", () => {
  it('refuses every hostile target with the status that says why, for an account token', () => {
    for (const [method, target, status] of hostile) {
      const r = upstreamPath({ method, rawUrl: target, credential: account });
      assert.equal(r.ok, false, `${method} ${JSON.stringify(target.slice(0, 80))} is refused (got ${JSON.stringify(r).slice(0, 200)})`);
      if (r.ok) continue;
      assert.equal(r.status, status, `${method} ${JSON.stringify(target.slice(0, 80))}: ${r.status} ${r.reason}`);
      assert.ok(r.reason.length > 20, `a reason that says what to fix: ${r.reason}`);
      assert.ok(
        [...r.reason].every((c) => c.charCodeAt(0) >= 0x20),
        'the reason echoes no control character',
      );
      assert.ok(r.reason.length < 400, 'the reason does not echo an overlong input');
    }
  });

  it('refuses them for every credential kind', () => {
    for (const credential of [client, picker]) {
      for (const [method, target] of hostile) {
        assert.equal(upstreamPath({ method, rawUrl: target, credential }).ok, false, `${credential.kind}: ${method} ${target.slice(0, 80)}`);
      }
    }
  });

  it('rebuilds the upstream path of an allowed target from segments decoded once and encoded again', () => {
    for (const [method, target, expected] of allowed) {
      const r = upstreamPath({ method, rawUrl: target, credential: account });
      assert.deepEqual(r, { ok: true, path: expected }, `${method} ${target.slice(0, 80)}`);
      // Stable: the rebuilt path passes the rule unchanged.
      assert.deepEqual(
        upstreamPath({ method, rawUrl: expected, credential: account }),
        { ok: true, path: expected },
        `${method} ${expected.slice(0, 80)} again`,
      );
    }
  });

  it('keeps one trailing slash as the caller wrote it, matching the path without it', () => {
    assert.deepEqual(upstreamPath({ method: 'POST', rawUrl: '/webhooks/', credential: account }), { ok: true, path: '/webhooks/' });
    assert.deepEqual(upstreamPath({ method: 'GET', rawUrl: '/vendors/?page=2', credential: account }), { ok: true, path: '/vendors/?page=2' });
    assert.equal(upstreamPath({ method: 'GET', rawUrl: '/vendors/x/nope/', credential: account }).ok, false);
  });

  it('never rebuilds a path an HTTP client would resolve elsewhere', () => {
    for (const [method, target] of allowed) {
      const r = upstreamPath({ method, rawUrl: target, credential: account });
      assert.ok(r.ok);
      const url = new URL(`http://upstream.invalid${r.path}`);
      assert.equal(url.host, 'upstream.invalid');
      assert.equal(`${url.pathname}${url.search}`, r.path, `${target}: the URL parser changes nothing`);
    }
  });

  it('lets client credentials alone reach only the link-token calls and GET /ping', () => {
    for (const target of ['/link/token/create', '/link/token/exchange']) {
      assert.deepEqual(upstreamPath({ method: 'POST', rawUrl: target, credential: client }), { ok: true, path: target });
      assert.equal(upstreamPath({ method: 'GET', rawUrl: target, credential: client }).ok, false);
    }
    assert.deepEqual(upstreamPath({ method: 'GET', rawUrl: '/ping', credential: client }), { ok: true, path: '/ping' });
    assert.equal(upstreamPath({ method: 'POST', rawUrl: '/ping', credential: client }).ok, false);
    for (const [method, target] of allowed.filter(([, t]) => !t.startsWith('/link/token/') && t !== '/ping')) {
      const r = upstreamPath({ method, rawUrl: target, credential: client });
      assert.ok(!r.ok && r.status === 403, `client credentials: ${method} ${target} refused 403`);
    }
  });

  it('lets a link session read only the areas of its scopes', () => {
    const ok: [string, string][] = [
      ['GET', '/projects'],
      ['GET', '/projects/p1'],
      ['HEAD', '/projects/p1'],
      ['GET', '/link/account'],
      ['GET', '/link/sessions/s1'],
      ['GET', '/drawings/d1/versions'],
      ['GET', '/documents?page=2'],
      ['GET', '/specification-sections/s1'],
    ];
    for (const [method, target] of ok) assert.equal(upstreamPath({ method, rawUrl: target, credential: picker }).ok, true, `session: ${method} ${target}`);
    const refused: [string, string][] = [
      ['GET', '/vendors'],
      ['GET', '/vendors/v1'],
      ['GET', '/files/f1'],
      ['PUT', '/projects/p1'],
      ['POST', '/projects'],
      ['DELETE', '/projects/p1'],
      ['POST', '/link/sessions'],
      ['POST', '/link/sessions/s1/extend'],
      ['POST', '/passthrough'],
      ['GET', '/passthrough'],
      ['GET', '/webhooks'],
      ['GET', '/async-requests/a1'],
    ];
    for (const [method, target] of refused) {
      const r = upstreamPath({ method, rawUrl: target, credential: picker });
      assert.ok(!r.ok && r.status === 403, `session: ${method} ${target} refused 403 (${JSON.stringify(r)})`);
    }
    const construction: UpstreamCredential = { kind: 'session', scopes: ['construction.projects:read'] };
    assert.equal(upstreamPath({ method: 'GET', rawUrl: '/projects/p1', credential: construction }).ok, true);
    assert.equal(upstreamPath({ method: 'GET', rawUrl: '/link/account', credential: construction }).ok, false);
    // The area is the decoded first segment: an encoded area name is the same area, never another.
    assert.equal(upstreamPath({ method: 'GET', rawUrl: '/%70rojects/p1', credential: picker }).ok, true);
  });

  it('keeps the admin APIs off the surface and every forwarding route of the mirror on it', () => {
    assert.ok(
      upstreamSurface.every((t) => !/^\/_?admin(\/|$)/.test(t)),
      'no /admin/* or /_admin/* template',
    );
    const routes = [
      ...resources.flatMap((d) => {
        if (d.scope === 'child') {
          const parent = resourceDef(d.parent!)!;
          return [
            ['GET', `${parent.path}/x/${d.path}`],
            ['GET', `${parent.path}/x/${d.path}/y`],
          ];
        }
        return [
          ['GET', d.path],
          ['GET', `${d.path}/x`],
          ['POST', d.path],
          ['PUT', `${d.path}/x`],
          ['PATCH', `${d.path}/x`],
        ];
      }),
      ['GET', '/root-folder'],
      ['POST', '/link/sessions'],
      ['GET', '/link/sessions'],
      ['GET', '/link/sessions/x'],
      ['POST', '/link/sessions/x/extend'],
      ['POST', '/link/sessions/x/expire'],
      ['GET', '/link/account'],
      ['GET', '/link/companies'],
      ['POST', '/passthrough'],
      ['POST', '/passthrough-download'],
      ['POST', '/passthrough-multipart'],
      ['POST', '/passthrough-upload'],
    ];
    for (const [method, path] of routes)
      assert.equal(upstreamPath({ method: method!, rawUrl: path!, credential: account }).ok, true, `${method} ${path} is forwarded`);
  });

  it("holds the real service's collection paths exactly as its reference file lists them", (t) => {
    if (!existsSync(reference)) {
      t.skip(`${reference} is not on this machine`);
      return;
    }
    const file = JSON.parse(readFileSync(reference, 'utf8')) as { collections: { path: string; operations: string[] }[] };
    assert.equal(realServiceCollections.length, 139);
    assert.deepEqual(
      realServiceCollections.map(([path, operations]) => ({ path, operations: [...operations] })),
      file.collections.map((c) => ({ path: c.path, operations: c.operations })),
    );
  });
});
