// Events end to end: upstream webhooks registered at link time drive incremental changes into the
// mirror; forged deliveries are refused; the mirror's own webhooks reach subscribers, also ones
// that were down; async requests survive a worker restart.
import assert from 'node:assert/strict';
import { createServer, type IncomingHttpHeaders, type Server } from 'node:http';
import { after, before, describe, it } from 'node:test';
import { startWorker } from '../../bin/temporal-worker.ts';
import { eventually, sandboxAdmin, startHarness, upstreamAll, type Harness } from '../helpers/harness.ts';

interface Received {
  headers: IncomingHttpHeaders;
  body: Record<string, unknown>;
}

function subscriber(port = 0): Promise<{ server: Server; url: string; received: Received[] }> {
  const received: Received[] = [];
  const server = createServer((req, res) => {
    let data = '';
    req.on('data', (c: Buffer) => (data += c.toString()));
    req.on('end', () => {
      received.push({ headers: req.headers, body: JSON.parse(data) as Record<string, unknown> });
      res.writeHead(200).end();
    });
  });
  return new Promise((resolve) =>
    server.listen(port, '127.0.0.1', () => {
      const { port: p } = server.address() as { port: number };
      resolve({ server, url: `http://127.0.0.1:${p}/hook`, received });
    }),
  );
}

