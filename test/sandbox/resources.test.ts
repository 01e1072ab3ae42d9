// Contract tests of the unified endpoints: lists, pagination, single objects, children, folder
// trees, source data, filters, Project-Id, unsupported resources.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { resourceDef } from '../../lib/resources.ts';
import type { Sandbox } from '../../sandbox/server.ts';
import { all, call, link, start, type Linked, type Rec } from './helpers.ts';

let sb: Sandbox;
let build: Linked;
let erp: Linked;
let crm: Linked;
let projects: Rec[];
before(async () => {
  sb = await start({ seed: 3, size: 60 });
  build = await link(sb, 'buildpro');
  erp = await link(sb, 'sqlerp');
  crm = await link(sb, 'crmcloud');
  projects = (await call(sb, 'GET', '/projects', { headers: build.headers })).body.data;
});
after(async () => {
  await sb.close();
});

const uuid = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

describe('lists and pagination', () => {
  test('a list is {data, meta: {current_page, has_more_results}} with identity fields on every object', async () => {
    const r = await call(sb, 'GET', '/projects', { headers: build.headers });
    assert.equal(r.status, 200);
    assert.equal(r.body.data.length, 3, 'size 60 -> 3 projects');
    assert.deepEqual(r.body.meta, { current_page: 1, has_more_results: false });
    assert.ok(r.headers.get('svc-data-retrieved-at'));
    for (const p of r.body.data) {
      assert.match(String(p.id), uuid);
      assert.equal(typeof p.source_id, 'string');
      assert.ok(!Number.isNaN(Date.parse(String(p.source_create_time))));
      assert.ok(Date.parse(String(p.source_update_time)) >= Date.parse(String(p.source_create_time)));
      for (const f of ['address', 'amount', 'completion_date', 'name', 'number', 'start_date', 'status', 'type']) assert.ok(f in p, f);
    }
  });

  test('pages follow has_more_results; default and max per_page are the source system’s', async () => {
    const headers = { ...crm.headers };
    const first = await call(sb, 'GET', '/customers', { headers });
    assert.equal(first.body.data.length, 10, 'crmcloud default per_page is 10');
    assert.equal(first.body.meta.has_more_results, true);
    const capped = await call(sb, 'GET', '/customers?per_page=1000', { headers });
    assert.equal(capped.body.data.length, 60, 'capped at 200, 60 exist');
    const page6 = await call(sb, 'GET', '/customers?page=6', { headers });
    assert.equal(page6.body.data.length, 10);
    assert.equal(page6.body.meta.has_more_results, false);
    assert.equal(page6.body.meta.current_page, 6);
    const beyond = await call(sb, 'GET', '/customers?page=99', { headers });
    assert.deepEqual(beyond.body.data, []);
    const everything = await all(sb, '/customers', headers, 7);
    assert.equal(everything.length, 60);
    assert.equal(new Set(everything.map((c) => c.id)).size, 60);
  });

  test('per_page is capped at the system maximum (buildpro 1000, crmcloud 200)', async () => {
    const big = await start({ size: 450 });
    try {
      const c = await link(big, 'crmcloud');
      const r = await call(big, 'GET', '/customers?per_page=1000', { headers: c.headers });
      assert.equal(r.body.data.length, 200);
      assert.equal(r.body.meta.has_more_results, true);
    } finally {
      await big.close();
    }
  });

  test('bad page parameters answer 400', async () => {
    for (const q of ['page=0', 'page=-1', 'page=abc', 'per_page=0', 'per_page=1001', 'per_page=2.5']) {
      const r = await call(sb, 'GET', `/customers?${q}`, { headers: crm.headers });
      assert.equal(r.status, 400, q);
      assert.equal(typeof r.body.message, 'string');
    }
  });

  test('sqlerp always answers has_more_results: null', async () => {
    const r1 = await call(sb, 'GET', '/customers?per_page=50', { headers: erp.headers });
    assert.equal(r1.body.meta.has_more_results, null);
    assert.equal(r1.body.data.length, 50);
    const r2 = await call(sb, 'GET', '/customers?per_page=50&page=2', { headers: erp.headers });
    assert.equal(r2.body.meta.has_more_results, null);
    assert.equal(r2.body.data.length, 10);
    const r3 = await call(sb, 'GET', '/customers?per_page=50&page=3', { headers: erp.headers });
    assert.equal(r3.body.meta.has_more_results, null);
    assert.equal(r3.body.data.length, 0);
  });

  test('a resource the source system does not support answers 404 naming the system', async () => {
    const r = await call(sb, 'GET', '/leads', { headers: erp.headers });
    assert.equal(r.status, 404);
    assert.equal(r.body.message, 'leads is not supported by SQL ERP');
  });

  test('fields a system does not support are null', async () => {
    const r = await call(sb, 'GET', '/customers?per_page=3', { headers: erp.headers });
    for (const c of r.body.data) {
      assert.equal(c.website, null);
      assert.equal(c.tax_code_id, null);
      assert.equal(typeof c.name, 'string');
    }
  });
});

