import assert from 'node:assert/strict';
import type { LookupAddress } from 'node:dns';
import { describe, it } from 'node:test';
import { allowEntryProblem, CallbackRefusedError, classifyAddress, createCallbackGuard, type Resolver } from '../../../lib/address-guard.ts';

/** A DNS of the test's own: names map to fixed addresses, anything else does not exist. */
function fakeDns(table: Record<string, string[]>): Resolver & { asked: string[] } {
  const asked: string[] = [];
  const resolve = async (host: string): Promise<LookupAddress[]> => {
    asked.push(host);
    const found = table[host];
    if (!found) throw Object.assign(new Error(`getaddrinfo ENOTFOUND ${host}`), { code: 'ENOTFOUND' });
    return found.map((address) => ({ address, family: address.includes(':') ? 6 : 4 }));
  };
  return Object.assign(resolve, { asked });
}

describe('classifyAddress', () => {
  const table: [string, string][] = [
    ['127.0.0.1', 'loopback'],
    ['127.255.255.254', 'loopback'],
    ['::1', 'loopback'],
    ['0:0:0:0:0:0:0:1', 'loopback'],
    ['::ffff:127.0.0.1', 'loopback'],
    ['::ffff:7f00:1', 'loopback'],
    ['10.0.0.1', 'private'],
    ['10.255.255.255', 'private'],
    ['172.16.0.1', 'private'],
    ['172.31.255.255', 'private'],
    ['192.168.1.10', 'private'],
    ['100.64.0.1', 'private'],
    ['100.127.255.255', 'private'],
    ['fc00::1', 'private'],
    ['fd12:3456:789a::1', 'private'],
    ['::ffff:10.1.2.3', 'private'],
    ['::ffff:192.168.0.1', 'private'],
    ['169.254.169.254', 'link-local'],
    ['169.254.0.1', 'link-local'],
    ['fe80::1', 'link-local'],
    ['febf::1', 'link-local'],
    ['::ffff:169.254.169.254', 'link-local'],
    ['0.0.0.0', 'unspecified'],
    ['0.1.2.3', 'unspecified'],
    ['::', 'unspecified'],
    ['224.0.0.1', 'multicast'],
    ['239.255.255.250', 'multicast'],
    ['ff02::1', 'multicast'],
    ['240.0.0.1', 'reserved'],
    ['255.255.255.255', 'reserved'],
    ['192.0.2.1', 'reserved'],
    ['198.18.0.1', 'reserved'],
    ['2001:db8::1', 'reserved'],
    // Addresses that carry an IPv4 address inside: the embedded one decides.
    ['64:ff9b::7f00:1', 'loopback'],
    ['2002:7f00:1::1', 'loopback'],
    ['2002:a00:1::1', 'private'],
    ['::127.0.0.1', 'reserved'],
    // Public ones, next to the edges of the ranges above.
    ['8.8.8.8', 'public'],
    ['93.184.216.34', 'public'],
    ['172.15.255.255', 'public'],
    ['172.32.0.0', 'public'],
    ['100.63.255.255', 'public'],
    ['100.128.0.0', 'public'],
    ['169.253.255.255', 'public'],
    ['11.0.0.0', 'public'],
    ['223.255.255.255', 'public'],
    ['::ffff:8.8.8.8', 'public'],
    ['2606:4700:4700::1111', 'public'],
    ['2a00:1450:4001:80b::200e', 'public'],
    ['64:ff9b::808:808', 'public'],
  ];
  for (const [ip, expected] of table) {
    it(`${ip} is ${expected}`, () => assert.equal(classifyAddress(ip), expected));
  }

  it('refuses what is not an IP address', () => {
    for (const bad of ['localhost', '127.1', '1.2.3.4.5', '::g', '', '[::1]']) assert.throws(() => classifyAddress(bad), TypeError, bad);
  });
});

describe('allow-list entries', () => {
  it('takes host names, addresses and CIDR ranges, and says what is wrong with anything else', () => {
    for (const ok of ['127.0.0.1', 'hooks.internal', '10.0.0.0/8', '::1', 'fd00::/8', 'receiver']) assert.equal(allowEntryProblem(ok), undefined, ok);
    for (const bad of ['10.0.0.0/33', '::/129', 'http://x', 'a b', '10.0.0.0/x', '', '*.internal']) assert.match(allowEntryProblem(bad) ?? '', /./, bad);
  });
});

