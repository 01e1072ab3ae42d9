// Pass-through streams: a 200 MB download through the mirror arrives intact while the process's
// memory stays flat (the sandbox, the API and this client share the process, so any of them holding
// the body whole would show as 200 MB more).
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { after, before, describe, it } from 'node:test';
import { request } from 'undici';
import { startHarness, type Harness } from '../helpers/harness.ts';

const size = 200 * 1024 * 1024;

describe('pass-through streaming', { timeout: 240_000 }, () => {
  let h: Harness;
  let token: string;

  before(async () => {
    h = await startHarness({ sandbox: { size: 4 } });
    ({ accountToken: token } = await h.link('buildpro', 'streaming'));
  });

  after(async () => {
    await h?.close();
  });

  /** The body's SHA-256 and length, read as it streams, with the peak RSS seen meanwhile. */
  async function download(base: string, headers: Record<string, string>): Promise<{ status: number; sha: string; bytes: number; peakRss: number }> {
    const res = await request(`${base}/passthrough-download`, {
      method: 'POST',
      headers: { ...headers, 'account-token': token, 'content-type': 'application/json' },
      body: JSON.stringify({ method: 'GET', path: '/rest/v1.0/files/big.bin/download', data: { bytes: size } }),
    });
    const hash = createHash('sha256');
    let bytes = 0;
    let peakRss = process.memoryUsage().rss;
    let chunks = 0;
    for await (const chunk of res.body) {
      hash.update(chunk as Buffer);
      bytes += (chunk as Buffer).length;
      if (++chunks % 64 === 0) peakRss = Math.max(peakRss, process.memoryUsage().rss);
    }
    return { status: res.statusCode, sha: hash.digest('hex'), bytes, peakRss };
  }

  it('streams a 200 MB pass-through download intact with flat memory', async () => {
    const upstream = await download(h.sandbox.url, h.upstreamHeaders);
    assert.equal(upstream.status, 200);
    assert.equal(upstream.bytes, size);

    global.gc?.();
    const before = process.memoryUsage().rss;
    const mirrored = await download(h.apiUrl, h.clientHeaders);
    assert.equal(mirrored.status, 200);
    assert.equal(mirrored.bytes, size, 'every byte arrived');
    assert.equal(mirrored.sha, upstream.sha, 'the same bytes as the upstream serves');
    const growth = mirrored.peakRss - before;
    console.log(
      `200 MB through the mirror: RSS ${Math.round(before / 2 ** 20)} MB before, peak ${Math.round(mirrored.peakRss / 2 ** 20)} MB (+${Math.round(growth / 2 ** 20)} MB)`,
    );
    assert.ok(growth < size / 2, `memory stays flat: grew ${Math.round(growth / 2 ** 20)} MB for a ${size / 2 ** 20} MB body`);
  });
});
