// Contract tests of the sandbox's writes beyond a plain create or update: DELETE, bulk PATCH
// `{creates, updates}`, writes under a parent (line items, versions, a folder's files, attachments)
// and multipart creates; each offered only where the real service's collection shows it, each
// counted in stats and rate limits like any request.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import type { Sandbox } from '../../sandbox/server.ts';
import { admin, all, call, link, start, type Linked, type Rec } from './helpers.ts';

let sb: Sandbox;
let gl: Linked;
let bp: Linked;
let crm: Linked;
let xml: Linked;
let project: Rec;
before(async () => {
  sb = await start({ seed: 11, size: 20 });
  gl = await link(sb, 'graphledger', 'writes');
  bp = await link(sb, 'buildpro', 'writes');
  crm = await link(sb, 'crmcloud', 'writes');
  xml = await link(sb, 'xmlbooks', 'writes');
  project = (await call(sb, 'GET', '/projects', { headers: bp.headers })).body.data[0]!;
});
after(async () => {
  await sb.close();
});

/** A multipart/form-data request: text fields, and a file part when given. */
async function upload(path: string, headers: Record<string, string>, fields: Record<string, string>, file?: { name: string; type: string; bytes: Buffer }) {
  const form = new FormData();
  for (const [k, v] of Object.entries(fields)) form.append(k, v);
  if (file) form.append('contents', new Blob([file.bytes], { type: file.type }), file.name);
  const res = await fetch(`${sb.url}${path}`, { method: 'POST', headers, body: form });
  const text = await res.text();
  return { status: res.status, body: (text ? JSON.parse(text) : {}) as Rec & { message?: string }, text };
}

describe('DELETE /{collection}/{id}', () => {
  test('deletes the record (204, no body): reads answer 404 and lists no longer show it', async () => {
    const vendors = await all(sb, '/vendors', gl.headers);
    const target = vendors[3]!;
    const res = await call(sb, 'DELETE', `/vendors/${String(target.id)}`, { headers: gl.headers });
    assert.equal(res.status, 204, res.text);
    assert.equal(res.text, '');
    assert.equal((await call(sb, 'GET', `/vendors/${String(target.id)}`, { headers: gl.headers })).status, 404);
    const after = await all(sb, '/vendors', gl.headers);
    assert.equal(after.length, vendors.length - 1);
    assert.ok(!after.some((v) => v.id === target.id));
    const again = await call(sb, 'DELETE', `/vendors/${String(target.id)}`, { headers: gl.headers });
    assert.equal(again.status, 404);
    assert.match(String(again.body.message), /not found/);
    // By source id, like every place that takes a service id.
    const other = vendors[4]!;
    assert.equal((await call(sb, 'DELETE', `/vendors/source_id:${String(other.source_id)}`, { headers: gl.headers })).status, 204);
    assert.equal((await call(sb, 'GET', `/vendors/${String(other.id)}`, { headers: gl.headers })).status, 404);
  });

  test('only where the collection shows a delete, and only for systems that write the resource', async () => {
    const leads = (await call(sb, 'GET', '/leads', { headers: crm.headers })).body.data;
    const noRoute = await call(sb, 'DELETE', `/leads/${String(leads[0]!.id)}`, { headers: crm.headers });
    assert.equal(noRoute.status, 404);
    assert.match(String(noRoute.body.message), /^Route DELETE \/leads\/.+ not found$/);
    const projects = (await call(sb, 'GET', '/projects', { headers: gl.headers })).body.data;
    const readOnly = await call(sb, 'DELETE', `/projects/${String(projects[0]!.id)}`, { headers: gl.headers });
    assert.equal(readOnly.status, 404);
    assert.equal(readOnly.body.message, 'Deleting projects is not supported by GraphLedger');
    assert.equal((await call(sb, 'GET', `/projects/${String(projects[0]!.id)}`, { headers: gl.headers })).status, 200, 'still there');
  });

  test('a project-scoped delete needs Project-Id and deletes in that project only', async () => {
    const ph = { ...bp.headers, 'project-id': String(project.id) };
    const items = (await call(sb, 'GET', '/budget-line-items', { headers: ph })).body.data;
    const missing = await call(sb, 'DELETE', `/budget-line-items/${String(items[0]!.id)}`, { headers: bp.headers });
    assert.equal(missing.status, 400);
    assert.match(String(missing.body.message), /Project-Id/);
    assert.equal((await call(sb, 'DELETE', `/budget-line-items/${String(items[0]!.id)}`, { headers: ph })).status, 204);
    assert.equal((await call(sb, 'GET', `/budget-line-items/${String(items[0]!.id)}`, { headers: ph })).status, 404);
    const projects = (await call(sb, 'GET', '/projects', { headers: bp.headers })).body.data;
    const elsewhere = { ...bp.headers, 'project-id': String(projects[1]!.id) };
    assert.equal(
      (await call(sb, 'GET', `/budget-line-items/${String(items[0]!.id)}`, { headers: elsewhere })).status,
      200,
      'the same id in another project stays',
    );
  });
});