describe('project scope', () => {
  test('project-scoped resources require Project-Id (400), accept an id or source_id:', async () => {
    const missing = await call(sb, 'GET', '/cost-codes', { headers: build.headers });
    assert.equal(missing.status, 400);
    assert.match(String(missing.body.message), /Project-Id/);
    const p = projects[1]!;
    const byId = await call(sb, 'GET', '/cost-codes?per_page=5', { headers: { ...build.headers, 'project-id': String(p.id) } });
    const bySource = await call(sb, 'GET', '/cost-codes?per_page=5', { headers: { ...build.headers, 'project-id': `source_id:${String(p.source_id)}` } });
    assert.equal(byId.status, 200);
    assert.deepEqual(byId.body.data, bySource.body.data);
    for (const c of byId.body.data) assert.equal(c.project_id, p.id);
    const unknown = await call(sb, 'GET', '/cost-codes', { headers: { ...build.headers, 'project-id': '00000000-0000-0000-0000-000000000000' } });
    assert.equal(unknown.status, 404);
  });

  test('ids of project-scoped records collide across projects; contents differ', async () => {
    const a = await call(sb, 'GET', '/cost-codes?per_page=10', { headers: { ...build.headers, 'project-id': String(projects[0]!.id) } });
    const b = await call(sb, 'GET', '/cost-codes?per_page=10', { headers: { ...build.headers, 'project-id': String(projects[1]!.id) } });
    assert.deepEqual(
      a.body.data.map((c) => c.id),
      b.body.data.map((c) => c.id),
    );
    assert.notDeepEqual(
      a.body.data.map((c) => c.source_update_time),
      b.body.data.map((c) => c.source_update_time),
    );
  });

  test('Project-Id: * lists every project’s records', async () => {
    const everything = await all(sb, '/drawings', { ...build.headers, 'project-id': '*' }, 100);
    assert.equal(everything.length, 3 * 60);
    assert.equal(new Set(everything.map((d) => `${String(d.project_id)}/${String(d.id)}`)).size, 180);
    assert.equal(new Set(everything.map((d) => d.id)).size, 60);
  });

  test('every construction resource answers with its contract fields', async () => {
    const headers = { ...build.headers, 'project-id': String(projects[0]!.id) };
    const expected: Record<string, string[]> = {
      'budget-line-items': ['cost_code_id', 'cost_type_id', 'current_amount', 'name', 'original_amount', 'quantity', 'unit_of_measure', 'unit_cost', 'wbs_id'],
      'actual-production-quantities': ['cost_code_id', 'cost_type_id', 'date', 'project_id', 'quantity', 'status', 'sub_job_id', 'wbs_id'],
      drawings: ['creator_id', 'discipline', 'drawing_version_id', 'filename', 'name', 'number', 'preview_url', 'version', 'project_id', 'url'],
      documents: ['name', 'project_id', 'creator_id', 'folder_id', 'preview_url', 'size', 'type', 'url'],
      'specification-sections': ['name', 'number', 'preview_url', 'section_version_id', 'project_id', 'url'],
      photos: ['capture_time', 'creator_id', 'description', 'file_url', 'latitude', 'longitude', 'name', 'preview_url', 'size'],
      files: ['creator_id', 'file_version_id', 'filename', 'folder_id', 'name', 'notes', 'preview_url', 'project_id', 'size', 'type', 'url', 'version'],
      folders: ['name', 'parent_id', 'project_id'],
    };
    for (const [resource, fields] of Object.entries(expected)) {
      const r = await call(sb, 'GET', `/${resource}?per_page=2`, { headers });
      assert.equal(r.status, 200, resource);
      for (const f of fields) assert.ok(f in r.body.data[0]!, `${resource}.${f}`);
    }
    const blis = await call(sb, 'GET', '/budget-line-items?per_page=5', { headers });
    for (const b of blis.body.data)
      for (const f of ['current_amount', 'original_amount', 'quantity', 'unit_cost']) assert.equal(typeof b[f], 'string', `money as string: ${f}`);
  });
});

