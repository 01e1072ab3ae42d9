// What the forwarder sends upstream besides the path: the credential the upstream takes for the way
// the caller authenticated (never the caller's own credential headers, never the worker's internal
// credential; every other header as it came, but hop-by-hop ones), and a URL that stays on the configured upstream's origin and base path.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { internalHeader } from '../../../api/auth.ts';
import { forwardHeaders, upstreamUrl, type UpstreamTarget } from '../../../api/forward.ts';

const target: UpstreamTarget = {
  baseUrl: 'http://upstream.test:4010',
  clientId: 'operator-id',
  clientSecret: 'operator-secret',
  apiVersion: '2021-11-21',
  headerPrefix: 'Svc',
};

const incoming = {
  'api-version': '2021-11-21',
  'client-id': 'mirror-client',
  'client-secret': 'mirror-secret',
  'account-token': 'caller-token',
  session: 'sess_caller',
  [internalHeader]: 'acct.hmac',
  authorization: 'Bearer x',
  cookie: 'a=b',
  host: '127.0.0.1:6379',
  'project-id': 'p1',
  'include-source-data': 'true',
  'passthrough-path': '/x',
  'line-items-expand': 'true',
  'return-source-id': 'true',
  'x-other': 'kept',
  'x-forwarded-for': '10.0.0.1',
  'x-forwarded-host': 'evil.example',
  forwarded: 'host=evil.example',
  connection: 'keep-alive, x-hop',
  'x-hop': 'this connection only',
  'transfer-encoding': 'chunked',
  'accept-encoding': 'gzip',
};

describe('forwarded request headers', () => {
  it("sends an account request with the operator's client credentials and the account token given", () => {
    const h = forwardHeaders(incoming, target, { kind: 'account', accountToken: 'stored-token' });
    assert.deepEqual(
      [...h],
      [
        ['api-version', '2021-11-21'],
        ['client-id', 'operator-id'],
        ['client-secret', 'operator-secret'],
        ['account-token', 'stored-token'],
        ['project-id', 'p1'],
        ['include-source-data', 'true'],
        ['passthrough-path', '/x'],
        ['line-items-expand', 'true'],
        ['return-source-id', 'true'],
        ['x-other', 'kept'],
      ],
    );
  });

  it("sends the credential before the caller's headers, however many and whatever their names", () => {
    // A server reads a bounded number of headers (Node: the first thousand): the credential must come first.
    const many: Record<string, string> = { ...incoming };
    for (let i = 0; i < 1200; i++) many[i % 2 === 0 ? String(i) : `x-pad-${i}`] = 'v';
    for (const auth of [{ kind: 'client' as const }, { kind: 'account' as const, accountToken: 't' }, { kind: 'session' as const, session: 's' }]) {
      const names = [...forwardHeaders(many, target, auth).keys()];
      const credential =
        auth.kind === 'session' ? ['session'] : auth.kind === 'client' ? ['client-id', 'client-secret'] : ['client-id', 'client-secret', 'account-token'];
      assert.deepEqual(names.slice(0, 1 + credential.length), ['api-version', ...credential], auth.kind);
      assert.equal(names.length, 1 + credential.length + 6 + 1200, `${auth.kind}: every other header is passed`);
    }
  });

  it("passes every header it does not know, never hop-by-hop ones or what describes the caller's connection", () => {
    const h = Object.fromEntries(forwardHeaders(incoming, target, { kind: 'account', accountToken: 't' }));
    assert.equal(h['return-source-id'], 'true');
    assert.equal(h['x-other'], 'kept');
    for (const name of ['x-forwarded-for', 'x-forwarded-host', 'forwarded', 'connection', 'x-hop', 'transfer-encoding', 'accept-encoding'])
      assert.equal(h[name], undefined, name);
  });

  it('sends a link session alone: no client secret, no account token', () => {
    const h = Object.fromEntries(forwardHeaders(incoming, target, { kind: 'session', session: 'sess_caller' }));
    assert.equal(h.session, 'sess_caller');
    for (const name of ['client-id', 'client-secret', 'account-token']) assert.equal(h[name], undefined, name);
  });

  it('sends client credentials alone for a client call, whatever account token the caller added', () => {
    const h = Object.fromEntries(forwardHeaders(incoming, target, { kind: 'client' }));
    assert.equal(h['client-secret'], 'operator-secret');
    assert.equal(h['account-token'], undefined);
    assert.equal(h.session, undefined);
  });

  it('never passes the internal credential, cookies, Authorization or Host upstream', () => {
    for (const auth of [{ kind: 'client' as const }, { kind: 'account' as const, accountToken: 't' }, { kind: 'session' as const, session: 's' }]) {
      const h = Object.fromEntries(forwardHeaders({ ...incoming, [`${internalHeader}-expand`]: 'x' }, target, auth));
      for (const name of [internalHeader, `${internalHeader}-expand`, 'authorization', 'cookie', 'host'])
        assert.equal(h[name], undefined, `${auth.kind}: ${name}`);
      assert.ok(!Object.values(h).includes('acct.hmac'), `${auth.kind}: the internal credential's value is nowhere`);
      assert.ok(!Object.values(h).includes('mirror-secret'), `${auth.kind}: the caller's client secret is nowhere`);
    }
  });

  it("builds URLs on the upstream's origin and base path only", () => {
    assert.equal(upstreamUrl('http://upstream.test:4010', '/vendors/a%2Fb?x=1'), 'http://upstream.test:4010/vendors/a%2Fb?x=1');
    assert.equal(upstreamUrl('https://api.example.com/v1/', '/vendors'), 'https://api.example.com/v1/vendors');
    assert.throws(() => upstreamUrl('http://upstream.test:4010', '@evil/x'), /left the upstream/);
    assert.throws(() => upstreamUrl('https://api.example.com/v1', '/../x'), /left the upstream/);
  });
});
