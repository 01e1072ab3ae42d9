// In the sandbox: the three source systems shaped like those the market connects (a cloud
// construction PM system, an on-premises construction ERP serving one request at a time, a cloud
// accounting system) serve their resources; the real service's other resources take the writes the
// reference lists for their paths (and only those); churn that names no resources keeps to the
// contract's, so runs that name none change what they changed before the catalog grew.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import type { Sandbox } from '../../sandbox/server.ts';
import { admin, all, call, link, sleep, start, type Linked } from './helpers.ts';

let sb: Sandbox;

before(async () => {
  sb = await start({ seed: 7, size: 6 });
});

after(async () => {
  await sb?.close();
});

describe('source systems shaped like the field', () => {
  test('a cloud PM system, an on-premises ERP and a cloud accounting system, each with its resources', async () => {
    const systems = (await admin(sb, 'GET', '/_admin/source-systems')).body.data as unknown as Array<{
      slug: string;
      kind: string;
      serial: unknown;
      rate_limit: { limit: number; window_ms: number };
      resources: Record<string, { scope: string; writable: boolean }>;
    }>;
    const bySlug = new Map(systems.map((s) => [s.slug, s]));
    const pm = bySlug.get('sitecloud');
    const erp = bySlug.get('jobsiteerp');
    const books = bySlug.get('cloudbooks');
    assert.ok(pm && erp && books, `the new systems are listed: ${systems.map((s) => s.slug).join(', ')}`);
    assert.equal(pm.kind, 'construction');
    assert.deepEqual(pm.rate_limit, { limit: 3600, window_ms: 3_600_000, header_prefix: 'SiteCloud' });
    for (const r of ['rfis', 'submittals', 'observations', 'work-logs', 'drawings', 'photos']) assert.ok(r in pm.resources, `sitecloud serves ${r}`);
    assert.equal(erp.kind, 'erp');
    assert.deepEqual(erp.serial, { max_concurrent: 1, max_queued: 3, max_execution_ms: 60_000 });
    for (const r of ['subcontracts', 'subcontract-line-items', 'purchase-orders', 'job-costs', 'employees', 'timecard-entries'])
      assert.ok(r in erp.resources, `jobsiteerp serves ${r}`);
    assert.equal(books.kind, 'accounting');
    for (const r of ['ap-invoices', 'ar-invoices', 'ar-payments', 'ledger-accounts', 'ledger-journal-entries'])
      assert.ok(r in books.resources, `cloudbooks serves ${r}`);
  });

  test('the on-premises ERP serves one request at a time', async () => {
    const a = await link(sb, 'jobsiteerp', 'serial-erp');
    // Each request takes a second, so all eight arrive while the first runs (even on a loaded machine).
    assert.equal((await admin(sb, 'PUT', '/_admin/source-systems/jobsiteerp', { latency_ms: 1000 })).status, 200);
    try {
      const answers = await Promise.all(Array.from({ length: 8 }, () => call(sb, 'GET', '/subcontracts?per_page=2', { headers: a.headers })));
      // One runs, three wait, the others are refused.
      const statuses = answers.map((r) => r.status);
      assert.equal(statuses.filter((s) => s === 200).length, 4, statuses.join(','));
      const refused = answers.filter((r) => r.status === 429);
      assert.equal(refused.length, 4, statuses.join(','));
      assert.match(String(refused[0]!.body.message), /one request at a time/);
    } finally {
      await admin(sb, 'PUT', '/_admin/source-systems/jobsiteerp', { latency_ms: 0 });
    }
  });
});

describe("writes of the real service's other resources", () => {
  let pm: Linked;
  let erp: Linked;
  let projectId: string;

  before(async () => {
    pm = await link(sb, 'sitecloud', 'writes-pm');
    erp = await link(sb, 'sqlerp', 'writes-erp');
    projectId = String((await call(sb, 'GET', '/projects', { headers: pm.headers })).body.data[0]!.id);
  });

  test('an RFI is created in its project and listed there; the reference has no RFI update', async () => {
    const ph = { ...pm.headers, 'project-id': projectId };
    const created = await call(sb, 'POST', '/rfis', {
      headers: ph,
      body: { subject: 'Slab edge detail', question: 'Which detail governs at grid 4?', status: 'Open' },
    });
    assert.equal(created.status, 201, created.text);
    const id = String(created.body.id);
    assert.equal(created.body.project_id, projectId);
    const got = await call(sb, 'GET', `/rfis/${id}`, { headers: ph });
    assert.equal(got.status, 200, got.text);
    assert.equal(got.body.question, 'Which detail governs at grid 4?');
    assert.ok((await all(sb, '/rfis', ph)).some((r) => r.id === id));
    assert.equal((await call(sb, 'PATCH', `/rfis/${id}`, { headers: ph, body: { status: 'Closed' } })).status, 404);
  });

  test('a subcontract line item is created, updated and deleted under its subcontract', async () => {
    const sub = (await call(sb, 'GET', '/subcontracts?per_page=1', { headers: erp.headers })).body.data[0]!;
    const base = `/subcontracts/${String(sub.id)}/line-items`;
    const created = await call(sb, 'POST', base, { headers: erp.headers, body: { unit_of_measure: 'LF', quantity: 10, amount: 1500 } });
    assert.equal(created.status, 201, created.text);
    const id = String(created.body.id);
    assert.equal(created.body.subcontract_id, sub.id);
    const updated = await call(sb, 'PATCH', `${base}/${id}`, { headers: erp.headers, body: { amount: 1750 } });
    assert.equal(updated.status, 200, updated.text);
    assert.equal(updated.body.amount, 1750);
    assert.equal(updated.body.quantity, 10);
    assert.equal((await call(sb, 'DELETE', `${base}/${id}`, { headers: erp.headers })).status, 204);
    assert.ok(!(await all(sb, base, erp.headers)).some((r) => r.id === id));
  });

  test('a resource the reference shows read-only takes no writes', async () => {
    // `/locations` (SiteCloud) is get and list only in the reference: no such route upstream.
    const r = await call(sb, 'POST', '/locations', { headers: { ...pm.headers, 'project-id': projectId }, body: { name: 'Level 2' } });
    assert.equal(r.status, 404, r.text);
  });
});

describe('churn', () => {
  test("a run that names no resources churns the contract's resources only", async () => {
    const a = await link(sb, 'buildpro', 'churn-default');
    const started = await admin(sb, 'POST', '/_admin/churn', { account_token: a.token, per_second: 1, seconds: 0.01 });
    assert.equal(started.status, 201);
    const resources = started.body.resources;
    assert.deepEqual(resources, [
      'projects',
      'vendors',
      'cost-codes',
      'budget-line-items',
      'actual-production-quantities',
      'drawings',
      'documents',
      'specification-sections',
      'photos',
      'folders',
      'files',
    ]);
    const named = await admin(sb, 'POST', '/_admin/churn', { account_token: a.token, per_second: 1, seconds: 0.01, resources: ['rfis'] });
    assert.deepEqual(named.body.resources, ['rfis'], 'a new resource churns when named');
    await sleep(50);
  });
});
