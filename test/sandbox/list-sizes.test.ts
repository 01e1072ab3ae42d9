// Contract test of the `sizes` option: a per-resource list size that replaces `size`'s rule for
// top-level resources (one big list and little else), in every scope; children keep their counts.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { all, call, link, start } from './helpers.ts';

test('sizes overrides the list size per resource; other resources keep size', async () => {
  const sb = await start({ size: 10, sizes: { customers: 2_345, projects: 1, jobs: 0 } });
  try {
    const fo = await link(sb, 'fieldops');
    const customers = await all(sb, '/customers', fo.headers, 1000);
    assert.equal(customers.length, 2_345);
    assert.equal(new Set(customers.map((c) => c.id)).size, 2_345);
    const last = await call(sb, 'GET', '/customers?per_page=1000&page=3', { headers: fo.headers });
    assert.equal(last.body.data.length, 345);
    assert.equal(last.body.meta.has_more_results, false);
    assert.equal((await call(sb, 'GET', '/projects?per_page=1000', { headers: fo.headers })).body.data.length, 1);
    assert.equal((await call(sb, 'GET', '/jobs?per_page=1000', { headers: fo.headers })).body.data.length, 0);
    assert.equal((await call(sb, 'GET', '/appointments?per_page=1000', { headers: fo.headers })).body.data.length, 10);
    // Lookups by id reach the overridden list's far end.
    const far = customers[2_000]!;
    const one = await call(sb, 'GET', `/customers/${String(far.id)}`, { headers: fo.headers });
    assert.equal(one.status, 200);
    assert.equal(one.body.id, far.id);

    // Project-scoped lists take the override per project; children keep their per-parent counts.
    const bp = await link(sb, 'buildpro');
    const projects = (await call(sb, 'GET', '/projects?per_page=1000', { headers: bp.headers })).body.data;
    assert.equal(projects.length, 1);
    const headers = { ...bp.headers, 'project-id': String(projects[0]!.id) };
    assert.equal((await call(sb, 'GET', '/cost-codes?per_page=1000', { headers })).body.data.length, 10);
    const files = (await call(sb, 'GET', '/files?per_page=5', { headers })).body.data;
    const versions = await call(sb, 'GET', `/files/${String(files[0]!.id)}/versions`, { headers });
    assert.ok(versions.body.data.length >= 1 && versions.body.data.length <= 3);
  } finally {
    await sb.close();
  }
});

test('sizes refuses negative counts', async () => {
  await assert.rejects(start({ sizes: { customers: -1 } }), /sizes\.customers/);
});
