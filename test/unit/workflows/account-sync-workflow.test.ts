// The account pass's decisions, tested on the workflow alone: the real workflow code runs on
// Temporal's test environment (the run's dev server) with its activities replaced by small fakes that
// record what they were asked. What is checked is what the workflow decides: order (projects before
// anything project-scoped), lists across projects and the per-project fallback when one is refused,
// sweeps of at most 100 streams of one resource, children only under changed parents on an incremental
// pass, failures reported without failing the pass, and removed projects retired only after a full pass
// whose projects list completed. Postgres and the upstream are the integration tests' business.
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { after, before, describe, it } from 'node:test';
import { ApplicationFailure } from '@temporalio/common';
import type { Worker } from '@temporalio/worker';
import type { Activities } from '../../../activities/index.ts';
import type {
  AccountPlan,
  ChildrenPlan,
  ChildrenPlanInput,
  ParentScopesInput,
  SweepInput,
  SweepResult,
  SyncSliceInput,
  SyncSliceResult,
} from '../../../activities/sync.ts';
import { allProjectsScope } from '../../../lib/resources.ts';
import type { AccountSyncInput, AccountSyncResult } from '../../../workflows/account-sync.ts';
import { startWorkflowTestEnv, type WorkflowTestEnv } from '../../helpers/workflow-env.ts';

interface Fakes {
  plan: AccountPlan;
  projectIds: string[];
  /** Streams whose slice throws: `resource|scope` -> the failure. */
  failSlice?: Map<string, () => Error>;
  /** Resources whose sweep reports a failed stream (the first item). */
  failSweepItem?: Set<string>;
  /** Streams whose slice says they are stalled: `resource|scope` -> why. */
  stallSlice?: Map<string, string>;
  /** Resources whose sweep reports a stalled stream (the last item). */
  stallSweepItem?: Set<string>;
  /** Parents whose children are listed, per parent scope. */
  childParents?: (input: ChildrenPlanInput) => ChildrenPlan;
}

interface Calls {
  /** Every activity call, in the order it started. */
  log: string[];
  slices: SyncSliceInput[];
  sweeps: SweepInput[];
  childrenPlans: ChildrenPlanInput[];
  retired: number;
  registered: number;
}

const zero = { pages: 0, records: 0, inserted: 0, updated: 0, unchanged: 0, deleted: 0 };

/** The pass's activities, typed against the real ones: a changed signature breaks the fakes at compile time. */
type PassActivities = Pick<
  Activities,
  'planAccount' | 'listParentIds' | 'planChildren' | 'retireRemovedProjects' | 'syncSlice' | 'sweepScopes' | 'syncChildren' | 'registerWebhooks'
>;

function fakeActivities(f: Fakes, calls: Calls): PassActivities {
  return {
    async planAccount(): Promise<AccountPlan> {
      calls.log.push('planAccount');
      return f.plan;
    },
    async listParentIds(input: ParentScopesInput): Promise<string[]> {
      calls.log.push(`listParentIds ${input.parentResource}`);
      return input.parentResource === 'projects' ? f.projectIds : [];
    },
    async planChildren(input: ChildrenPlanInput): Promise<ChildrenPlan> {
      calls.log.push(`planChildren ${input.childResource}`);
      calls.childrenPlans.push(input);
      return f.childParents ? f.childParents(input) : { inline: {}, big: [] };
    },
    async retireRemovedProjects(): Promise<number> {
      calls.log.push('retireRemovedProjects');
      calls.retired++;
      return 0;
    },
    async syncSlice(input: SyncSliceInput): Promise<SyncSliceResult> {
      calls.log.push(`syncSlice ${input.resource} ${input.scope}`);
      calls.slices.push(input);
      const fail = f.failSlice?.get(`${input.resource}|${input.scope}`);
      if (fail) throw fail();
      const stalled = f.stallSlice?.get(`${input.resource}|${input.scope}`);
      if (stalled !== undefined) return { ...zero, done: true, generation: 0, stalled };
      return { ...zero, pages: 1, records: 2, inserted: 2, done: true, generation: 1 };
    },
    async sweepScopes(input: SweepInput): Promise<SweepResult> {
      calls.log.push(`sweepScopes ${input.items[0]!.resource} x${input.items.length}`);
      calls.sweeps.push(input);
      const failed = f.failSweepItem?.has(input.items[0]!.resource)
        ? [{ resource: input.items[0]!.resource, scope: input.items[0]!.scope, error: 'upstream said 500' }]
        : [];
      const last = input.items.at(-1)!;
      const stalled = f.stallSweepItem?.has(last.resource) ? [{ resource: last.resource, scope: last.scope, reason: 'page timed out 3 times' }] : [];
      return { ...zero, records: input.items.length, streams: input.items.length, notDue: 0, failed, stalled };
    },
    async syncChildren(): Promise<never> {
      throw new Error('not expected: no big parent scopes in these tests');
    },
    async registerWebhooks() {
      calls.log.push('registerWebhooks');
      calls.registered++;
      return { registered: 1, missing: 0 };
    },
  };
}

