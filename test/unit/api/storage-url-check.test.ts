// The storage proxy's rule for the upstream URLs it fetches: only the upstream's storage origin, only
// `{storage_url}/download/<file>` or `/preview/<file>`, nothing the URL parser or the storage server
// could turn into another path or host. A table of hostile URLs, each refused.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { checkStorageUrl, defaultStorageUrls, storageLocations } from '../../../api/storage-proxy.ts';
import { parseConfig } from '../../../lib/config.ts';
import { generateKey } from '../../../lib/crypto.ts';
import { ConfigError } from '../../../lib/errors.ts';

const storage = 'http://127.0.0.1:4010/storage';
const locations = storageLocations([storage, 'https://files.example.com']);
const q = '?signature=abc.def&expires_at=1900000000';

describe('checkStorageUrl', () => {
  it('accepts the URLs the upstream issues: download and preview under a storage URL', () => {
    for (const url of [
      `${storage}/download/report.pdf${q}`,
      `${storage}/preview/report.pdf${q}`,
      `${storage}/download/Site%20plan%20(rev%202).dwg${q}`,
      `${storage}/download/100%25%20done.pdf${q}`,
      `${storage}/download/plan.pdf`,
      'https://files.example.com/download/a.png?x=1',
      'https://files.example.com:443/preview/a.png',
      'HTTPS://FILES.EXAMPLE.COM/preview/a.png',
    ]) {
      const r = checkStorageUrl(url, locations);
      assert.ok(r.ok, `${url}: ${r.ok ? '' : r.reason}`);
    }
  });

  const hostile: [string, unknown][] = [
    ['another host', `http://127.0.0.1:9/storage/download/a.pdf${q}`],
    ['another port of the upstream host', `http://127.0.0.1:4011/storage/download/a.pdf`],
    ['localhost for 127.0.0.1', `http://localhost:4010/storage/download/a.pdf`],
    ['cloud metadata', 'http://169.254.169.254/latest/meta-data/'],
    ['https for http', `https://127.0.0.1:4010/storage/download/a.pdf`],
    ['http for https', 'http://files.example.com/download/a.png'],
    ['userinfo naming the storage host', `http://127.0.0.1:4010@127.0.0.1:9/storage/download/a.pdf`],
    ['userinfo on the storage host', `http://user:pass@127.0.0.1:4010/storage/download/a.pdf`],
    ['a suffix of the storage host', 'https://files.example.com.evil.example/download/a.png'],
    ['file scheme', 'file:///etc/passwd'],
    ['ftp scheme', 'ftp://127.0.0.1:4010/storage/download/a.pdf'],
    ['gopher scheme', 'gopher://127.0.0.1:4010/_x'],
    ['scheme-relative', '//127.0.0.1:9/storage/download/a.pdf'],
    ['relative path', '/storage/download/a.pdf'],
    ['not under the storage path', 'http://127.0.0.1:4010/_admin/accounts'],
    ['a sibling of the storage path', 'http://127.0.0.1:4010/storagex/download/a.pdf'],
    ['no kind', `${storage}/a.pdf`],
    ['an unknown kind', `${storage}/upload/a.pdf`],
    ['no file name', `${storage}/download/`],
    ['two segments', `${storage}/download/a/b.pdf`],
    ['dot-dot segment', `${storage}/download/../../_admin/accounts`],
    ['dot segment', `${storage}/./download/a.pdf`],
    ['encoded dot-dot', `${storage}/download/%2e%2e/%2e%2e/_admin/accounts`],
    ['encoded dot-dot, upper case', `${storage}/download/%2E%2E/x`],
    ['half-encoded dot-dot', `${storage}/download/.%2e/x`],
    ['encoded slash', `${storage}/download/..%2f..%2f_admin%2faccounts`],
    ['encoded backslash', `${storage}/download/..%5c..%5c_admin`],
    ['double-encoded dot-dot', `${storage}/download/%252e%252e`],
    ['double-encoded slash', `${storage}/download/a%252fb`],
    ['backslash', `${storage}/download/..\\..\\_admin\\accounts`],
    ['backslash after the host', 'http://127.0.0.1:4010\\@127.0.0.1:9/storage/download/a.pdf'],
    ['a fragment', `${storage}/download/a.pdf#x`],
    ['whitespace', `${storage}/download/a b.pdf`],
    ['a newline (header injection)', `${storage}/download/a.pdf\r\nHost: evil`],
    ['a tab in the host', 'http://127.0.0.1:40\t10/storage/download/a.pdf'],
    ['non-ASCII', `${storage}/download/café.pdf`],
    ['a NUL', `${storage}/download/a\u0000.pdf`],
    ['overlong', `${storage}/download/${'a'.repeat(9000)}`],
    ['not a string', 42],
    ['null', null],
    ['an empty string', ''],
  ];
  for (const [name, url] of hostile) {
    it(`refuses ${name}`, () => {
      const r = checkStorageUrl(url, locations);
      assert.equal(r.ok, false, `${String(url).slice(0, 200)} was accepted`);
    });
  }

  it('refuses everything when no storage URL is configured', () => {
    assert.equal(checkStorageUrl(`${storage}/download/a.pdf`, storageLocations([])).ok, false);
  });

  it('reads a storage URL at the origin root and one with a trailing slash', () => {
    const l = storageLocations(['http://127.0.0.1:4010/storage/', 'https://cdn.example.com/']);
    assert.ok(checkStorageUrl('http://127.0.0.1:4010/storage/download/a.pdf', l).ok);
    assert.ok(checkStorageUrl('https://cdn.example.com/preview/a.pdf', l).ok);
    assert.equal(checkStorageUrl('https://cdn.example.com/x/preview/a.pdf', l).ok, false);
  });

  it("defaults to the upstream base URL's /storage (the sandbox's storage URL)", () => {
    assert.deepEqual(defaultStorageUrls('http://127.0.0.1:4010'), ['http://127.0.0.1:4010/storage']);
    assert.deepEqual(defaultStorageUrls('https://api.example.com/v1/'), ['https://api.example.com/v1/storage']);
  });
});

describe('UPSTREAM_STORAGE_URL', () => {
  const valid = {
    UPSTREAM_CLIENT_ID: '0123456789abcdef0123456789abcdef0123',
    UPSTREAM_CLIENT_SECRET: 'a'.repeat(40),
    MIRROR_CLIENT_ID: 'fedcba9876543210fedcba9876543210fedc',
    MIRROR_CLIENT_SECRET: 'b'.repeat(40),
    MIRROR_ENCRYPTION_KEY: generateKey(),
    MIRROR_SIGNING_KEY: generateKey(),
  };
  it('is unset by default, and takes a comma-separated list of http(s) URLs', () => {
    assert.equal(parseConfig(valid).UPSTREAM_STORAGE_URL, undefined);
    assert.deepEqual(parseConfig({ ...valid, UPSTREAM_STORAGE_URL: 'https://a.example.com/storage, https://b.example.com' }).UPSTREAM_STORAGE_URL, [
      'https://a.example.com/storage',
      'https://b.example.com',
    ]);
  });
  it('refuses what is not an http(s) URL without userinfo, query or fragment', () => {
    for (const bad of ['not a url', 'ftp://a.example.com', 'https://u:p@a.example.com', 'https://a.example.com/s?x=1', 'https://a.example.com/#x', ',']) {
      assert.throws(
        () => parseConfig({ ...valid, UPSTREAM_STORAGE_URL: bad }),
        (e: unknown) => e instanceof ConfigError && /UPSTREAM_STORAGE_URL/.test(e.message),
        bad,
      );
    }
  });
});
