// Each change reaches a subscriber once. A subscription's cursor is a JavaScript Date (milliseconds)
// while Postgres keeps `mirrored_at` to the microsecond: compared as they were, the last change
// delivered stayed after its own cursor and went out again on every poll of the delivery loop
// (3 updates made 492 deliveries in 20 s). Found by the upgrade drill (test/chaos/upgrade-drill.test.ts).
import assert from 'node:assert/strict';
import { createServer, type Server } from 'node:http';
import { after, before, describe, it } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { eventually, sandboxAdmin, startHarness, upstreamAll, type Harness } from '../helpers/harness.ts';

describe('outbound deliveries', { timeout: 120_000 }, () => {
  let h: Harness;
  let server: Server;
  const received: string[] = [];

  before(async () => {
    h = await startHarness({ sandbox: { size: 8 } });
    server = createServer((req, res) => {
      let data = '';
      req.on('data', (c: Buffer) => (data += c.toString()));
      req.on('end', () => {
        const body = JSON.parse(data) as { target: string; source_data: { data: { name: string } } };
        received.push(`${body.target} ${body.source_data.data.name}`);
        res.writeHead(200).end();
      });
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  });
  after(async () => {
    await new Promise((r) => server?.close(r));
    await h?.close();
  });

  it('delivers each change once, however often the delivery loop polls', async () => {
    const account = await h.link('buildpro');
    const first = await (await h.sync.onLinked(account.accountId)).result();
    assert.deepEqual(first.failed, []);
    const { port } = server.address() as { port: number };
    const headers = { ...h.clientHeaders, 'account-token': account.accountToken };
    const created = await h.app.inject({
      method: 'POST',
      url: '/webhooks',
      headers,
      payload: { callback_url: `http://127.0.0.1:${port}/hook`, event: 'UPDATE', type: 'vendor' },
    });
    assert.equal(created.statusCode, 201, created.body);
    const vendors = (await upstreamAll(h, '/vendors', { 'account-token': account.accountToken })).slice(0, 3);
    const expected = vendors.map((v, i) => `${String(v.id)} Delivered once ${i}`);
    for (const [i, v] of vendors.entries()) {
      await sandboxAdmin(h, 'PATCH', '/_admin/objects', {
        account_token: account.accountToken,
        resource: 'vendors',
        id: v.id,
        patch: { name: `Delivered once ${i}` },
      });
    }
    await eventually('the three updates delivered', async () => (expected.every((e) => received.includes(e)) ? true : undefined), 60_000);
    // The idle loop polls again after 0.5, 1, 1.5, 2 ... s: several polls with nothing new.
    await sleep(6_000);
    assert.deepEqual([...received].sort(), [...expected].sort(), `${received.length} deliveries for 3 changes`);
  });
});
