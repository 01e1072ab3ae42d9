// What an account pass runs, decided by the pure plan alone (no Temporal, no database): which
// resources and scopes a targeted resync lists, projects before everything else, lists across projects
// and the per-project rest, children of small parent scopes swept and big ones in workflows of their own,
// sweeps of at most 100 streams of one resource, and when removed projects are retired.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { AccountPlan } from '../../../activities/sync.ts';
import {
  PassPlan,
  childrenGroupsBeforeSweeps,
  childrenWork,
  retiresRemovedProjects,
  sweepBatches,
  type PassTarget,
} from '../../../workflows/account-pass-plan.ts';

const construction: AccountPlan = {
  sourceSystem: 'buildpro',
  resources: [
    { name: 'projects', scope: 'account' },
    { name: 'vendors', scope: 'account' },
    { name: 'ap-invoices', scope: 'account' },
    { name: 'cost-codes', scope: 'project', crossProject: true },
    { name: 'budget-line-items', scope: 'project', crossProject: false },
    { name: 'drawings', scope: 'project' },
    { name: 'ap-invoice-line-items', scope: 'child' },
    { name: 'drawing-versions', scope: 'child' },
  ],
};

const plan = (target: PassTarget = {}, accountPlan = construction) => new PassPlan(accountPlan, target);
const names = (specs: readonly { resource: string }[]) => specs.map((s) => s.resource);
const scopes = (specs: readonly { scope: string }[]) => specs.map((s) => s.scope);

