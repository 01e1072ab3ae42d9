// Contract tests of admin mutations (overlay on generated data), unified writes, webhooks and
// their delivery quirks, and churn mode.
import assert from 'node:assert/strict';
import { createServer, type IncomingHttpHeaders, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, describe, test } from 'node:test';
import type { Sandbox } from '../../sandbox/server.ts';
import { admin, all, call, link, sleep, start, type Linked, type Rec } from './helpers.ts';

interface Received {
  headers: IncomingHttpHeaders;
  body: Rec;
}

let sb: Sandbox;
let receiver: Server;
let receiverUrl: string;
const received: Received[] = [];

before(async () => {
  sb = await start({ seed: 9 });
  receiver = createServer((req, res) => {
    let data = '';
    req.on('data', (c: Buffer) => (data += c.toString()));
    req.on('end', () => {
      received.push({ headers: req.headers, body: JSON.parse(data) as Rec });
      res.writeHead(204).end();
    });
  });
  await new Promise<void>((r) => receiver.listen(0, '127.0.0.1', r));
  receiverUrl = `http://127.0.0.1:${(receiver.address() as AddressInfo).port}/hooks`;
});
after(async () => {
  await sb.close();
  await new Promise((r) => receiver.close(r));
});

async function waitFor(predicate: () => boolean, ms = 3000): Promise<void> {
  const until = Date.now() + ms;
  while (!predicate()) {
    if (Date.now() > until) throw new Error('timed out waiting');
    await sleep(10);
  }
}

describe('admin mutations', () => {
  let crm: Linked;
  before(async () => {
    crm = await link(sb, 'crmcloud', 'mutations');
  });

  test('create appends; update bumps source_update_time; delete removes; lists and gets reflect it', async () => {
    const before = await all(sb, '/leads', crm.headers, 200);
    assert.equal(before.length, 60);
    const t0 = Date.now();
    const created = await admin(sb, 'POST', '/_admin/objects', {
      account_token: crm.token,
      resource: 'leads',
      object: { description: 'Fresh lead', status: 'New' },
    });
    assert.equal(created.status, 201);
    const newId = String(created.body.id);
    const afterCreate = await all(sb, '/leads', crm.headers, 200);
    assert.equal(afterCreate.length, 61);
    assert.equal(afterCreate.at(-1)!.id, newId, 'created records come last');
    assert.equal((await call(sb, 'GET', `/leads/${newId}`, { headers: crm.headers })).body.description, 'Fresh lead');

    const target = before[10]!;
    const updated = await admin(sb, 'PATCH', '/_admin/objects', { account_token: crm.token, resource: 'leads', id: target.id, patch: { status: 'Qualified' } });
    assert.equal(updated.status, 200);
    assert.equal(updated.body.status, 'Qualified');
    assert.ok(Date.parse(String(updated.body.source_update_time)) >= t0 - 5);
    const got = await call(sb, 'GET', `/leads/${String(target.id)}`, { headers: crm.headers });
    assert.equal(got.body.status, 'Qualified');
    assert.equal(got.body.description, target.description, 'untouched fields stay');
    const afterUpdate = await all(sb, '/leads', crm.headers, 200);
    assert.equal(afterUpdate[10]!.id, target.id, 'order is by creation, not update');

    const since = encodeURIComponent(JSON.stringify([{ field: 'source_update_time', operator: '>=', value: new Date(t0 - 5).toISOString() }]));
    const changed = await all(sb, `/leads?filters=${since}`, crm.headers, 200);
    assert.deepEqual(changed.map((l) => l.id).sort(), [newId, String(target.id)].sort());

    const del = await admin(sb, 'DELETE', '/_admin/objects', { account_token: crm.token, resource: 'leads', id: target.id });
    assert.equal(del.status, 200);
    assert.equal((await call(sb, 'GET', `/leads/${String(target.id)}`, { headers: crm.headers })).status, 404);
    const afterDelete = await all(sb, '/leads', crm.headers, 7);
    assert.equal(afterDelete.length, 60);
    assert.ok(!afterDelete.some((l) => l.id === target.id));
    const again = await admin(sb, 'DELETE', '/_admin/objects', { account_token: crm.token, resource: 'leads', id: target.id });
    assert.equal(again.status, 404);
  });

  test('mutations are scoped: project and parent are required where the data lives', async () => {
    const bp = await link(sb, 'buildpro', 'scoped');
    const projects = (await call(sb, 'GET', '/projects', { headers: bp.headers })).body.data;
    const noProject = await admin(sb, 'POST', '/_admin/objects', { account_token: bp.token, resource: 'cost-codes', object: { name: 'X' } });
    assert.equal(noProject.status, 400);
    const codes = (await call(sb, 'GET', '/cost-codes?per_page=3', { headers: { ...bp.headers, 'project-id': String(projects[0]!.id) } })).body.data;
    const upd = await admin(sb, 'PATCH', '/_admin/objects', {
      account_token: bp.token,
      resource: 'cost-codes',
      project_id: projects[0]!.id,
      id: codes[1]!.id,
      patch: { name: 'Renamed' },
    });
    assert.equal(upd.status, 200);
    // Same id in the other project is untouched.
    const other = await call(sb, 'GET', `/cost-codes/${String(codes[1]!.id)}`, { headers: { ...bp.headers, 'project-id': String(projects[1]!.id) } });
    assert.notEqual(other.body.name, 'Renamed');
    const erp = await link(sb, 'sqlerp', 'children');
    const inv = (await call(sb, 'GET', '/ap-invoices?per_page=1', { headers: erp.headers })).body.data[0]!;
    const noParent = await admin(sb, 'PATCH', '/_admin/objects', { account_token: erp.token, resource: 'ap-invoice-line-items', id: 'x', patch: {} });
    assert.equal(noParent.status, 400);
    const items = inv.line_items as Rec[];
    const li = await admin(sb, 'DELETE', '/_admin/objects', { account_token: erp.token, resource: 'line-items', parent_id: inv.id, id: items[0]!.id });
    assert.equal(li.status, 200);
    const left = await call(sb, 'GET', `/ap-invoices/${String(inv.id)}/line-items`, { headers: erp.headers });
    assert.equal(left.body.data.length, items.length - 1);
    const unknownAccount = await admin(sb, 'POST', '/_admin/objects', { account_token: 'nope', resource: 'leads', object: {} });
    assert.equal(unknownAccount.status, 404);
  });
});