describe('single objects and children', () => {
  test('GET /{resource}/{id} and /{resource}/source_id:<x> return the list’s object', async () => {
    const list = await call(sb, 'GET', '/customers?per_page=5', { headers: crm.headers });
    const c = list.body.data[3]!;
    const byId = await call(sb, 'GET', `/customers/${String(c.id)}`, { headers: crm.headers });
    assert.equal(byId.status, 200);
    assert.deepEqual(byId.body, c);
    const bySource = await call(sb, 'GET', `/customers/source_id:${String(c.source_id)}`, { headers: crm.headers });
    assert.deepEqual(bySource.body, c);
    const missing = await call(sb, 'GET', '/customers/00000000-0000-0000-0000-000000000000', { headers: crm.headers });
    assert.equal(missing.status, 404);
  });

  test('AP invoices embed line items; /line-items lists them; ids collide across invoices', async () => {
    const invoices = await call(sb, 'GET', '/ap-invoices?per_page=3', { headers: erp.headers });
    const [i1, i2] = invoices.body.data;
    const items1 = await call(sb, 'GET', `/ap-invoices/${String(i1!.id)}/line-items`, { headers: erp.headers });
    const items2 = await call(sb, 'GET', `/ap-invoices/${String(i2!.id)}/line-items`, { headers: erp.headers });
    assert.equal(items1.status, 200);
    assert.ok(items1.body.data.length >= 3 && items1.body.data.length <= 7);
    assert.deepEqual(items1.body.data, i1!.line_items);
    assert.equal(items1.body.data[0]!.id, items2.body.data[0]!.id, 'line item 0 has the same id in every invoice');
    assert.notEqual(items1.body.data[0]!.amount, items2.body.data[0]!.amount);
    const sum = items1.body.data.reduce((s, l) => s + Number(l.amount), 0);
    assert.ok(Math.abs(sum - Number(i1!.subtotal_amount)) < 0.01);
    const one = await call(sb, 'GET', `/ap-invoices/${String(i1!.id)}/line-items/${String(items1.body.data[1]!.id)}`, { headers: erp.headers });
    assert.deepEqual(one.body, items1.body.data[1]);
    const viaSource = await call(sb, 'GET', `/ap-invoices/source_id:${String(i1!.source_id)}/line-items/source_id:2`, { headers: erp.headers });
    assert.deepEqual(viaSource.body, items1.body.data[1]);
    const none = await call(sb, 'GET', `/ap-invoices/${String(i1!.id)}/line-items/00000000-0000-0000-0000-000000000000`, { headers: erp.headers });
    assert.equal(none.status, 404);
  });

  test('file and drawing versions; root folder with nested files and folders', async () => {
    const headers = { ...build.headers, 'project-id': String(projects[2]!.id) };
    const files = await call(sb, 'GET', '/files?per_page=5', { headers });
    const f = files.body.data[0]!;
    const versions = await call(sb, 'GET', `/files/${String(f.id)}/versions`, { headers });
    assert.equal(versions.body.data.length, Number(f.version));
    assert.equal(versions.body.data.at(-1)!.id, f.file_version_id);
    for (const v of versions.body.data) assert.equal(v.file_id, f.id);
    const drawings = await call(sb, 'GET', '/drawings?per_page=1', { headers });
    const dv = await call(sb, 'GET', `/drawings/${String(drawings.body.data[0]!.id)}/versions`, { headers });
    assert.equal(dv.status, 200);
    assert.equal(dv.body.data.length, Number(drawings.body.data[0]!.version));

    const root = await call(sb, 'GET', '/root-folder', { headers });
    assert.equal(root.status, 200);
    assert.equal(root.body.parent_id, null);
    const children = root.body.folders as Rec[];
    const rootFiles = root.body.files as Rec[];
    assert.equal(children.length, 3, 'ternary tree');
    for (const c of children) assert.equal(c.parent_id, root.body.id);
    for (const x of rootFiles) assert.equal(x.folder_id, root.body.id);
    const sub = await call(sb, 'GET', `/folders/${String(children[0]!.id)}`, { headers });
    assert.equal(sub.status, 200);
    assert.ok(Array.isArray(sub.body.files) && Array.isArray(sub.body.folders));
    const subFiles = await call(sb, 'GET', `/folders/${String(children[0]!.id)}/files`, { headers });
    assert.deepEqual(
      subFiles.body.data.map((x) => x.id),
      (sub.body.files as Rec[]).map((x) => x.id),
    );
    const noProject = await call(sb, 'GET', '/root-folder', { headers: build.headers });
    assert.equal(noProject.status, 400);
  });
});