describe('bulk PATCH /{collection} {creates, updates}', () => {
  test('applies each item on its own and answers one result per item, creates first', async () => {
    const vendors = (await call(sb, 'GET', '/vendors', { headers: gl.headers })).body.data;
    const [a, b] = [vendors[0]!, vendors[1]!];
    const res = await call(sb, 'PATCH', '/vendors', {
      headers: gl.headers,
      body: {
        creates: [{ name: 'Bulk One LLC' }, { name: 'Bulk Two LLC', phone: '+1-555-0102' }],
        updates: [
          { id: String(a.id), name: 'Renamed in bulk' },
          { id: 'no-such-vendor', name: 'x' },
          { id: `source_id:${String(b.source_id)}`, phone: '+1-555-0199' },
        ],
      },
    });
    assert.equal(res.status, 200, res.text);
    const results = res.body.data as unknown as { operation: string; index: number; status: number; object?: Rec; error?: { message: string } }[];
    assert.deepEqual(
      results.map((r) => [r.operation, r.index, r.status]),
      [
        ['create', 0, 201],
        ['create', 1, 201],
        ['update', 0, 200],
        ['update', 1, 404],
        ['update', 2, 200],
      ],
    );
    assert.equal(results[0]!.object!.name, 'Bulk One LLC');
    assert.match(String(results[3]!.error!.message), /no-such-vendor not found/);
    assert.equal(results[3]!.object, undefined);
    // The upstream now holds exactly what each result said.
    for (const r of results.filter((x) => x.object)) {
      const read = await call(sb, 'GET', `/vendors/${String(r.object!.id)}`, { headers: gl.headers });
      assert.deepEqual(read.body, r.object);
    }
    assert.equal((await call(sb, 'GET', `/vendors/${String(b.id)}`, { headers: gl.headers })).body.phone, '+1-555-0199');
  });

  test('a refused item (a field the system does not take) fails alone, with its message', async () => {
    const bpVendors = await all(sb, '/vendors', bp.headers);
    const res = await call(sb, 'PATCH', '/vendors', { headers: bp.headers, body: { creates: [{ name: 'With tax', tax_number: 'T-1' }, { name: 'Plain' }] } });
    assert.equal(res.status, 200);
    const results = res.body.data as unknown as { status: number; error?: { message: string } }[];
    assert.deepEqual(
      results.map((r) => r.status),
      [400, 201],
    );
    assert.match(results[0]!.error!.message, /tax_number/);
    assert.equal((await all(sb, '/vendors', bp.headers)).length, bpVendors.length + 1);
  });

  test('a malformed body is refused whole, with what to fix; nothing is applied', async () => {
    const before = (await all(sb, '/vendors', gl.headers)).length;
    const cases: [unknown, RegExp][] = [
      [{}, /at least one item/],
      [{ creates: [], updates: [] }, /at least one item/],
      [{ creates: [{ name: 'x' }], deletes: ['y'] }, /deletes/],
      [{ creates: { name: 'x' } }, /creates/],
      [{ updates: [{ name: 'no id' }] }, /updates\.0\.id/],
      [{ creates: Array.from({ length: 101 }, (_, i) => ({ name: `n${i}` })) }, /At most 100/],
      [[{ name: 'x' }], /Invalid body/],
    ];
    for (const [body, message] of cases) {
      const res = await call(sb, 'PATCH', '/vendors', { headers: gl.headers, body });
      assert.equal(res.status, 400, JSON.stringify(body).slice(0, 80));
      assert.match(String(res.body.message), message);
    }
    assert.equal((await all(sb, '/vendors', gl.headers)).length, before);
  });

  test('only on collections the collection shows bulk-patched; project-scoped ones need Project-Id', async () => {
    const noRoute = await call(sb, 'PATCH', '/customers', { headers: gl.headers, body: { creates: [{ name: 'x' }] } });
    assert.equal(noRoute.status, 404);
    assert.match(String(noRoute.body.message), /Route PATCH \/customers not found/);
    const noProject = await call(sb, 'PATCH', '/budget-line-items', { headers: bp.headers, body: { creates: [{ name: 'x' }] } });
    assert.equal(noProject.status, 400);
    const ph = { ...bp.headers, 'project-id': String(project.id) };
    const ok = await call(sb, 'PATCH', '/budget-line-items', { headers: ph, body: { creates: [{ name: 'Bulk formwork', original_amount: 10 }] } });
    assert.equal(ok.status, 200, ok.text);
    const created = (ok.body.data[0] as { object: Rec }).object;
    assert.equal(created.name, 'Bulk formwork');
    assert.equal((await call(sb, 'GET', `/budget-line-items/${String(created.id)}`, { headers: ph })).status, 200);
  });
});

