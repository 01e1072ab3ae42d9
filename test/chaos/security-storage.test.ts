// Security: the storage proxy fetches only URLs under the upstream's
// storage URL, whatever a record holds, and never follows a redirect; signed storage links are built
// on the mirror's configured base, never on the caller's Host header. A separate local listener
// stands for an internal service: it fails the scenario if anything reaches it.
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, describe, it } from 'node:test';
import type { FastifyInstance } from 'fastify';
import { buildApp } from '../../api/app.ts';
import { linkExpiry, storageUrl } from '../../api/storage-proxy.ts';
import { upstreamTarget } from '../../bin/services.ts';
import { firstProjectId, linkAndSync, sandboxAdmin, startHarness, type Harness } from '../helpers/harness.ts';
import { printOwnRows, scenario } from './report.ts';

const file = import.meta.filename;
const group = 'security';

interface FileObject {
  id: string;
  url: string;
  preview_url: string;
}

const sha = (b: ArrayBuffer | Buffer) =>
  createHash('sha256')
    .update(Buffer.from(b as ArrayBuffer))
    .digest('hex');

/** A plain HTTP server on a loopback port that counts who reaches it. */
async function listen(handler: (res: import('node:http').ServerResponse) => void): Promise<{ server: Server; url: string; port: number; hits: string[] }> {
  const hits: string[] = [];
  const server = createServer((req, res) => {
    hits.push(`${req.method} ${req.url}`);
    handler(res);
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const port = (server.address() as AddressInfo).port;
  return { server, url: `http://127.0.0.1:${port}`, port, hits };
}

describe('security: the storage proxy and its links', { timeout: 300_000 }, () => {
  let h: Harness;
  let token: string;
  let accountId: string;
  let projectId: string;
  let files: FileObject[];
  let internal: Awaited<ReturnType<typeof listen>>;
  let redirector: Awaited<ReturnType<typeof listen>>;
  const extraApps: FastifyInstance[] = [];

  before(async () => {
    h = await startHarness({ sandbox: { size: 6 } });
    ({ accountId, accountToken: token } = await linkAndSync(h, 'docvault', 'security-storage'));
    projectId = await firstProjectId(h, accountId);
    internal = await listen((res) => res.writeHead(200, { 'content-type': 'text/plain' }).end('INTERNAL-SERVICE-SECRET'));
    redirector = await listen((res) => res.writeHead(302, { location: `${internal.url}/storage/download/a.pdf` }).end());
    const res = await fetch(`${h.apiUrl}/files?per_page=20`, { headers: headers() });
    assert.equal(res.status, 200, await res.clone().text());
    files = ((await res.json()) as { data: FileObject[] }).data;
    assert.ok(files.length >= 4, `enough files mirrored: ${files.length}`);
  });

  after(async () => {
    for (const app of extraApps) await app.close();
    internal?.server.close();
    redirector?.server.close();
    await h?.close();
    printOwnRows();
  });

  const headers = () => ({ ...h.clientHeaders, 'account-token': token, 'project-id': projectId });
  /** Each scenario counts only the contacts it caused. */
  const resetHits = () => {
    internal.hits.length = 0;
    redirector.hits.length = 0;
  };
  const scopeOf = (f: FileObject) => new URL(f.url).searchParams.get('scope')!;

  /** What the upstream returned for a record, as if it had: written into the mirror's records table. */
  async function storeUrl(f: FileObject, field: string, url: string): Promise<void> {
    const { rowCount } = await h.services.pool.query(
      `UPDATE records SET data = jsonb_set(data, ARRAY[$5::text], to_jsonb($6::text)) WHERE account_id = $1 AND resource = $2 AND scope = $3 AND id = $4`,
      [accountId, 'files', scopeOf(f), f.id, field, url],
    );
    assert.equal(rowCount, 1, 'one record tampered with');
  }
  async function storedUrl(f: FileObject, field = 'url'): Promise<string> {
    const { rows } = await h.services.pool.query<{ url: string }>(
      `SELECT data->>$5 AS url FROM records WHERE account_id = $1 AND resource = $2 AND scope = $3 AND id = $4`,
      [accountId, 'files', scopeOf(f), f.id, field],
    );
    return rows[0]!.url;
  }
  async function upstreamBytes(id: string): Promise<string> {
    const obj = (await (
      await fetch(`${h.sandbox.url}/files/${id}`, { headers: { ...h.upstreamHeaders, 'account-token': token, 'project-id': projectId } })
    ).json()) as FileObject;
    const res = await fetch(obj.url);
    assert.ok(res.ok, `the sandbox serves the file: ${res.status}`);
    return sha(await res.arrayBuffer());
  }
  /** The error body a caller sees names none of the addresses the mirror was pointed at. */
  function namesNoInternalAddress(text: string): void {
    for (const s of ['127.0.0.1', 'localhost', String(internal.port), String(redirector.port), 'INTERNAL-SERVICE-SECRET'])
      assert.ok(!text.includes(s), `the answer names ${s}: ${text}`);
  }

  it('never fetches a stored URL outside the upstream storage: refreshes the record from the upstream instead', async () => {
    await scenario(
      group,
      'storage proxy: record url pointing at an internal listener (set in the records table)',
      async () => {
        resetHits();
        const [f] = files;
        const sandboxHost = new URL(h.sandbox.url).host;
        const hostile: [string, string][] = [
          ['url', `${internal.url}/storage/download/a.pdf?signature=x&expires_at=9999999999`],
          ['url', `http://localhost:${internal.port}/storage/download/a.pdf`],
          ['url', `http://${sandboxHost}@127.0.0.1:${internal.port}/storage/download/a.pdf`],
          ['url', `HTTP://127.0.0.1:${internal.port}/storage/download/a.pdf`],
          ['url', `http://2130706433:${internal.port}/storage/download/a.pdf`],
          ['preview_url', `${internal.url}/storage/preview/a.pdf`],
        ];
        const expected = await upstreamBytes(f!.id);
        for (const [field, url] of hostile) {
          await storeUrl(f!, field, url);
          const link = field === 'url' ? f!.url : f!.preview_url;
          const res = await fetch(link);
          const body = await res.arrayBuffer();
          assert.equal(internal.hits.length, 0, `the internal listener was contacted for ${url}: ${internal.hits.join(', ')}`);
          assert.equal(res.status, 200, `served from a fresh upstream URL for ${url}: ${res.status} ${Buffer.from(body).toString('utf8').slice(0, 200)}`);
          if (field === 'url') assert.equal(sha(body), expected, 'the bytes are the upstream file');
          const fresh = await storedUrl(f!, field);
          assert.ok(fresh.startsWith(`${h.sandbox.url}/storage/`), `the record now holds the upstream's URL: ${fresh}`);
        }
        return { tries: hostile.length, outcome: 'listener never contacted; each record refreshed from the upstream and its file served' };
      },
      file,
    );
  });

  it('answers 502 with a clear message, fetching nothing, when the upstream itself returns such a URL', async () => {
    await scenario(
      group,
      'storage proxy: upstream returns a record url pointing at an internal listener',
      async () => {
        resetHits();
        const f = files[1]!;
        const hostile = `${internal.url}/storage/download/a.pdf`;
        // The upstream now answers this URL for the file (a refresh reads it again), and the mirror holds it.
        const patched = await sandboxAdmin<{ url: string }>(h, 'PATCH', '/_admin/objects', {
          account_token: token,
          resource: 'files',
          id: f.id,
          project_id: projectId,
          patch: { url: hostile },
        });
        assert.equal(patched.url, hostile, 'the sandbox keeps the patched url');
        await storeUrl(f, 'url', hostile);
        const res = await fetch(f.url);
        const text = await res.text();
        assert.equal(internal.hits.length, 0, `the internal listener was contacted: ${internal.hits.join(', ')}`);
        assert.equal(res.status, 502, text);
        const body = JSON.parse(text) as { message: string; code: string };
        assert.match(body.message, /storage/i);
        assert.match(body.message, /not fetch/i);
        namesNoInternalAddress(text);
        const { rows } = await h.services.pool.query<{ status: number }>(
          `SELECT status FROM storage_accesses WHERE account_id = $1 AND record_id = $2 ORDER BY id DESC LIMIT 1`,
          [accountId, f.id],
        );
        assert.equal(rows[0]?.status, 502, 'the refused access is recorded');
        return { tries: 1, outcome: `502 ${body.code}: listener never contacted` };
      },
      file,
    );
  });

  it('never follows a redirect from the storage host', async () => {
    await scenario(
      group,
      'storage proxy: upstream storage answers 302 to an internal listener',
      async () => {
        resetHits();
        // A mirror whose configured storage includes the redirecting host, so the URL passes the check.
        const { services } = h;
        const app = await buildApp({
          pool: services.pool,
          prisma: services.prisma,
          accounts: services.accounts,
          logger: services.logger,
          upstream: { client: services.upstream, target: upstreamTarget(services.config) },
          hashKey: services.keys.signingKey,
          storageUrls: [`${h.sandbox.url}/storage`, `${redirector.url}/storage`],
        });
        extraApps.push(app);
        const f = files[2]!;
        await storeUrl(f, 'url', `${redirector.url}/storage/download/a.pdf?signature=x&expires_at=9999999999`);
        const link = new URL(
          storageUrl('http://mirror.invalid', services.keys.signingKey, {
            accountId,
            resource: 'files',
            scope: scopeOf(f),
            id: f.id,
            field: 'url',
            expiresAt: linkExpiry(),
          }),
        );
        const res = await app.inject({ method: 'GET', url: `${link.pathname}${link.search}` });
        assert.equal(redirector.hits.length, 1, 'the storage host was asked once');
        assert.equal(internal.hits.length, 0, `the redirect was followed: ${internal.hits.join(', ')}`);
        assert.equal(res.statusCode, 502, res.body);
        assert.match(res.json<{ message: string }>().message, /redirect/i);
        assert.equal(res.headers.location, undefined, 'no Location is relayed');
        namesNoInternalAddress(res.body);
        return { tries: 1, outcome: '502, redirect not followed, no Location relayed' };
      },
      file,
    );
  });

  it('builds signed links on the configured base, never on the Host header', async () => {
    await scenario(
      group,
      'storage links: hostile Host / X-Forwarded-Host on reads',
      async () => {
        const hostile = { host: 'evil.example', 'x-forwarded-host': 'evil.example', 'x-forwarded-proto': 'https' };
        const check = (urls: string[], base: string) => {
          assert.ok(urls.length > 0);
          for (const u of urls) {
            assert.ok(u.startsWith(`${base}/storage/files/`), `a link on ${base}: ${u}`);
            assert.ok(!u.includes('evil.example'), u);
          }
        };
        const linksOf = (o: FileObject) => [o.url, o.preview_url];
        // No PUBLIC_BASE_URL: the API's own listen address.
        const list = await h.app.inject({ method: 'GET', url: '/files?per_page=3', headers: { ...headers(), ...hostile } });
        assert.equal(list.statusCode, 200, list.body);
        check(list.json<{ data: FileObject[] }>().data.flatMap(linksOf), h.apiUrl);
        const one = await h.app.inject({ method: 'GET', url: `/files/${files[3]!.id}`, headers: { ...headers(), ...hostile } });
        assert.equal(one.statusCode, 200, one.body);
        check(linksOf(one.json<FileObject>()), h.apiUrl);

        // PUBLIC_BASE_URL set: always that.
        const { services } = h;
        const base = 'https://mirror.example.com';
        const app = await buildApp({
          pool: services.pool,
          prisma: services.prisma,
          accounts: services.accounts,
          logger: services.logger,
          upstream: { client: services.upstream, target: upstreamTarget(services.config) },
          hashKey: services.keys.signingKey,
          publicBaseUrl: `${base}/`,
        });
        extraApps.push(app);
        const configured = await app.inject({ method: 'GET', url: '/files?per_page=3', headers: { ...headers(), ...hostile } });
        assert.equal(configured.statusCode, 200, configured.body);
        check(configured.json<{ data: FileObject[] }>().data.flatMap(linksOf), base);
        return { tries: 3, outcome: 'links on the listen address, or on PUBLIC_BASE_URL when set' };
      },
      file,
    );
  });
});
