// Contract tests of the pass-through variants (JSON, XML, SQL, GraphQL, download, multipart,
// upload) and of the storage proxy (signatures, expiry, preview, ETag, Range, large files).
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { after, before, describe, test } from 'node:test';
import type { Sandbox } from '../../sandbox/server.ts';
import { admin, call, link, sleep, start, type Linked, type Rec } from './helpers.ts';

let sb: Sandbox;
let bp: Linked;
let erp: Linked;
before(async () => {
  sb = await start({ seed: 4 });
  bp = await link(sb, 'buildpro');
  erp = await link(sb, 'sqlerp');
});
after(async () => {
  await sb.close();
});

function expectPassthroughShape(b: Rec): void {
  for (const k of ['body', 'content_type', 'headers', 'path', 'status']) assert.ok(k in b, k);
}

describe('pass-through', () => {
  test('JSON variant: native paths answer native objects with the source status', async () => {
    const vendors = (await call(sb, 'GET', '/vendors?per_page=3', { headers: bp.headers })).body.data;
    const v = vendors[1]!;
    const one = await call(sb, 'POST', '/passthrough', { headers: bp.headers, body: { method: 'GET', path: `/rest/v1.0/vendors/${String(v.source_id)}` } });
    assert.equal(one.status, 200);
    expectPassthroughShape(one.body);
    assert.equal(one.body.status, 200);
    assert.equal((one.body.body as Rec).name, v.name);
    assert.equal((one.body.body as Rec).id, Number(v.source_id));
    const list = await call(sb, 'POST', '/passthrough', { headers: bp.headers, body: { method: 'GET', path: '/rest/v1.0/vendors?per_page=2' } });
    assert.equal((list.body.body as unknown[]).length, 2);
    const missing = await call(sb, 'POST', '/passthrough', { headers: bp.headers, body: { method: 'GET', path: '/rest/v1.0/vendors/1' } });
    assert.equal(missing.status, 200);
    assert.equal(missing.body.status, 404);
    const project = (await call(sb, 'GET', '/projects', { headers: bp.headers })).body.data[0]!;
    const scoped = await call(sb, 'POST', '/passthrough', {
      headers: bp.headers,
      body: { method: 'GET', path: `/rest/v1.0/projects/${String(project.source_id)}/cost_codes?per_page=3` },
    });
    assert.equal((scoped.body.body as unknown[]).length, 3);
    const write = await call(sb, 'POST', '/passthrough', {
      headers: bp.headers,
      body: { method: 'PATCH', path: `/rest/v1.0/vendors/${String(v.source_id)}`, data: { name: 'Patched' } },
    });
    assert.equal((write.body.body as Rec).name, 'Patched');
    const bad = await call(sb, 'POST', '/passthrough', { headers: bp.headers, body: { method: 'FETCH', path: '/x' } });
    assert.equal(bad.status, 400);
  });

  test('SQL variant: SELECT with filters, order, limit, offset, fields; COUNT; SELECT DISTINCT', async () => {
    const count = await call(sb, 'POST', '/passthrough', { headers: erp.headers, body: { table: 'ARCM', operation: 'COUNT' } });
    assert.deepEqual(count.body.body, { count: 60 });
    assert.match(String(count.body.path), /^SELECT COUNT\(\*\) FROM ARCM/);
    const rows = await call(sb, 'POST', '/passthrough', {
      headers: erp.headers,
      body: {
        table: 'ARCM',
        operation: 'SELECT',
        fields: ['KEYID', 'NAME', 'STATUS'],
        filters: [{ field: 'STATUS', operator: '=', value: 'Active' }],
        order_by: [{ field: 'NAME', dir: 'DESC' }],
        limit: 5,
        offset: 1,
      },
    });
    const body = rows.body.body as Rec[];
    assert.ok(body.length > 0 && body.length <= 5);
    for (const r of body) {
      assert.deepEqual(Object.keys(r), ['KEYID', 'NAME', 'STATUS']);
      assert.equal(r.STATUS, 'Active');
    }
    const names = body.map((r) => String(r.NAME));
    assert.deepEqual(names, [...names].sort().reverse());
    const distinct = await call(sb, 'POST', '/passthrough', {
      headers: erp.headers,
      body: { table: 'ARCM', operation: 'SELECT DISTINCT', fields: ['STATUS'] },
    });
    const statuses = (distinct.body.body as Rec[]).map((r) => r.STATUS);
    assert.equal(new Set(statuses).size, statuses.length);
    const like = await call(sb, 'POST', '/passthrough', {
      headers: erp.headers,
      body: { table: 'APVM', operation: 'COUNT', filters: [{ field: 'NAME', operator: 'ILIKE', value: '%inc.%' }] },
    });
    assert.ok((like.body.body as { count: number }).count > 0);
    const unknown = await call(sb, 'POST', '/passthrough', { headers: erp.headers, body: { table: 'NOPE', operation: 'SELECT' } });
    assert.equal(unknown.body.status, 400);
    const invalid = await call(sb, 'POST', '/passthrough', { headers: erp.headers, body: { table: 'ARCM', operation: 'DELETE' } });
    assert.equal(invalid.status, 400);
  });

  test('XML variant: text/xml queries answered as JSON', async () => {
    const xb = await link(sb, 'xmlbooks');
    const xml =
      '<?xml version="1.0"?><QBXML><QBXMLMsgsRq onError="stopOnError"><VendorQueryRq><MaxReturned>3</MaxReturned></VendorQueryRq></QBXMLMsgsRq></QBXML>';
    const r = await call(sb, 'POST', '/passthrough', { headers: { ...xb.headers, 'content-type': 'text/xml' }, raw: xml });
    assert.equal(r.status, 200);
    assert.equal(r.headers.get('content-type'), 'application/json; charset=utf-8');
    assert.equal(r.body.content_type, 'text/xml');
    const rs = (r.body.body as Rec).VendorQueryRs as Rec;
    assert.equal(rs.statusCode, '0');
    const rets = rs.VendorRet as Rec[];
    assert.equal(rets.length, 3);
    const byId = await call(sb, 'POST', '/passthrough', {
      headers: { ...xb.headers, 'content-type': 'text/xml' },
      raw: `<QBXML><QBXMLMsgsRq><VendorQueryRq><ListID>${String(rets[1]!.ListID)}</ListID></VendorQueryRq></QBXMLMsgsRq></QBXML>`,
    });
    assert.equal((((byId.body.body as Rec).VendorQueryRs as Rec).VendorRet as Rec[])[0]!.Name, rets[1]!.Name);
    const json = await call(sb, 'POST', '/passthrough', { headers: xb.headers, body: { method: 'GET', path: '/x' } });
    assert.equal(json.status, 400, 'the XML system takes XML only');
    const xmlElsewhere = await call(sb, 'POST', '/passthrough', { headers: { ...bp.headers, 'content-type': 'text/xml' }, raw: xml });
    assert.equal(xmlElsewhere.status, 400);
  });

  test('GraphQL variant: queries with arguments, variables, aliases and nested selections', async () => {
    const gl = await link(sb, 'graphledger');
    const unified = (await call(sb, 'GET', '/vendors?per_page=3', { headers: gl.headers })).body.data;
    const query = 'query Vendors($n: Int, $id: ID!) { vendors(first: $n, skip: 1) { id name addresses { city } } one: vendor(id: $id) { name } }';
    const r = await call(sb, 'POST', '/passthrough', { headers: gl.headers, body: { query, variables: { n: 2, id: unified[1]!.source_id } } });
    assert.equal(r.status, 200);
    const data = (r.body.body as Rec).data as Rec;
    const vendors = data.vendors as Rec[];
    assert.equal(vendors.length, 2);
    assert.deepEqual(Object.keys(vendors[0]!), ['id', 'name', 'addresses']);
    assert.ok(typeof (vendors[0]!.addresses as Rec[])[0]!.city === 'string');
    assert.equal(vendors[0]!.name, unified[1]!.name);
    assert.equal((data.one as Rec).name, unified[1]!.name);
    const bad = await call(sb, 'POST', '/passthrough', { headers: gl.headers, body: { query: '{ nothing { id } }' } });
    assert.match(String(((bad.body.body as Rec).errors as Rec[])[0]!.message), /Cannot query field/);
    const syntax = await call(sb, 'POST', '/passthrough', { headers: gl.headers, body: { query: '{ vendors { id ' } });
    assert.ok((syntax.body.body as Rec).errors);
  });

  test('download streams binary; multipart and upload report what they received', async () => {
    const d = await fetch(`${sb.url}/passthrough-download`, {
      method: 'POST',
      headers: { ...bp.headers, 'content-type': 'application/json' },
      body: JSON.stringify({ method: 'GET', path: '/rest/v1.0/files/1/download' }),
    });
    assert.equal(d.status, 200);
    assert.equal(d.headers.get('content-type'), 'application/octet-stream');
    const bytes = Buffer.from(await d.arrayBuffer());
    assert.equal(bytes.length, Number(d.headers.get('content-length')));
    const again = Buffer.from(
      await (
        await fetch(`${sb.url}/passthrough-download`, {
          method: 'POST',
          headers: { ...bp.headers, 'content-type': 'application/json' },
          body: JSON.stringify({ method: 'GET', path: '/rest/v1.0/files/1/download' }),
        })
      ).arrayBuffer(),
    );
    assert.ok(bytes.equals(again), 'deterministic');

    const form = new FormData();
    form.append('name', 'Spec sheet');
    form.append('file', new Blob([Buffer.from('hello world')], { type: 'text/plain' }), 'hello.txt');
    const m = await fetch(`${sb.url}/passthrough-multipart`, {
      method: 'POST',
      headers: { ...bp.headers, 'passthrough-method': 'POST', 'passthrough-path': '/rest/v1.0/files' },
      body: form,
    });
    assert.equal(m.status, 200);
    const mb = (await m.json()) as Rec;
    assert.equal(mb.status, 201);
    assert.equal(mb.path, '/rest/v1.0/files');
    const received = mb.body as { fields: Rec; files: Rec[] };
    assert.deepEqual(received.fields, { name: 'Spec sheet' });
    assert.equal(received.files[0]!.filename, 'hello.txt');
    assert.equal(received.files[0]!.size, 11);
    const noHeaders = await fetch(`${sb.url}/passthrough-multipart`, { method: 'POST', headers: bp.headers, body: form });
    assert.equal(noHeaders.status, 400);

    const payload = Buffer.from('binary-content-'.repeat(100));
    const u = await fetch(`${sb.url}/passthrough-upload`, {
      method: 'POST',
      headers: { ...bp.headers, 'content-type': 'application/octet-stream', 'passthrough-method': 'PUT', 'passthrough-path': '/rest/v1.0/files/1' },
      body: payload,
    });
    const ub = (await u.json()) as Rec;
    assert.equal(ub.status, 200);
    assert.deepEqual(
      { size: (ub.body as Rec).size, sha256: (ub.body as Rec).sha256 },
      { size: payload.length, sha256: createHash('sha256').update(payload).digest('hex') },
    );
  });
});