describe('writes under a parent', () => {
  test('AP invoice line items: create, update (PATCH and PUT), delete; the invoice embeds them', async () => {
    const invoice = (await call(sb, 'GET', '/ap-invoices', { headers: gl.headers })).body.data[0]!;
    const base = `/ap-invoices/${String(invoice.id)}/line-items`;
    const before = await all(sb, base, gl.headers);
    const created = await call(sb, 'POST', base, { headers: gl.headers, body: { description: 'Rebar', amount: 120, quantity: 3, unit_cost: 40 } });
    assert.equal(created.status, 201, created.text);
    const item = created.body as unknown as Rec;
    assert.equal(item.description, 'Rebar');
    const listed = await all(sb, base, gl.headers);
    assert.equal(listed.length, before.length + 1);
    assert.deepEqual(listed.at(-1), item);
    const embedded = (await call(sb, 'GET', `/ap-invoices/${String(invoice.id)}`, { headers: gl.headers })).body.line_items as Rec[];
    assert.ok(
      embedded.some((l) => l.id === item.id),
      'the invoice embeds the new line item',
    );

    const patched = await call(sb, 'PATCH', `${base}/${String(item.id)}`, { headers: gl.headers, body: { quantity: 4 } });
    assert.equal(patched.status, 200);
    assert.equal(patched.body.quantity, 4);
    const put = await call(sb, 'PUT', `${base}/${String(before[0]!.id)}`, { headers: gl.headers, body: { description: 'Changed by PUT' } });
    assert.equal(put.status, 200);
    assert.equal((await call(sb, 'GET', `${base}/${String(before[0]!.id)}`, { headers: gl.headers })).body.description, 'Changed by PUT');

    assert.equal((await call(sb, 'DELETE', `${base}/${String(item.id)}`, { headers: gl.headers })).status, 204);
    assert.equal((await call(sb, 'GET', `${base}/${String(item.id)}`, { headers: gl.headers })).status, 404);
    assert.equal((await all(sb, base, gl.headers)).length, before.length);
    const gone = await call(sb, 'DELETE', `${base}/${String(item.id)}`, { headers: gl.headers });
    assert.equal(gone.status, 404);
    assert.match(String(gone.body.message), /not found in ap-invoices/);
    assert.equal((await call(sb, 'POST', `/ap-invoices/nope/line-items`, { headers: gl.headers, body: { description: 'x' } })).status, 404, 'unknown parent');
  });

  test('refused where the system does not write them, or the collection shows no such write', async () => {
    const invoice = (await call(sb, 'GET', '/ap-invoices', { headers: xml.headers })).body.data[0]!;
    const refused = await call(sb, 'POST', `/ap-invoices/${String(invoice.id)}/line-items`, { headers: xml.headers, body: { description: 'x' } });
    assert.equal(refused.status, 404);
    assert.equal(refused.body.message, 'Creating ap-invoice-line-items is not supported by XML Books');
    const ph = { ...bp.headers, 'project-id': String(project.id) };
    const drawing = (await call(sb, 'GET', '/drawings', { headers: ph })).body.data[0]!;
    const noRoute = await call(sb, 'POST', `/drawings/${String(drawing.id)}/versions`, { headers: ph, body: { name: 'x' } });
    assert.equal(noRoute.status, 404);
    assert.match(String(noRoute.body.message), /^Route POST/);
  });
});

