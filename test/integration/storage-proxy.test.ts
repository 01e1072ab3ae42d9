// The storage proxy: file URLs in the mirror's answers are the mirror's own signed links; behind
// them the bytes stream from the upstream (ranges, ETags), a stored upstream URL that expired is
// refreshed, bad or expired links are refused, and every access is recorded.
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { after, before, describe, it } from 'node:test';
import { linkExpiry, storageUrl } from '../../api/storage-proxy.ts';
import { firstProjectId, linkAndSync, startHarness, type Harness } from '../helpers/harness.ts';

interface FileObject {
  id: string;
  url: string;
  preview_url: string;
  filename?: string;
}

const sha = (b: ArrayBuffer) => createHash('sha256').update(Buffer.from(b)).digest('hex');

describe('storage proxy', { timeout: 240_000 }, () => {
  let h: Harness;
  let token: string;
  let accountId: string;
  let projectId: string;

  before(async () => {
    // Upstream storage URLs live 4 s here, so the mirror's stored ones expire during the test.
    h = await startHarness({ sandbox: { size: 6, storageUrlTtlMs: 4_000 } });
    ({ accountId, accountToken: token } = await linkAndSync(h, 'docvault', 'storage'));
    projectId = await firstProjectId(h, accountId);
  });

  after(async () => {
    await h?.close();
  });

  const headers = () => ({ ...h.clientHeaders, 'account-token': token, 'project-id': projectId });
  async function mirrorFiles(): Promise<FileObject[]> {
    const res = await fetch(`${h.apiUrl}/files?per_page=5`, { headers: headers() });
    assert.equal(res.status, 200, await res.clone().text());
    return ((await res.json()) as { data: FileObject[] }).data;
  }
  async function upstreamBytes(id: string, range?: string): Promise<ArrayBuffer> {
    const obj = (await (
      await fetch(`${h.sandbox.url}/files/${id}`, { headers: { ...h.upstreamHeaders, 'account-token': token, 'project-id': projectId } })
    ).json()) as FileObject;
    const res = await fetch(obj.url, range ? { headers: { range } } : {});
    assert.ok(res.ok, `the sandbox serves the file: ${res.status}`);
    return res.arrayBuffer();
  }

  it('serves file URLs as its own signed links, and the bytes behind them, whole and by range', async () => {
    const [file] = await mirrorFiles();
    assert.ok(file, 'a file is mirrored');
    assert.ok(file.url.startsWith(`${h.apiUrl}/storage/files/`), `url is the mirror's link: ${file.url}`);
    assert.ok(file.preview_url.startsWith(`${h.apiUrl}/storage/files/`));
    assert.ok(!file.url.includes(token), 'no token in the link');

    const whole = await fetch(file.url);
    assert.equal(whole.status, 200);
    assert.match(whole.headers.get('content-disposition') ?? '', /^attachment/);
    assert.equal(whole.headers.get('access-control-allow-origin'), null, 'a download allows no other origin, as the upstream storage');
    assert.equal(sha(await whole.arrayBuffer()), sha(await upstreamBytes(file.id)), 'the same bytes as upstream');

    const part = await fetch(file.url, { headers: { range: 'bytes=10-99' } });
    assert.equal(part.status, 206);
    assert.match(part.headers.get('content-range') ?? '', /^bytes 10-99\//);
    assert.equal(sha(await part.arrayBuffer()), sha(await upstreamBytes(file.id, 'bytes=10-99')));

    const preview = await fetch(file.preview_url);
    assert.equal(preview.status, 200);
    assert.match(preview.headers.get('content-disposition') ?? '', /^inline/);
    assert.equal(preview.headers.get('access-control-allow-origin'), '*', 'a preview allows any origin');
    await preview.arrayBuffer();
  });

  it('answers If-None-Match with 304 when the upstream gives an ETag', async () => {
    const files = await mirrorFiles();
    let tried = 0;
    for (const file of files) {
      const first = await fetch(file.url);
      await first.arrayBuffer();
      const etag = first.headers.get('etag');
      if (!etag) continue;
      tried++;
      const again = await fetch(file.url, { headers: { 'if-none-match': etag } });
      assert.equal(again.status, 304);
    }
    assert.ok(tried > 0, 'the source system gives ETags for its files');
  });

  it('refuses a tampered or expired link with 403 and a message', async () => {
    const [file] = await mirrorFiles();
    const tampered = file!.url.replace(/signature=([^&])/, (_m, c: string) => `signature=${c === 'A' ? 'B' : 'A'}`);
    const bad = await fetch(tampered);
    assert.equal(bad.status, 403);
    assert.match(((await bad.json()) as { message: string }).message, /signature/);

    const scope = new URL(file!.url).searchParams.get('scope')!;
    const expired = storageUrl(h.apiUrl, h.services.keys.signingKey, {
      accountId,
      resource: 'files',
      scope,
      id: file!.id,
      field: 'url',
      expiresAt: Math.floor(Date.now() / 1000) - 1,
    });
    const old = await fetch(expired);
    assert.equal(old.status, 403);
    assert.match(((await old.json()) as { message: string }).message, /expired/);

    const otherAccount = storageUrl(h.apiUrl, Buffer.alloc(32, 1), {
      accountId,
      resource: 'files',
      scope,
      id: file!.id,
      field: 'url',
      expiresAt: linkExpiry(),
    });
    assert.equal((await fetch(otherAccount)).status, 403, 'a link signed with another key');
  });

  it('refreshes an upstream URL that expired, and records every access', async () => {
    const [file] = await mirrorFiles();
    // Ids are unique only within their scope: read the record the link names.
    const scope = new URL(file!.url).searchParams.get('scope')!;
    const stored = async () =>
      (
        await h.services.pool.query<{ url: string }>(
          `SELECT data->>'url' AS url FROM records WHERE account_id = $1 AND resource = 'files' AND scope = $2 AND id = $3`,
          [accountId, scope, file!.id],
        )
      ).rows;
    const found = await stored();
    assert.equal(found.length, 1, 'the link names one record');
    const before = found[0]!.url;
    // Past the upstream URL's lifetime (4 s, its expiry rounded up to the next second).
    await new Promise((r) => setTimeout(r, 6_000));
    assert.equal((await fetch(before)).status, 403, 'the stored upstream URL has expired');
    const res = await fetch(file!.url);
    assert.equal(res.status, 200, 'served through a fresh upstream URL');
    assert.equal(sha(await res.arrayBuffer()), sha(await upstreamBytes(file!.id)));
    assert.notEqual((await stored())[0]!.url, before, 'the fresh URL is kept');

    const { rows } = await h.services.pool.query<{ n: number; fields: string[] }>(
      `SELECT count(*)::int AS n, array_agg(DISTINCT field) AS fields FROM storage_accesses WHERE account_id = $1 AND resource = 'files'`,
      [accountId],
    );
    assert.ok(rows[0]!.n >= 4, `accesses recorded: ${rows[0]!.n}`);
    assert.deepEqual(rows[0]!.fields.sort(), ['preview_url', 'url']);
  });
});