describe('source data', () => {
  test('Include-Source-Data adds {path, content_type, data}; projects place the raw object directly', async () => {
    const headers = { ...erp.headers, 'include-source-data': 'true' };
    const c = await call(sb, 'GET', '/customers?per_page=1', { headers });
    const sd = c.body.data[0]!.source_data as Rec;
    assert.match(String(sd.path), /^SELECT \* FROM ARCM WHERE KEYID = /);
    assert.equal(sd.content_type, 'application/json');
    assert.equal((sd.data as Rec).NAME, c.body.data[0]!.name);
    const p = await call(sb, 'GET', '/projects?per_page=1', { headers });
    const raw = p.body.data[0]!.source_data as Rec;
    assert.equal(raw.path, undefined);
    assert.equal(raw.NAME, p.body.data[0]!.name);
    const noPath = await call(sb, 'GET', '/customers?per_page=1', { headers: { ...headers, 'include-source-data-path': 'false' } });
    assert.equal((noPath.body.data[0]!.source_data as Rec).path, undefined);
    const plain = await call(sb, 'GET', '/customers?per_page=1', { headers: erp.headers });
    assert.equal('source_data' in plain.body.data[0]!, false);
  });

  test('a comma list selects source fields; Exclude-Source-Data removes some', async () => {
    const only = await call(sb, 'GET', '/customers?per_page=1', { headers: { ...crm.headers, 'include-source-data': 'Id,Name,Email' } });
    assert.deepEqual(Object.keys((only.body.data[0]!.source_data as Rec).data as Rec).sort(), ['Email', 'Id', 'Name']);
    const excl = await call(sb, 'GET', '/customers?per_page=1', {
      headers: { ...crm.headers, 'include-source-data': 'true', 'exclude-source-data': 'Email,attributes' },
    });
    const data = (excl.body.data[0]!.source_data as Rec).data as Rec;
    assert.equal(data.Email, undefined);
    assert.equal(data.attributes, undefined);
    assert.equal(data.Name, excl.body.data[0]!.name);
  });
});