describe('webhooks', () => {
  test('create, list, get, delete; unsupported types and systems are refused', async () => {
    const bp = await link(sb, 'buildpro', 'hooks-crud');
    const created = await call(sb, 'POST', '/webhooks', {
      headers: bp.headers,
      body: { callback_url: receiverUrl, event: 'CREATE', type: 'vendor', authorization_header: 'Bearer s3cret' },
    });
    assert.equal(created.status, 201);
    assert.equal(created.body.target, 'vendor:*');
    assert.equal(created.body.callback_url, receiverUrl);
    assert.equal(created.body.authorization_header, undefined, 'never echoed');
    const list = await call(sb, 'GET', '/webhooks', { headers: bp.headers });
    assert.equal(list.body.data.length, 1);
    const one = await call(sb, 'GET', `/webhooks/${String(created.body.id)}`, { headers: bp.headers });
    assert.equal(one.body.id, created.body.id);
    const other = await link(sb, 'buildpro', 'someone-else');
    assert.equal((await call(sb, 'GET', `/webhooks/${String(created.body.id)}`, { headers: other.headers })).status, 404);
    assert.equal((await call(sb, 'DELETE', `/webhooks/${String(created.body.id)}`, { headers: bp.headers })).status, 200);
    assert.equal((await call(sb, 'GET', '/webhooks', { headers: bp.headers })).body.data.length, 0);
    const badType = await call(sb, 'POST', '/webhooks', { headers: bp.headers, body: { callback_url: receiverUrl, event: 'CREATE', type: 'lead' } });
    assert.equal(badType.status, 400);
    const badEvent = await call(sb, 'POST', '/webhooks', { headers: bp.headers, body: { callback_url: receiverUrl, event: 'MOVE', type: 'file' } });
    assert.equal(badEvent.status, 400);
    const erp = await link(sb, 'sqlerp', 'no-hooks');
    const none = await call(sb, 'POST', '/webhooks', { headers: erp.headers, body: { callback_url: receiverUrl, event: 'CREATE', type: 'vendor' } });
    assert.equal(none.status, 404);
  });

  test('mutations deliver the event body with the registered Authorization to matching project-level hooks', async () => {
    received.length = 0;
    const bp = await link(sb, 'buildpro', 'hooks-deliver');
    const projects = (await call(sb, 'GET', '/projects', { headers: bp.headers })).body.data;
    const [p0, p1] = projects;
    const hook = await call(sb, 'POST', '/webhooks', {
      headers: { ...bp.headers, 'project-id': String(p0!.id) },
      body: { callback_url: receiverUrl, event: 'UPDATE', type: 'file', authorization_header: 'Bearer hook-secret' },
    });
    assert.equal(hook.body.project_id, p0!.id);
    await call(sb, 'POST', '/webhooks', { headers: bp.headers, body: { callback_url: receiverUrl, event: 'DELETE', type: 'file' } });
    const files = (await call(sb, 'GET', '/files?per_page=2', { headers: { ...bp.headers, 'project-id': String(p0!.id) } })).body.data;
    await admin(sb, 'PATCH', '/_admin/objects', {
      account_token: bp.token,
      resource: 'files',
      project_id: p0!.id,
      id: files[0]!.id,
      patch: { name: 'Renamed.pdf' },
    });
    // In another project: the project-level hook does not fire.
    await admin(sb, 'PATCH', '/_admin/objects', {
      account_token: bp.token,
      resource: 'files',
      project_id: p1!.id,
      id: files[0]!.id,
      patch: { name: 'Other.pdf' },
    });
    await admin(sb, 'DELETE', '/_admin/objects', { account_token: bp.token, resource: 'files', project_id: p1!.id, id: files[1]!.id });
    await waitFor(() => received.length >= 2);
    await sleep(100);
    assert.equal(received.length, 2);
    const update = received.find((r) => r.body.event === 'UPDATE')!;
    assert.equal(update.headers.authorization, 'Bearer hook-secret');
    assert.equal(update.body.id, hook.body.id);
    assert.equal(update.body.source_id, hook.body.source_id);
    assert.equal(update.body.callback_url, receiverUrl);
    assert.equal(update.body.project_id, p0!.id);
    assert.equal(update.body.target, files[0]!.id);
    assert.equal(update.body.type, 'file');
    const sd = update.body.source_data as Rec;
    assert.equal(typeof sd.path, 'string');
    assert.equal(sd.content_type, 'application/json');
    assert.equal((sd.data as Rec).event_type, 'update');
    const del = received.find((r) => r.body.event === 'DELETE')!;
    assert.equal(del.headers.authorization, undefined);
    assert.equal(del.body.project_id, p1!.id, 'company-level hook sees the project of the change');
    assert.equal(del.body.target, files[1]!.id);
  });

  test('unified writes fire webhooks too; prohibited fields are refused unless ignored', async () => {
    received.length = 0;
    const gl = await link(sb, 'graphledger', 'writes');
    await call(sb, 'POST', '/webhooks', { headers: gl.headers, body: { callback_url: receiverUrl, event: 'CREATE', type: 'vendor' } });
    const created = await call(sb, 'POST', '/vendors', { headers: gl.headers, body: { name: 'New Vendor LLC', email: 'v@example.com' } });
    assert.equal(created.status, 201);
    assert.equal(created.body.name, 'New Vendor LLC');
    await waitFor(() => received.length === 1);
    assert.equal(received[0]!.body.target, created.body.id);
    const patched = await call(sb, 'PATCH', `/vendors/${String(created.body.id)}`, { headers: gl.headers, body: { phone: '+1-555-0100' } });
    assert.equal(patched.body.phone, '+1-555-0100');
    const prohibited = await call(sb, 'POST', '/ap-invoices', { headers: gl.headers, body: { number: 'X-1', retention_amount: 5 } });
    assert.equal(prohibited.status, 400);
    assert.match(String(prohibited.body.message), /retention_amount/);
    const ignored = await call(sb, 'POST', '/ap-invoices', {
      headers: { ...gl.headers, 'ignore-prohibited-fields': 'true' },
      body: { number: 'X-1', retention_amount: 5 },
    });
    assert.equal(ignored.status, 201);
    assert.match(String(ignored.headers.get('svc-warnings')), /retention_amount/);
    assert.equal(ignored.body.retention_amount, undefined);
    const readOnly = await call(sb, 'POST', '/projects', { headers: gl.headers, body: { name: 'P' } });
    assert.equal(readOnly.status, 404);
    const bp = await link(sb, 'buildpro', 'bli');
    const project = (await call(sb, 'GET', '/projects', { headers: bp.headers })).body.data[0]!;
    const ph = { ...bp.headers, 'project-id': String(project.id) };
    const code = (await call(sb, 'GET', '/cost-codes?per_page=3', { headers: ph })).body.data[2]!;
    const bli = await call(sb, 'POST', '/budget-line-items', {
      headers: ph,
      body: {
        name: 'Concrete',
        original_amount: '100.00',
        quantity: '1',
        unit_cost: '100.00',
        unit_of_measure: 'LS',
        cost_code_id: `source_id:${String(code.source_id)}`,
        cost_type_id: null,
        wbs_id: null,
      },
    });
    assert.equal(bli.status, 201);
    assert.equal(bli.body.data.length, 1, 'budget line item creation answers {data: [item], meta}');
    assert.equal(bli.body.data[0]!.project_id, project.id);
    assert.equal(bli.body.data[0]!.cost_code_id, code.id, 'source_id: references resolve to service ids');
    const badRef = await call(sb, 'POST', '/budget-line-items', { headers: ph, body: { name: 'X', cost_code_id: 'source_id:nope' } });
    assert.equal(badRef.status, 400);
  });

  test('delivery quirks: loss, duplicates; the delivery log tells', async () => {
    received.length = 0;
    const crm = await link(sb, 'crmcloud', 'quirks');
    await call(sb, 'POST', '/webhooks', { headers: crm.headers, body: { callback_url: receiverUrl, event: 'UPDATE', type: 'customer' } });
    const customers = (await call(sb, 'GET', '/customers?per_page=20', { headers: crm.headers })).body.data;
    await admin(sb, 'PUT', '/_admin/webhook-delivery', { loss_probability: 1 });
    await admin(sb, 'PATCH', '/_admin/objects', { account_token: crm.token, resource: 'customers', id: customers[0]!.id, patch: { status: 'Inactive' } });
    await sleep(100);
    assert.equal(received.length, 0, 'lost');
    await admin(sb, 'PUT', '/_admin/webhook-delivery', { loss_probability: 0, duplicate_probability: 1, reorder: true, delay_ms: 20 });
    for (const c of customers.slice(1, 6))
      await admin(sb, 'PATCH', '/_admin/objects', { account_token: crm.token, resource: 'customers', id: c.id, patch: { status: 'Inactive' } });
    await waitFor(() => received.length >= 10);
    assert.equal(received.length, 10, 'each delivered twice');
    assert.equal(new Set(received.map((r) => r.body.target)).size, 5);
    const log = await admin(sb, 'GET', '/_admin/webhook-deliveries');
    assert.ok(log.body.data.some((d) => d.status === 'lost'));
    await admin(sb, 'PUT', '/_admin/webhook-delivery', { duplicate_probability: 0, reorder: false, delay_ms: 0 });
  });

  test('churn mode mutates objects continuously and fires webhooks', async () => {
    received.length = 0;
    const fo = await link(sb, 'fieldops', 'churn');
    for (const event of ['CREATE', 'UPDATE', 'DELETE']) {
      await call(sb, 'POST', '/webhooks', { headers: fo.headers, body: { callback_url: receiverUrl, event, type: 'job' } });
    }
    const before = await all(sb, '/jobs', fo.headers);
    const started = await admin(sb, 'POST', '/_admin/churn', { account_token: fo.token, per_second: 100, seconds: 0.3, resources: ['jobs'] });
    assert.equal(started.status, 201);
    await sleep(500);
    const running = await admin(sb, 'GET', '/_admin/churn');
    assert.equal(running.body.data.length, 0, 'stopped after its seconds');
    const afterChurn = await all(sb, '/jobs', fo.headers);
    assert.notDeepEqual(
      afterChurn.map((j) => `${String(j.id)}@${String(j.source_update_time)}`),
      before.map((j) => `${String(j.id)}@${String(j.source_update_time)}`),
    );
    await waitFor(() => received.length >= 10);
    assert.ok(received.every((r) => r.body.type === 'job'));
  });
});