describe('events and async requests', { timeout: 240_000 }, () => {
  let h: Harness;
  let account: { accountId: string; accountToken: string };
  const headers = () => ({ ...h.clientHeaders, 'account-token': account.accountToken });

  before(async () => {
    h = await startHarness({ sandbox: { size: 12 } });
    account = await h.link('buildpro');
    const run = await h.sync.onLinked(account.accountId);
    const result = (await run.result()) as { failed: unknown[] };
    assert.deepEqual(result.failed, []);
  });
  after(async () => {
    await h?.close();
  });

  it('registers upstream webhooks with a secret per webhook, for every supported type', async () => {
    const regs = await h.services.prisma.webhookRegistration.findMany({ where: { accountId: account.accountId } });
    assert.ok(regs.length >= 3, `registered ${regs.length}`);
    assert.ok(regs.some((r) => r.type === 'vendor' && r.event === 'UPDATE'));
    assert.equal(new Set(regs.map((r) => r.authorizationHash)).size, regs.length, 'every webhook has its own secret');
    const upstream = await fetch(`${h.sandbox.url}/webhooks`, { headers: { ...h.upstreamHeaders, 'account-token': account.accountToken } });
    const body = (await upstream.json()) as { data?: unknown[] } | unknown[];
    const list = Array.isArray(body) ? body : (body.data ?? []);
    assert.ok(list.length >= regs.length - 1, 'the upstream knows them');
  });

  it('applies an upstream update, create and delete to the mirror through webhooks', async () => {
    const vendors = await upstreamAll(h, '/vendors', { 'account-token': account.accountToken });
    const target = vendors[0]!;
    await sandboxAdmin(h, 'PATCH', '/_admin/objects', {
      account_token: account.accountToken,
      resource: 'vendors',
      id: target.id,
      patch: { name: 'Renamed by webhook' },
    });
    await eventually('the update to be visible in the read API', async () => {
      const res = await h.app.inject({ method: 'GET', url: `/vendors/${String(target.id)}`, headers: headers() });
      return res.json<{ name?: string }>().name === 'Renamed by webhook' ? true : undefined;
    });

    const created = await sandboxAdmin<Record<string, unknown>>(h, 'POST', '/_admin/objects', {
      account_token: account.accountToken,
      resource: 'vendors',
      object: { name: 'New vendor via webhook' },
    });
    const createdId = String((created.data as Record<string, unknown> | undefined)?.id ?? created.id);
    await eventually('the created vendor to be visible', async () => {
      const res = await h.app.inject({ method: 'GET', url: `/vendors/${createdId}`, headers: headers() });
      return res.statusCode === 200 ? true : undefined;
    });

    await sandboxAdmin(h, 'DELETE', '/_admin/objects', { account_token: account.accountToken, resource: 'vendors', id: target.id });
    await eventually('the deleted vendor to disappear', async () => {
      const res = await h.app.inject({ method: 'GET', url: `/vendors/${String(target.id)}`, headers: headers() });
      return res.statusCode === 404 ? true : undefined;
    });
    const listed = await h.app.inject({ method: 'GET', url: '/vendors?per_page=1000&include_deleted=true', headers: headers() });
    assert.ok(
      listed.json<{ data: { id: string }[] }>().data.some((v) => v.id === target.id),
      'deleted records stay queryable with include_deleted',
    );

    // After all of it, the mirror equals the upstream.
    const upstreamNow = await upstreamAll(h, '/vendors', { 'account-token': account.accountToken });
    const mirror = await h.app.inject({ method: 'GET', url: '/vendors?per_page=1000', headers: headers() });
    const mirrorIds = mirror
      .json<{ data: { id: string }[] }>()
      .data.map((v) => v.id)
      .sort();
    assert.deepEqual(mirrorIds, upstreamNow.map((v) => String(v.id)).sort());
  });

  it('refuses a delivery with a forged Authorization and stores nothing', async () => {
    const reg = (await h.services.prisma.webhookRegistration.findFirst({ where: { accountId: account.accountId } }))!;
    const before = await h.services.prisma.inboxEvent.count();
    const res = await fetch(`${h.apiUrl}/webhooks/inbound/${reg.id}`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: 'forged' },
      body: JSON.stringify({ event: 'UPDATE', type: 'vendor', target: '00000000-0000-4000-8000-000000000000' }),
    });
    assert.equal(res.status, 401);
    const missing = await fetch(`${h.apiUrl}/webhooks/inbound/${reg.id}`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{}' });
    assert.equal(missing.status, 401);
    assert.equal(await h.services.prisma.inboxEvent.count(), before);
  });

  it("delivers the mirror's changes to its own subscribers, also to one that was down", async () => {
    const up = await subscriber();
    // A port that refuses connections until the second subscriber starts on it.
    const parked = await subscriber();
    const downPort = Number(new URL(parked.url).port);
    await new Promise((r) => parked.server.close(r));
    try {
      const create = async (url: string) => {
        const res = await h.app.inject({
          method: 'POST',
          url: '/webhooks',
          headers: headers(),
          payload: { callback_url: url, authorization_header: 'Bearer sub-secret', event: 'UPDATE', type: 'vendor' },
        });
        assert.equal(res.statusCode, 201, res.body);
        return res.json<{ id: string; target: string }>();
      };
      const live = await create(up.url);
      const down = await create(`http://127.0.0.1:${downPort}/hook`);
      assert.equal(live.target, 'vendor:*');

      const vendors = await upstreamAll(h, '/vendors', { 'account-token': account.accountToken });
      const target = vendors[1]!;
      await sandboxAdmin(h, 'PATCH', '/_admin/objects', {
        account_token: account.accountToken,
        resource: 'vendors',
        id: target.id,
        patch: { name: 'Seen by subscribers' },
      });
      const got = await eventually('the live subscriber to receive the update', async () => up.received.find((r) => r.body.target === target.id));
      assert.equal(got.headers.authorization, 'Bearer sub-secret');
      assert.equal(got.body.event, 'UPDATE');
      assert.equal(got.body.type, 'vendor');
      assert.equal((got.body.source_data as { data: { name: string } }).data.name, 'Seen by subscribers');

      await eventually('the failure to the down subscriber to be recorded', async () => {
        const row = await h.services.prisma.subscription.findUnique({ where: { id: down.id } });
        return row && row.failures > 0 ? row : undefined;
      });
      const back = await subscriber(downPort);
      try {
        const late = await eventually(
          'the subscriber that came back to receive the update',
          async () => back.received.find((r) => r.body.target === target.id),
          60_000,
        );
        assert.equal(late.body.event, 'UPDATE');
      } finally {
        await new Promise((r) => back.server.close(r));
      }
      const listed = await h.app.inject({ method: 'GET', url: '/webhooks', headers: headers() });
      assert.equal(listed.json<{ data: unknown[] }>().data.length, 2);
      const del = await h.app.inject({ method: 'DELETE', url: `/webhooks/${down.id}`, headers: headers() });
      assert.equal(del.statusCode, 200);
    } finally {
      await new Promise((r) => up.server.close(r));
    }
  });

  it('tells a SYNCED subscriber when a pass of a stream committed every page, with its counts', async () => {
    const hook = await subscriber();
    try {
      const res = await h.app.inject({
        method: 'POST',
        url: '/webhooks',
        headers: headers(),
        payload: { callback_url: hook.url, event: 'SYNCED', type: 'vendor' },
      });
      assert.equal(res.statusCode, 201, res.body);
      const vendors = await upstreamAll(h, '/vendors', { 'account-token': account.accountToken });
      await sandboxAdmin(h, 'PATCH', '/_admin/objects', {
        account_token: account.accountToken,
        resource: 'vendors',
        id: vendors[0]!.id,
        patch: { name: 'Changed before the pass' },
      });
      const result = await (await h.sync.start({ accountId: account.accountId, mode: 'full', resource: 'vendors' })).result();
      assert.deepEqual(result.failed, []);
      const got = await eventually('the SYNCED event', async () => hook.received.find((r) => r.body.event === 'SYNCED'), 60_000);
      assert.equal(got.body.type, 'vendor');
      assert.equal(got.body.target, 'vendor:*');
      const data = (got.body.source_data as { data: { resource: string; mode: string; added: number; updated: number; deleted: number; unchanged: number } })
        .data;
      assert.equal(data.resource, 'vendors');
      assert.equal(data.mode, 'full');
      assert.equal(data.added + data.updated + data.unchanged, vendors.length, 'the counts cover every record of the pass');
      assert.equal(data.deleted, 0);
    } finally {
      await new Promise((r) => hook.server.close(r));
    }
  });

  it('runs an async request durably, across a worker restart, and serves the stored result', async () => {
    await h.worker.shutdown();
    const res = await h.app.inject({ method: 'GET', url: '/vendors?per_page=5', headers: { ...headers(), 'async-request': 'true' } });
    assert.equal(res.statusCode, 202);
    assert.equal(res.body, '');
    const id = String(res.headers['svc-async-request-id']);
    assert.equal(res.headers['svc-async-request-state'], 'pending');
    assert.ok(res.headers['svc-async-request-expires-at']);
    const pending = await h.app.inject({ method: 'GET', url: `/async-requests/${id}`, headers: headers() });
    assert.equal(pending.headers['svc-async-request-state'], 'pending');

    h.worker = await startWorker(h.services, { publicBaseUrl: h.apiUrl });
    const done = await eventually('the async request to execute', async () => {
      const r = await h.app.inject({ method: 'GET', url: `/async-requests/${id}`, headers: headers() });
      return r.headers['svc-async-request-state'] === 'executed' ? r : undefined;
    });
    const direct = await h.app.inject({ method: 'GET', url: '/vendors?per_page=5', headers: headers() });
    assert.deepEqual(done.json(), direct.json());
    assert.ok(done.headers['svc-async-request-finished-at']);

    const other = await h.link('fieldops');
    const foreign = await h.app.inject({ method: 'GET', url: `/async-requests/${id}`, headers: { ...h.clientHeaders, 'account-token': other.accountToken } });
    assert.equal(foreign.statusCode, 404, 'another account cannot read it');
  });
});