describe('filters', () => {
  test('source_update_time filters select the right records', async () => {
    const everything = await all(sb, '/customers', crm.headers, 200);
    const times = everything.map((c) => String(c.source_update_time)).sort();
    const pivot = times[30]!;
    const filters = encodeURIComponent(JSON.stringify([{ field: 'source_update_time', operator: '>', value: pivot }]));
    const later = await all(sb, `/customers?filters=${filters}`, crm.headers, 200);
    assert.equal(later.length, everything.filter((c) => String(c.source_update_time) > pivot).length);
    assert.ok(later.every((c) => String(c.source_update_time) > pivot));
    const between = encodeURIComponent(
      JSON.stringify([{ field: 'source_create_time', operator: 'BETWEEN', value: ['2023-01-01T00:00:00Z', '2023-06-30T00:00:00Z'] }]),
    );
    const mid = await all(sb, `/customers?filters=${between}`, crm.headers, 200);
    assert.equal(
      mid.length,
      everything.filter((c) => String(c.source_create_time) >= '2023-01-01' && String(c.source_create_time) <= '2023-06-30T00:00:00.000Z').length,
    );
    // Filtered pages keep has_more_results exact.
    const page = await call(sb, `GET`, `/customers?per_page=5&filters=${filters}`, { headers: crm.headers });
    assert.equal(page.body.meta.has_more_results, later.length > 5);
  });

  test('filters are refused where unsupported or malformed (400)', async () => {
    const f = encodeURIComponent(JSON.stringify([{ field: 'source_update_time', operator: '>', value: '2024-01-01' }]));
    const erpR = await call(sb, 'GET', `/customers?filters=${f}`, { headers: erp.headers });
    assert.equal(erpR.status, 400);
    assert.match(String(erpR.body.message), /not supported by SQL ERP/);
    for (const bad of [
      'not-json',
      JSON.stringify([{ field: 'no_such_field', operator: '=', value: 'x' }]),
      JSON.stringify([{ field: 'source_update_time', operator: '~', value: 'x' }]),
    ]) {
      const r = await call(sb, 'GET', `/customers?filters=${encodeURIComponent(bad)}`, { headers: crm.headers });
      assert.equal(r.status, 400, bad);
    }
  });
});

describe('every source system serves its resources', () => {
  test('each listed resource answers 200 with records', async () => {
    const admin = await call(sb, 'GET', '/_admin/source-systems', {
      headers: { 'client-id': build.headers['client-id']!, 'client-secret': build.headers['client-secret']! },
    });
    const systems = admin.body.data as Array<{ slug: string; resources: Record<string, { scope: string }>; default_per_page: number; max_per_page: number }>;
    assert.equal(systems.length, 10);
    const covered = new Set<string>();
    for (const s of systems) {
      const a = await link(sb, s.slug, `all-${s.slug}`);
      const p = (await call(sb, 'GET', '/projects', { headers: a.headers })).body.data?.[0];
      for (const [resource, support] of Object.entries(s.resources)) {
        if (support.scope === 'child') continue;
        covered.add(resource);
        const headers = support.scope === 'project' ? { ...a.headers, 'project-id': String(p!.id) } : a.headers;
        // Aggregate lists have a path of their own (`/subcontracts/compliances`).
        const r = await call(sb, 'GET', resourceDef(resource)?.path ?? `/${resource}`, { headers });
        assert.equal(r.status, 200, `${s.slug} ${resource}: ${r.text}`);
        assert.ok(r.body.data.length > 0, `${s.slug} ${resource}`);
        assert.ok(r.body.data.length <= s.default_per_page);
      }
    }
    for (const r of [
      'projects',
      'jobs',
      'customers',
      'appointments',
      'leads',
      'opportunities',
      'activities',
      'files',
      'folders',
      'photos',
      'drawings',
      'documents',
      'specification-sections',
      'actual-production-quantities',
      'budget-line-items',
      'ap-invoices',
      'vendors',
      'cost-codes',
    ]) {
      assert.ok(covered.has(r), `some source system serves ${r}`);
    }
  });
});