const construction: AccountPlan = {
  sourceSystem: 'buildpro',
  resources: [
    { name: 'projects', scope: 'account' },
    { name: 'vendors', scope: 'account' },
    { name: 'cost-codes', scope: 'project', crossProject: true },
    { name: 'budget-line-items', scope: 'project', crossProject: false },
    { name: 'drawings', scope: 'project', crossProject: true },
    { name: 'drawing-versions', scope: 'child' },
  ],
};

const projects = (n: number) => Array.from({ length: n }, (_, i) => `p${i + 1}`);

describe('the account pass workflow, with its activities faked', { timeout: 180_000 }, () => {
  let t: WorkflowTestEnv;

  before(async () => {
    t = await startWorkflowTestEnv();
  });

  after(async () => {
    worker?.shutdown();
    await running;
    await t?.close();
  });

  // One worker for the file's passes; each pass gets its own fakes (passes run one at a time).
  let current: { f: Fakes; calls: Calls } | undefined;
  let worker: Worker | undefined;
  let running: Promise<void> | undefined;
  const taskQueue = `workflow-unit-${randomUUID()}`;

  async function pass(f: Fakes, input: Omit<AccountSyncInput, 'accountId'> = {}): Promise<{ result: AccountSyncResult; calls: Calls }> {
    const calls: Calls = { log: [], slices: [], sweeps: [], childrenPlans: [], retired: 0, registered: 0 };
    current = { f, calls };
    if (!worker) {
      const activities = Object.fromEntries(
        Object.keys(fakeActivities(f, calls)).map((name) => [
          name,
          (...args: unknown[]) => (fakeActivities(current!.f, current!.calls) as unknown as Record<string, (...a: unknown[]) => unknown>)[name]!(...args),
        ]),
      );
      worker = await t.worker(taskQueue, activities);
      running = worker.run();
    }
    const accountId = randomUUID();
    const result = (await t.env.client.workflow.execute('accountSyncWorkflow', {
      taskQueue,
      workflowId: `account-unit-${accountId}`,
      args: [{ accountId, ...input }],
    })) as AccountSyncResult;
    return { result, calls };
  }

  it('lists projects before anything else, then account resources, lists across projects and per-project sweeps', async () => {
    const { result, calls } = await pass({ plan: construction, projectIds: projects(3) });
    const firstList = calls.log.find((l) => l.startsWith('syncSlice') || l.startsWith('sweepScopes'));
    assert.equal(firstList, 'syncSlice projects ', 'the projects list is the first list of the pass');
    assert.ok(calls.log.indexOf('listParentIds projects') > calls.log.indexOf('syncSlice projects '), 'project ids are read after the projects list');
    // Across projects: one stream each for the resources the plan allows, none per project for them.
    const across = calls.slices
      .filter((s) => s.scope === allProjectsScope)
      .map((s) => s.resource)
      .sort();
    assert.deepEqual(across, ['cost-codes', 'drawings']);
    assert.ok(calls.slices.filter((s) => s.scope === allProjectsScope).every((s) => s.projectId === '*'));
    // Per project: only the resource that cannot be listed across projects, swept.
    assert.deepEqual(
      calls.sweeps.map((s) => s.items[0]!.resource),
      ['budget-line-items'],
    );
    assert.deepEqual(
      calls.sweeps[0]!.items.map((i) => i.scope),
      ['project=p1', 'project=p2', 'project=p3'],
    );
    assert.equal(result.failed.length, 0);
    assert.equal(calls.retired, 1, 'a full pass whose projects list completed retires removed projects');
  });

  it('falls back to per-project sweeps for a list across projects the upstream refused, in the same pass', async () => {
    const refusal = () =>
      ApplicationFailure.create({ type: 'cross_project_refused', message: 'the source system does not list drawings across projects', nonRetryable: true });
    const { result, calls } = await pass({ plan: construction, projectIds: projects(2), failSlice: new Map([[`drawings|${allProjectsScope}`, refusal]]) });
    const swept = calls.sweeps.map((s) => `${s.items[0]!.resource}:${s.items.map((i) => i.scope).join(',')}`).sort();
    assert.deepEqual(swept, ['budget-line-items:project=p1,project=p2', 'drawings:project=p1,project=p2']);
    assert.deepEqual(result.failed, [], 'a refusal is not a failure of the pass');
  });

  it('sweeps at most 100 streams of one resource at a time', async () => {
    const { calls } = await pass({ plan: construction, projectIds: projects(250) });
    assert.deepEqual(
      calls.sweeps.map((s) => s.items.length).sort((a, b) => a - b),
      [50, 100, 100],
    );
    assert.ok(calls.sweeps.every((s) => new Set(s.items.map((i) => i.resource)).size === 1));
    const scopes = calls.sweeps.flatMap((s) => s.items.map((i) => i.scope));
    assert.equal(new Set(scopes).size, 250, 'every project swept once');
  });

  it('asks for children only under changed parents on an incremental pass, under every parent on a full one', async () => {
    const childParents = (input: ChildrenPlanInput): ChildrenPlan => ({
      inline: Object.fromEntries(input.parentScopes.map((s) => [s, input.changedOnly ? ['d1'] : ['d1', 'd2']])),
      big: [],
    });
    const full = await pass({ plan: construction, projectIds: projects(2), childParents }, { mode: 'full' });
    assert.deepEqual(
      full.calls.childrenPlans.map((c) => c.changedOnly),
      [false],
    );
    assert.equal(full.calls.sweeps.filter((s) => s.items[0]!.resource === 'drawing-versions').flatMap((s) => s.items).length, 4);
    const incremental = await pass({ plan: construction, projectIds: projects(2), childParents }, { mode: 'incremental' });
    assert.deepEqual(
      incremental.calls.childrenPlans.map((c) => c.changedOnly),
      [true],
    );
    const versions = incremental.calls.sweeps.filter((s) => s.items[0]!.resource === 'drawing-versions').flatMap((s) => s.items);
    assert.deepEqual(versions.map((i) => i.path).sort(), ['/drawings/d1/versions', '/drawings/d1/versions']);
    assert.ok(
      incremental.calls.sweeps.every((s) => s.adaptive === true),
      'a scheduled incremental pass sweeps adaptively',
    );
    assert.equal(incremental.calls.retired, 0, 'only full passes retire removed projects');
  });

  it('reports a failed stream and goes on; never retires projects after the projects list failed', async () => {
    const broken = () => ApplicationFailure.create({ type: 'upstream_error', message: 'projects: the upstream answered 500', nonRetryable: true });
    const { result, calls } = await pass({
      plan: construction,
      projectIds: projects(2),
      failSlice: new Map([['projects|', broken]]),
      failSweepItem: new Set(['budget-line-items']),
    });
    const failed = result.failed.map((f) => `${f.resource}|${f.scope}`).sort();
    assert.deepEqual(failed, ['budget-line-items|project=p1', 'projects|']);
    assert.match(result.failed.find((f) => f.resource === 'projects')!.error ?? '', /500/);
    assert.ok(
      calls.slices.some((s) => s.resource === 'vendors'),
      'the other lists still ran',
    );
    assert.equal(calls.retired, 0, 'no project is retired after a failed projects list');
  });

  it('lists the streams it leaves stalled (resource, scope, why), failing none of them', async () => {
    const { result } = await pass({
      plan: construction,
      projectIds: projects(3),
      stallSlice: new Map([
        ['vendors|', 'same page returned 3 times: vendors page 4 came back as page 3 again'],
        [`cost-codes|${allProjectsScope}`, 'page timed out 3 times: cost-codes page 2 got no answer'],
      ]),
      stallSweepItem: new Set(['budget-line-items']),
    });
    assert.deepEqual(result.failed, [], 'a stalled stream is not a failed one');
    assert.deepEqual(
      [...result.stalled].sort((a, b) => `${a.resource}|${a.scope}`.localeCompare(`${b.resource}|${b.scope}`)),
      [
        { resource: 'budget-line-items', scope: 'project=p3', reason: 'page timed out 3 times' },
        { resource: 'cost-codes', scope: allProjectsScope, reason: 'page timed out 3 times: cost-codes page 2 got no answer' },
        { resource: 'vendors', scope: '', reason: 'same page returned 3 times: vendors page 4 came back as page 3 again' },
      ],
    );
  });

  it('a targeted resync lists what it names (and projects), and registers webhooks when asked', async () => {
    const { calls } = await pass(
      { plan: construction, projectIds: projects(3) },
      { mode: 'full', resource: 'budget-line-items', scope: 'project=p2', registerWebhooks: true },
    );
    assert.deepEqual(
      calls.sweeps.flatMap((s) => s.items.map((i) => `${i.resource}|${i.scope}`)),
      ['budget-line-items|project=p2'],
    );
    assert.ok(!calls.slices.some((s) => s.resource === 'vendors' || s.scope === allProjectsScope), 'nothing else is listed');
    assert.equal(calls.retired, 0, 'a targeted pass retires nothing');
    assert.equal(calls.registered, 1);
    assert.equal(calls.log.at(-1), 'registerWebhooks', 'webhooks are registered after the lists');
  });
});

