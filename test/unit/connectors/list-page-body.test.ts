// A list page read through the real client from a local HTTP server: the body the sync writes is the
// bytes that came (after a byte order mark, inflated if gzipped), its digest is SHA-256 of them; a
// caller that needs the records as objects gets them parsed.
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { gzipSync } from 'node:zlib';
import { after, before, describe, it } from 'node:test';
import { startListPage } from '../../../connectors/operations.ts';
import { UpstreamClient } from '../../../connectors/upstream-client.ts';

const records = Array.from({ length: 300 }, (_, i) => ({
  id: `c-${i}`,
  source_id: `s-${i}`,
  name: `Customer ${i} ${'x'.repeat(200)}`,
  source_create_time: '2023-02-09T12:17:27Z',
  source_update_time: null,
}));
const json = Buffer.from(JSON.stringify({ data: records, meta: { current_page: 1, has_more_results: true } }));
const bom = Buffer.of(0xef, 0xbb, 0xbf);

describe('list page bodies read through the client', () => {
  let server: Server;
  let client: UpstreamClient;

  before(async () => {
    server = createServer((req, res) => {
      const variant = new URL(req.url!, 'http://x').pathname;
      if (variant === '/gzip') {
        res.writeHead(200, { 'content-type': 'application/json', 'content-encoding': 'gzip' });
        res.end(gzipSync(json));
        return;
      }
      res.writeHead(200, { 'content-type': 'application/json' });
      const body = variant === '/bom' ? Buffer.concat([bom, json]) : json;
      // Several writes, so the client receives (and joins) several chunks.
      for (let at = 0; at < body.length; at += 16_384) res.write(body.subarray(at, at + 16_384));
      res.end();
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    client = new UpstreamClient({ baseUrl: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, clientId: 'c', clientSecret: 's', maxAttempts: 1 });
  });
  after(async () => {
    await new Promise((resolve) => server.close(resolve));
  });

  for (const variant of ['plain', 'bom', 'gzip'] as const) {
    it(`${variant}: the body as it came, its ids and meta, and its SHA-256`, async () => {
      const answer = await startListPage(client, { accountToken: 't', path: `/${variant}`, page: 1, perPage: 300, digest: {} });
      const page = answer.page;
      assert.ok(page && 'bytes' in page.records, 'the page was scanned, not parsed');
      assert.deepEqual(
        page.ids,
        records.map((r) => r.id),
      );
      assert.deepEqual(page.records.ids, page.ids);
      assert.equal(page.hasMore, true);
      assert.ok(page.records.bytes.equals(json), 'the JSON is the bytes sent, without a byte order mark');
      const sent = variant === 'bom' ? Buffer.concat([bom, json]) : json;
      assert.equal(page.digest, createHash('sha256').update(sent).digest('hex'));
    });

    it(`${variant}: parsed where the caller needs the objects`, async () => {
      const answer = await startListPage(client, { accountToken: 't', path: `/${variant}`, page: 1, perPage: 300, parse: true });
      const page = answer.page;
      assert.ok(page && 'items' in page.records, 'the page was parsed');
      assert.deepEqual(page.records.items, records);
      assert.deepEqual(
        page.ids,
        records.map((r) => r.id),
      );
      assert.equal(page.hasMore, true);
    });
  }

  it('an unchanged body (same digest) comes back unchanged, unread', async () => {
    const digest = createHash('sha256').update(json).digest('hex');
    const answer = await startListPage(client, { accountToken: 't', path: '/plain', page: 1, perPage: 300, digest: { unless: digest } });
    assert.equal(answer.unchanged?.digest, digest);
    assert.equal(answer.page, undefined);
  });
});