describe('createCallbackGuard().checkUrl', () => {
  const dns = fakeDns({
    'public.example.test': ['93.184.216.34'],
    'internal.example.test': ['10.0.0.7'],
    'mixed.example.test': ['93.184.216.34', '192.168.0.3'],
    'v6.example.test': ['2606:4700:4700::1111'],
    'v6-local.example.test': ['fe80::1'],
    localhost: ['127.0.0.1', '::1'],
  });
  const guard = createCallbackGuard({ resolve: dns });

  const refused: [string, RegExp][] = [
    ['http://127.0.0.1/hook', /loopback/],
    ['http://127.1/hook', /loopback/],
    ['http://2130706433/hook', /loopback/],
    ['http://0x7f000001/hook', /loopback/],
    ['http://0177.0.0.1/hook', /loopback/],
    ['http://0x7f.1/hook', /loopback/],
    ['http://[::1]/hook', /loopback/],
    ['http://[::ffff:127.0.0.1]/hook', /loopback/],
    ['http://[0:0:0:0:0:ffff:7f00:1]/hook', /loopback/],
    ['http://localhost:8080/hook', /loopback/],
    ['http://LOCALHOST./hook', /loopback/],
    ['http://api.localhost/hook', /loopback/],
    ['http://10.1.2.3/hook', /private/],
    ['http://172.16.5.4/hook', /private/],
    ['http://192.168.0.1/hook', /private/],
    ['http://100.64.0.1/hook', /private/],
    ['http://[fd00::1]/hook', /private/],
    ['http://169.254.169.254/latest/meta-data/', /link-local/],
    ['http://[fe80::1]/hook', /link-local/],
    ['http://0.0.0.0:4000/hook', /unspecified/],
    ['http://0/hook', /unspecified/],
    ['http://[::]/hook', /unspecified/],
    ['http://224.0.0.1/hook', /multicast/],
    ['http://255.255.255.255/hook', /reserved/],
    ['http://internal.example.test/hook', /public address/],
    ['http://mixed.example.test/hook', /public address/],
    ['http://v6-local.example.test/hook', /public address/],
    ['http://nowhere.example.test/hook', /public address/],
    ['https://user:pw@public.example.test/hook', /user name or password/],
    ['https://user@public.example.test/hook', /user name or password/],
    ['ftp://public.example.test/hook', /http/],
    ['not a url', /URL/],
  ];
  for (const [url, reason] of refused) {
    it(`refuses ${url}`, async () => {
      const verdict = await guard.checkUrl(url);
      assert.equal(verdict.ok, false, `${url} was accepted`);
      if (!verdict.ok) assert.match(verdict.reason, reason);
    });
  }

  it('accepts names that resolve to public addresses only, and public literals', async () => {
    for (const url of [
      'https://public.example.test/hook',
      'http://v6.example.test:8443/x?y=1',
      'https://93.184.216.34/hook',
      'https://[2606:4700:4700::1111]/hook',
    ]) {
      const verdict = await guard.checkUrl(url);
      assert.ok(verdict.ok, `${url}: ${verdict.ok ? '' : verdict.reason}`);
    }
  });

  it('does not ask the DNS about literals and localhost names', async () => {
    dns.asked.length = 0;
    for (const url of ['http://127.1/', 'http://api.localhost/', 'http://[::1]/', 'http://93.184.216.34/']) await guard.checkUrl(url);
    assert.deepEqual(dns.asked, []);
  });

  it("accepts what the operator's allow-list names: hosts, addresses, ranges", async () => {
    const allowed = createCallbackGuard({ resolve: dns, allow: ['127.0.0.1', 'internal.example.test', '192.168.0.0/16', 'fd00::/8'] });
    for (const url of [
      'http://127.0.0.1:9000/hook',
      'http://127.1:9000/hook',
      'http://[::ffff:127.0.0.1]/hook',
      'http://internal.example.test/hook',
      'http://mixed.example.test/hook',
      'http://192.168.7.7/hook',
      'http://[fd00::5]/hook',
    ]) {
      const verdict = await allowed.checkUrl(url);
      assert.ok(verdict.ok, `${url}: ${verdict.ok ? '' : verdict.reason}`);
    }
    for (const url of ['http://127.0.0.2/hook', 'http://localhost/hook', 'http://10.0.0.1/hook', 'http://[::1]/hook']) {
      assert.equal((await allowed.checkUrl(url)).ok, false, url);
    }
  });
});

describe('createCallbackGuard().lookup (the address a delivery connects to)', () => {
  const dns = fakeDns({
    'rebound.example.test': ['127.0.0.1'],
    'public.example.test': ['93.184.216.34', '2606:4700:4700::1111'],
    'internal.example.test': ['10.0.0.7'],
  });
  const lookup = (guard: ReturnType<typeof createCallbackGuard>, host: string, all: boolean) =>
    new Promise<{ error: NodeJS.ErrnoException | null; address: string | LookupAddress[]; family?: number }>((resolve) =>
      guard.lookup(host, { all }, (error, address, family) => resolve({ error, address, family })),
    );

  it('hands back checked addresses, one or all as asked', async () => {
    const guard = createCallbackGuard({ resolve: dns });
    const one = await lookup(guard, 'public.example.test', false);
    assert.equal(one.error, null);
    assert.equal(one.address, '93.184.216.34');
    assert.equal(one.family, 4);
    const all = await lookup(guard, 'public.example.test', true);
    assert.deepEqual(all.address, [
      { address: '93.184.216.34', family: 4 },
      { address: '2606:4700:4700::1111', family: 6 },
    ]);
  });

  it('refuses a name that resolves to a blocked address now, whatever it resolved to before', async () => {
    const guard = createCallbackGuard({ resolve: dns });
    const r = await lookup(guard, 'rebound.example.test', false);
    assert.ok(r.error instanceof CallbackRefusedError);
    assert.equal(r.error.code, 'ECALLBACKREFUSED');
    assert.ok(!r.address || (Array.isArray(r.address) && r.address.length === 0));
  });

  it('lets the allow-list through, by address or by name', async () => {
    assert.equal((await lookup(createCallbackGuard({ resolve: dns, allow: ['127.0.0.0/8'] }), 'rebound.example.test', false)).address, '127.0.0.1');
    assert.equal((await lookup(createCallbackGuard({ resolve: dns, allow: ['internal.example.test'] }), 'internal.example.test', false)).address, '10.0.0.7');
  });

  it('passes resolution failures on with their code', async () => {
    const r = await lookup(createCallbackGuard({ resolve: dns }), 'nowhere.example.test', false);
    assert.equal(r.error?.code, 'ENOTFOUND');
  });
});