describe('the stream and children workflows, with their activities faked', { timeout: 120_000 }, () => {
  let t: WorkflowTestEnv;

  before(async () => {
    t = await startWorkflowTestEnv();
  });

  after(async () => {
    await t?.close();
  });

  async function run<T>(workflowType: string, args: unknown[], activities: object): Promise<T> {
    const taskQueue = `workflow-unit-${randomUUID()}`;
    const worker = await t.worker(taskQueue, activities);
    return worker.runUntil(t.env.client.workflow.execute(workflowType, { taskQueue, workflowId: `unit-${randomUUID()}`, args }) as Promise<T>);
  }

  it('a stream pass runs slices until one says done, adding their counts, and waits out an async page', async () => {
    const slices: SyncSliceInput[] = [];
    let n = 0;
    const result = await run<{ pages: number; records: number; inserted: number }>(
      'streamSyncWorkflow',
      [{ accountId: 'a', resource: 'customers', scope: '', path: '/customers', passKey: 'k', mode: 'full' }],
      {
        async syncSlice(input: SyncSliceInput): Promise<SyncSliceResult> {
          slices.push(input);
          n++;
          // The second slice ends on a page still produced upstream: the workflow sleeps, then asks again.
          return {
            ...zero,
            pages: 2,
            records: 10,
            inserted: 10,
            done: n === 4,
            generation: 1,
            ...(n === 2 ? { waitAsync: { id: 'r1', expiresAt: null } } : {}),
          };
        },
      },
    );
    assert.equal(slices.length, 4);
    assert.ok(
      slices.every((s) => s.asyncPages === true),
      'the workflow waits for async pages itself (durable timers)',
    );
    assert.deepEqual({ pages: result.pages, records: result.records, inserted: result.inserted }, { pages: 8, records: 40, inserted: 40 });
  });

  it('the children of a parent scope are synced in batches of parents, failures carried to the result', async () => {
    const batches: string[][] = [];
    const parents = Array.from({ length: 60 }, (_, i) => `inv${i + 1}`);
    const result = await run<{ streams: number; records: number; failed: { scope: string; error: string }[]; stalled?: { scope: string; reason: string }[] }>(
      'childStreamsWorkflow',
      [{ accountId: 'a', resource: 'ap-invoice-line-items', parentResource: 'ap-invoices', parentScope: '', passKey: 'k', mode: 'full' }],
      {
        async listParentIds(): Promise<string[]> {
          return parents;
        },
        async syncChildren(input: { parentIds: string[] }) {
          batches.push(input.parentIds);
          const failed = input.parentIds.includes('inv30') ? [{ scope: 'ap-invoices=inv30', error: 'upstream said 500' }] : [];
          const stalled = input.parentIds.includes('inv41') ? [{ scope: 'ap-invoices=inv41', reason: 'page timed out 3 times' }] : [];
          return { ...zero, records: input.parentIds.length * 3, failed, stalled };
        },
      },
    );
    // Batches run side by side (children-batches-side-by-side): their order of arrival is not fixed.
    assert.deepEqual(
      batches.map((b) => b.length).sort((a, b) => a - b),
      [10, 25, 25],
    );
    assert.deepEqual([...batches.flat()].sort(), [...parents].sort(), 'every parent once');
    assert.ok(
      batches.every((b) => b.every((id, i) => i === 0 || parents.indexOf(id) === parents.indexOf(b[i - 1]!) + 1)),
      'each batch a run of consecutive parents',
    );
    assert.equal(result.streams, 60);
    assert.equal(result.records, 180);
    assert.deepEqual(result.failed, [{ scope: 'ap-invoices=inv30', error: 'upstream said 500' }]);
    assert.deepEqual(result.stalled, [{ scope: 'ap-invoices=inv41', reason: 'page timed out 3 times' }]);
  });

  it('a stream pass that ends stalled says why', async () => {
    const result = await run<{ pages: number; stalled?: string }>(
      'streamSyncWorkflow',
      [{ accountId: 'a', resource: 'customers', scope: '', path: '/customers', passKey: 'k', mode: 'full' }],
      {
        async syncSlice(): Promise<SyncSliceResult> {
          return { ...zero, done: true, generation: 0, stalled: 'page timed out 3 times: customers page 2 got no answer' };
        },
      },
    );
    assert.equal(result.stalled, 'page timed out 3 times: customers page 2 got no answer');
  });
});
