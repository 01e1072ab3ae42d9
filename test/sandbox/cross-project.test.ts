// The sandbox's lists across projects (`Project-Id: *`): accepted for most project-scoped
// resources of BuildPro, refused with a 400 that says what to do for those a source system cannot
// list so (budget line items carry no project_id; DocVault lists one project at a time), as the
// profiles say; and accounts shaped like real ones (`projectSkew`: a few big projects, many small).
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import type { Sandbox } from '../../sandbox/server.ts';
import { admin, all, call, link, start, type Linked, type Rec } from './helpers.ts';

let sb: Sandbox;
let build: Linked;
let docs: Linked;
let projects: Rec[];
before(async () => {
  sb = await start({ seed: 5, size: 12, sizes: { projects: 20 }, projectSkew: { bigProjects: 2, big: 30, small: 3 } });
  build = await link(sb, 'buildpro');
  docs = await link(sb, 'docvault');
  projects = await all(sb, '/projects', build.headers, 100);
});
after(async () => {
  await sb.close();
});

describe('Project-Id: *', () => {
  test('lists every project’s records where the profile accepts it, each with its project_id', async () => {
    const everything = await all(sb, '/cost-codes', { ...build.headers, 'project-id': '*' }, 50);
    assert.equal(everything.length, 2 * 30 + 18 * 3);
    assert.ok(everything.every((c) => typeof c.project_id === 'string'));
  });

  test('refuses it with a 400 that says what to do where the profile does not', async () => {
    const r = await call(sb, 'GET', '/budget-line-items', { headers: { ...build.headers, 'project-id': '*' } });
    assert.equal(r.status, 400);
    assert.match(String(r.body.message), /Project-Id \* is not accepted for budget-line-items by BuildPro: list each project with its own Project-Id/);
    const docProjects = await all(sb, '/projects', docs.headers, 100);
    const f = await call(sb, 'GET', '/folders', { headers: { ...docs.headers, 'project-id': '*' } });
    assert.equal(f.status, 400);
    const one = await call(sb, 'GET', '/folders', { headers: { ...docs.headers, 'project-id': String(docProjects[0]!.id) } });
    assert.equal(one.status, 200);
  });

  test('the admin API describes which resources take it', async () => {
    const r = await admin(sb, 'GET', '/_admin/source-systems');
    const buildpro = (r.body.data as unknown as { slug: string; resources: Record<string, { cross_project?: boolean }> }[]).find((p) => p.slug === 'buildpro')!;
    assert.equal(buildpro.resources['cost-codes']!.cross_project, true);
    assert.equal(buildpro.resources['budget-line-items']!.cross_project, false);
    assert.equal(buildpro.resources.projects!.cross_project, undefined);
  });
});

describe('projectSkew', () => {
  test('sizes each project’s lists: the first projects big, the others small (folders keep their tree)', async () => {
    assert.equal(projects.length, 20);
    const sizes = [];
    for (const p of projects.slice(0, 4)) sizes.push((await all(sb, '/drawings', { ...build.headers, 'project-id': String(p.id) }, 100)).length);
    assert.deepEqual(sizes, [30, 30, 3, 3]);
    const folders = await all(sb, '/folders', { ...build.headers, 'project-id': String(projects[0]!.id) }, 100);
    assert.ok(folders.length >= 4 && folders.length !== 30, `folders: ${folders.length}`);
    // A record of a big project's list is found by id past the small lists' size.
    const big = await all(sb, '/drawings', { ...build.headers, 'project-id': String(projects[0]!.id) }, 100);
    const last = await call(sb, 'GET', `/drawings/${String(big[29]!.id)}`, { headers: { ...build.headers, 'project-id': String(projects[0]!.id) } });
    assert.equal(last.status, 200);
  });
});