describe('storage proxy', () => {
  async function aFile(sandbox: Sandbox, account: Linked, index = 0): Promise<Rec> {
    const project = (await call(sandbox, 'GET', '/projects', { headers: account.headers })).body.data[0]!;
    return (await call(sandbox, 'GET', `/files?per_page=${index + 1}`, { headers: { ...account.headers, 'project-id': String(project.id) } })).body.data[
      index
    ]!;
  }

  test('signed URLs of the contract shape download the file; preview is inline with open CORS', async () => {
    const f = await aFile(sb, bp);
    const url = String(f.url);
    assert.match(url, new RegExp(`^${sb.url}/storage/download/${String(f.filename)}\\?signature=[^&]+&expires_at=\\d+$`));
    const expiresAt = Number(new URL(url).searchParams.get('expires_at'));
    assert.ok(expiresAt * 1000 > Date.now() + 5 * 3600_000 && expiresAt * 1000 <= Date.now() + 6 * 3600_000 + 1000, '5-6 hours');
    const d = await fetch(url);
    assert.equal(d.status, 200);
    const body = Buffer.from(await d.arrayBuffer());
    assert.equal(body.length, Number(f.size));
    assert.match(d.headers.get('content-disposition')!, new RegExp(`^attachment; filename="${String(f.filename)}"`));
    const p = await fetch(String(f.preview_url));
    assert.equal(p.status, 200);
    assert.equal(p.headers.get('access-control-allow-origin'), '*');
    assert.match(p.headers.get('content-disposition')!, new RegExp(`^inline; filename="${String(f.filename)}"`));
    assert.ok(Buffer.from(await p.arrayBuffer()).equals(body), 'same content');
    const log = await admin(sb, 'GET', '/_admin/storage-accesses');
    assert.ok(log.body.data.length >= 2, 'downloads and previews are tracked');
  });

  test('bad or swapped signatures answer 403; expired URLs answer 403', async () => {
    const f = await aFile(sb, bp);
    const u = new URL(String(f.url));
    const tampered = new URL(u);
    tampered.searchParams.set('expires_at', String(Number(u.searchParams.get('expires_at')) + 60));
    assert.equal((await fetch(tampered)).status, 403);
    const renamed = String(f.url).replace(`/download/${String(f.filename)}`, '/download/other.pdf');
    assert.equal((await fetch(renamed)).status, 403);
    const asPreview = String(f.url).replace('/download/', '/preview/');
    assert.equal((await fetch(asPreview)).status, 403, 'a download signature does not open the preview');
    assert.equal((await fetch(`${sb.url}/storage/download/x.pdf`)).status, 403);

    const short = await start({ storageUrlTtlMs: 300 });
    try {
      const a = await link(short, 'buildpro');
      const g = await aFile(short, a);
      assert.equal((await fetch(String(g.url))).status, 200);
      await sleep(1400);
      const expired = await fetch(String(g.url));
      assert.equal(expired.status, 403);
      assert.match(((await expired.json()) as Rec).message as string, /expired/);
    } finally {
      await short.close();
    }
  });

  test('ETag and If-None-Match for buildpro and docvault; Range requests', async () => {
    const f = await aFile(sb, bp);
    const first = await fetch(String(f.url));
    const etag = first.headers.get('etag');
    assert.ok(etag);
    await first.arrayBuffer();
    assert.equal((await fetch(String(f.url), { headers: { 'if-none-match': etag } })).status, 304);
    const full = Buffer.from(await (await fetch(String(f.url))).arrayBuffer());
    const part = await fetch(String(f.url), { headers: { range: 'bytes=100-199' } });
    assert.equal(part.status, 206);
    assert.equal(part.headers.get('content-range'), `bytes 100-199/${full.length}`);
    assert.ok(Buffer.from(await part.arrayBuffer()).equals(full.subarray(100, 200)));
    const tail = await fetch(String(f.url), { headers: { range: 'bytes=-10' } });
    assert.ok(Buffer.from(await tail.arrayBuffer()).equals(full.subarray(full.length - 10)));
    const bad = await fetch(String(f.url), { headers: { range: `bytes=${full.length + 5}-` } });
    assert.equal(bad.status, 416);
  });

  test('docvault streams files over 100 MB and exposes them as file transfers', async () => {
    const dv = await link(sb, 'docvault');
    const f = await aFile(sb, dv, 7);
    assert.ok(Number(f.size) > 100 * 1024 * 1024);
    assert.match(String(f.file_transfer_id), /^[0-9a-f-]{36}$/);
    const project = (await call(sb, 'GET', '/projects', { headers: dv.headers })).body.data[0]!;
    const transfer = await call(sb, 'GET', `/file-transfers/${String(f.file_transfer_id)}`, { headers: { ...dv.headers, 'project-id': String(project.id) } });
    assert.equal(transfer.status, 200);
    assert.equal(transfer.body.file_id, f.id);
    assert.equal(transfer.body.status, 'completed');
    assert.equal(
      (await call(sb, 'GET', '/file-transfers/00000000-0000-0000-0000-000000000000', { headers: { ...dv.headers, 'project-id': String(project.id) } })).status,
      404,
    );
    const rssBefore = process.memoryUsage().rss;
    const res = await fetch(String(f.url));
    assert.equal(Number(res.headers.get('content-length')), Number(f.size));
    const reader: ReadableStreamDefaultReader<Uint8Array> = res.body!.getReader();
    let received = 0;
    const limit = 40 * 1024 * 1024;
    while (received < limit) {
      const { done, value } = await reader.read();
      if (done) break;
      received += value.length;
    }
    await reader.cancel();
    assert.ok(received >= limit);
    assert.ok(process.memoryUsage().rss - rssBefore < 150 * 1024 * 1024, 'streamed, not buffered');
    const tail = await fetch(String(f.url), { headers: { range: `bytes=${Number(f.size) - 1000}-` } });
    assert.equal(Buffer.from(await tail.arrayBuffer()).length, 1000);
  });
});