describe('multipart creates', () => {
  const bytes = Buffer.from('%PDF-1.4 sandbox upload\n'.repeat(50));

  test('POST /folders/{id}/files creates a file in the folder, listed there; JSON or no file part is a 400', async () => {
    const ph = { ...bp.headers, 'project-id': String(project.id) };
    const folders = (await call(sb, 'GET', '/folders', { headers: ph })).body.data;
    const folder = folders[1]!;
    const res = await upload(
      `/folders/${String(folder.id)}/files`,
      ph,
      { name: 'Level 2 plan', content_type: 'application/pdf' },
      { name: 'level-2.pdf', type: 'application/pdf', bytes },
    );
    assert.equal(res.status, 201, res.text);
    assert.equal(res.body.folder_id, folder.id);
    assert.equal(res.body.project_id, project.id);
    assert.equal(res.body.name, 'Level 2 plan');
    assert.equal(res.body.filename, 'level-2.pdf');
    assert.equal(res.body.size, String(bytes.length));
    assert.equal(res.body.type, 'application/pdf');
    const inFolder = (await call(sb, 'GET', `/folders/${String(folder.id)}/files?per_page=1000`, { headers: ph })).body.data;
    assert.ok(inFolder.some((f) => f.id === res.body.id));
    assert.deepEqual((await call(sb, 'GET', `/files/${String(res.body.id)}`, { headers: ph })).body, res.body);

    const json = await call(sb, 'POST', `/folders/${String(folder.id)}/files`, { headers: ph, body: { name: 'x' } });
    assert.equal(json.status, 400);
    assert.match(String(json.body.message), /multipart\/form-data/);
    const noFile = await upload(`/folders/${String(folder.id)}/files`, ph, { name: 'no file' });
    assert.equal(noFile.status, 400);
    assert.match(String(noFile.body.message), /no file part/);
  });

  test('POST /files/{id}/versions adds a version; POST /photos takes a multipart photo', async () => {
    const ph = { ...bp.headers, 'project-id': String(project.id) };
    const file = (await call(sb, 'GET', '/files', { headers: ph })).body.data[0]!;
    const versions = await all(sb, `/files/${String(file.id)}/versions`, ph);
    const res = await upload(`/files/${String(file.id)}/versions`, ph, { name: 'Revision' }, { name: 'rev.pdf', type: 'application/pdf', bytes });
    assert.equal(res.status, 201, res.text);
    assert.equal(res.body.file_id, file.id);
    assert.equal(res.body.version, String(versions.length + 1));
    assert.deepEqual((await all(sb, `/files/${String(file.id)}/versions`, ph)).at(-1), res.body);

    const photo = await upload('/photos', ph, { name: 'Slab pour', description: 'north side' }, { name: 'IMG_1.jpg', type: 'image/jpeg', bytes });
    assert.equal(photo.status, 201, photo.text);
    assert.equal(photo.body.name, 'Slab pour');
    assert.equal(photo.body.size, String(bytes.length));
    assert.equal((await call(sb, 'GET', `/photos/${String(photo.body.id)}`, { headers: ph })).status, 200);
  });

  test('POST /activities/{id}/attachments answers the attachment, under its activity', async () => {
    const activity = (await call(sb, 'GET', '/activities', { headers: crm.headers })).body.data[0]!;
    const res = await upload(
      `/activities/${String(activity.id)}/attachments`,
      crm.headers,
      { name: 'Minutes', content_type: 'text/plain', notes: 'from the call' },
      { name: 'minutes.txt', type: 'text/plain', bytes: Buffer.from('minutes') },
    );
    assert.equal(res.status, 201, res.text);
    assert.equal(res.body.activity_id, activity.id);
    assert.equal(res.body.name, 'Minutes');
    assert.equal(res.body.size, '7');
    assert.equal(res.body.notes, 'from the call');
    assert.equal(
      (await upload('/activities/nope/attachments', crm.headers, { name: 'x' }, { name: 'x.txt', type: 'text/plain', bytes: Buffer.from('x') })).status,
      404,
    );
  });
});

test('every write counts in stats and in the rate limits like any request', async () => {
  const limited = await start({ seed: 11, size: 20, rateLimits: { windowMs: 60_000, accountLimit: 4 } });
  try {
    const a = await link(limited, 'graphledger', 'counted');
    const vendors = (await call(limited, 'GET', '/vendors', { headers: a.headers })).body.data;
    const del = await call(limited, 'DELETE', `/vendors/${String(vendors[0]!.id)}`, { headers: a.headers });
    assert.equal(del.status, 204);
    assert.equal(del.headers.get('svc-ratelimit-remaining'), '2');
    const bulk = await call(limited, 'PATCH', '/vendors', { headers: a.headers, body: { creates: [{ name: 'x' }] } });
    assert.equal(bulk.headers.get('svc-ratelimit-remaining'), '1');
    const invoice = (await call(limited, 'GET', '/ap-invoices', { headers: a.headers })).body.data[0]!;
    const over = await call(limited, 'POST', `/ap-invoices/${String(invoice.id)}/line-items`, { headers: a.headers, body: { description: 'x' } });
    assert.equal(over.status, 429, 'the fifth request of the window');
    const stats = await admin(limited, 'GET', '/_admin/stats');
    const mine = Object.values(stats.body.accounts as Record<string, { reference_id: string; by_path: Record<string, number> }>).find(
      (x) => x.reference_id === 'counted',
    )!;
    assert.equal(mine.by_path['DELETE /vendors/:id'], 1);
    assert.equal(mine.by_path['PATCH /vendors'], 1);
    assert.equal(mine.by_path['POST /ap-invoices/:id/line-items'], 1);
  } finally {
    await limited.close();
  }
});