describe('the plan of an account pass', () => {
  it('lists the projects first and alone, then the other account-level resources', () => {
    const { projects, others } = plan().accountStreams();
    assert.deepEqual(projects, { resource: 'projects', scope: '', path: '/projects' });
    assert.deepEqual(names(others), ['vendors', 'ap-invoices']);
  });

  it('a resync of one resource lists it, what it hangs off and the projects, and nothing else', () => {
    const p = plan({ resource: 'drawing-versions' });
    assert.deepEqual(
      construction.resources.map((r) => r.name).filter((r) => p.wants(r)),
      ['projects', 'drawings', 'drawing-versions'],
    );
    assert.deepEqual(names(p.accountStreams().others), []);
    assert.deepEqual(p.projectResources(), ['drawings']);
    assert.equal(p.whole, false);
  });

  it('a resync of one project lists the projects, that project and what is under it, and no list across projects', () => {
    const p = plan({ scope: 'project=p2' });
    const { projects, others } = p.accountStreams();
    assert.ok(projects, 'the projects list runs even for a targeted scope');
    assert.deepEqual(others, []);
    assert.equal(p.mayListAcross(), false);
    const { across, perProject } = p.projectStreams(['p1', 'p2', 'p3'], false);
    assert.deepEqual(across, []);
    assert.deepEqual(new Set(scopes(perProject)), new Set(['project=p2']));
    assert.ok(p.wantsScope('project=p2/drawings=d1'), 'the scopes below it');
    assert.ok(!p.wantsScope('project=p1/drawings=d1'));
  });

  it('lists across projects what the source system allows, and the rest project by project', () => {
    const { across, perProject } = plan().projectStreams(['p1', 'p2'], true);
    assert.deepEqual(names(across), ['cost-codes', 'drawings']);
    assert.ok(across.every((s) => s.scope === 'project=*' && s.projectId === '*'));
    assert.deepEqual(
      perProject.map((s) => `${s.resource} ${s.scope} ${s.projectId}`),
      ['budget-line-items project=p1 p1', 'budget-line-items project=p2 p2'],
    );
  });

  it('lists every project-scoped resource project by project when lists across projects are off (passes begun before them)', () => {
    const { across, perProject } = plan().projectStreams(['p1', 'p2'], false);
    assert.deepEqual(across, []);
    assert.deepEqual(
      perProject.map((s) => `${s.resource} ${s.scope}`),
      [
        'cost-codes project=p1',
        'budget-line-items project=p1',
        'drawings project=p1',
        'cost-codes project=p2',
        'budget-line-items project=p2',
        'drawings project=p2',
      ],
    );
  });

  it('needs the project ids only when a project-scoped resource is listed and the account has projects', () => {
    assert.equal(plan().needsProjectIds(), true);
    assert.equal(plan({ resource: 'vendors' }).needsProjectIds(), false);
    const noProjects: AccountPlan = {
      sourceSystem: 'ledger',
      resources: [
        { name: 'vendors', scope: 'account' },
        { name: 'cost-codes', scope: 'project' },
      ],
    };
    assert.equal(plan({}, noProjects).needsProjectIds(), false);
  });

  it('finds children under account-level parents once and under project-scoped parents per project', () => {
    const entries = plan().childParents(['p1', 'p2']);
    assert.deepEqual(entries, [
      { parent: 'ap-invoices', children: ['ap-invoice-line-items'], parentScopes: [{ scope: '' }] },
      {
        parent: 'drawings',
        children: ['drawing-versions'],
        parentScopes: [
          { scope: 'project=p1', projectId: 'p1' },
          { scope: 'project=p2', projectId: 'p2' },
        ],
      },
    ]);
    assert.deepEqual(plan({ resource: 'vendors' }).childParents(['p1']), [], 'a resync of a resource without children lists none');
  });

  it('sweeps the children of small parent scopes and gives a big one its own workflow', () => {
    const [, drawings] = plan().childParents(['p1', 'p2']);
    const work = childrenWork(drawings!, 'drawing-versions', { inline: { 'project=p1': ['d1', 'd2'] }, big: ['project=p2'] }, true);
    assert.deepEqual(work.items, [
      { resource: 'drawing-versions', scope: 'project=p1/drawings=d1', path: '/drawings/d1/versions', projectId: 'p1' },
      { resource: 'drawing-versions', scope: 'project=p1/drawings=d2', path: '/drawings/d2/versions', projectId: 'p1' },
    ]);
    assert.deepEqual(work.groups, [
      { resource: 'drawing-versions', parentResource: 'drawings', parentScope: 'project=p2', projectId: 'p2', changedFor: 'drawing-versions' },
    ]);
    const full = childrenWork(drawings!, 'drawing-versions', { inline: {}, big: ['project=p2'] }, false);
    assert.equal(full.groups[0]!.changedFor, undefined, 'a full pass lists the children under every parent');
  });

  it('runs a children workflow per parent scope for passes begun before sweeps', () => {
    const [, drawings] = plan().childParents(['p1', 'p2']);
    assert.deepEqual(childrenGroupsBeforeSweeps(drawings!), [
      { resource: 'drawing-versions', parentResource: 'drawings', parentScope: 'project=p1', projectId: 'p1' },
      { resource: 'drawing-versions', parentResource: 'drawings', parentScope: 'project=p2', projectId: 'p2' },
    ]);
  });

  it('sweeps at most 100 streams, each sweep of one resource', () => {
    const items = [
      ...Array.from({ length: 250 }, (_, i) => ({ resource: 'a', scope: `project=${i}`, path: '/a' })),
      ...Array.from({ length: 3 }, (_, i) => ({ resource: 'b', scope: `project=${i}`, path: '/b' })),
    ];
    const batches = sweepBatches(items);
    assert.deepEqual(
      batches.map((b) => `${b[0]!.resource}:${b.length}`),
      ['a:100', 'a:100', 'a:50', 'b:3'],
    );
    assert.ok(batches.every((b) => b.every((i) => i.resource === b[0]!.resource)));
    assert.deepEqual(sweepBatches([]), []);
  });

  it('retires removed projects only after a full pass of the whole account whose projects list completed', () => {
    assert.equal(retiresRemovedProjects(plan(), 'full', []), true);
    assert.equal(retiresRemovedProjects(plan(), 'full', ['projects']), false, 'the projects list failed');
    assert.equal(retiresRemovedProjects(plan(), 'incremental', []), false);
    assert.equal(retiresRemovedProjects(plan({ resource: 'vendors' }), 'full', []), false);
    assert.equal(retiresRemovedProjects(plan({ scope: 'project=p1' }), 'full', []), false);
    const noProjects: AccountPlan = { sourceSystem: 'ledger', resources: [{ name: 'vendors', scope: 'account' }] };
    assert.equal(retiresRemovedProjects(plan({}, noProjects), 'full', []), false);
  });
});
