// The pure stages of applying the webhook inbox: a batch of events classified (coalesced by object,
// what needs no fetch settled with the reason), and the upstream's answers grouped by stream (a 404
// makes an object gone, a DELETE event for an object still there is written as an update, a failed
// fetch leaves its events pending). The fetch and the writes are the integration tests' business
// (test/integration/events.test.ts).
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { knownProfile } from '../../../connectors/source-systems/index.ts';
import type { PendingEvent } from '../../../mirror/streams/inbox.ts';
import { Outcomes, classifyEvents, groupByStream } from '../../../activities/inbox-stages.ts';

const buildpro = knownProfile('buildpro')!;
const sqlerp = knownProfile('sqlerp')!;
const uuid = (n: number) => `00000000-0000-4000-8000-${String(n).padStart(12, '0')}`;
let nextId = 1;
const ev = (event: string, type: string, target: string, projectId: string | null = null): PendingEvent => ({ id: nextId++, event, type, target, projectId });

describe('classifying a batch of inbox events', () => {
  it('fetches each object once, whatever number of events named it, in its stream and at its path', () => {
    const outcomes = new Outcomes();
    const events = [ev('CREATE', 'drawing', uuid(1), 'p1'), ev('UPDATE', 'vendor', uuid(2)), ev('UPDATE', 'drawing', uuid(1), 'p1')];
    const c = classifyEvents(events, 'acc', buildpro, outcomes);
    assert.deepEqual(
      c.objects.map((o) => ({ ...o, events: o.events.map((e) => e.id) })),
      [
        {
          key: { accountId: 'acc', resource: 'drawings', scope: 'project=p1' },
          target: uuid(1),
          events: [events[0]!.id, events[2]!.id],
          projectId: 'p1',
          path: `/drawings/${uuid(1)}`,
        },
        { key: { accountId: 'acc', resource: 'vendors', scope: '' }, target: uuid(2), events: [events[1]!.id], path: `/vendors/${uuid(2)}` },
      ],
    );
    assert.equal(c.skipped, 0);
    assert.deepEqual(outcomes.entries(), [], 'nothing settled before it is written');
  });

  it('the same object in two projects is two objects', () => {
    const c = classifyEvents([ev('UPDATE', 'drawing', uuid(1), 'p1'), ev('UPDATE', 'drawing', uuid(1), 'p2')], 'acc', buildpro, new Outcomes());
    assert.deepEqual(
      c.objects.map((o) => o.key.scope),
      ['project=p1', 'project=p2'],
    );
  });

  it('settles without a fetch what is not mirrored, not an object id or has no project, and asks for a pass on `<type>:*`', () => {
    const outcomes = new Outcomes();
    const unknown = ev('UPDATE', 'widget', uuid(3));
    const child = ev('UPDATE', 'drawing-version', uuid(4), 'p1');
    const notAnId = ev('UPDATE', 'vendor', 'vendor-17');
    const noProject = ev('UPDATE', 'drawing', uuid(5));
    const all = ev('UPDATE', 'vendor', 'vendor:*');
    const c = classifyEvents([unknown, child, notAnId, noProject, all], 'acc', buildpro, outcomes);
    assert.deepEqual(c.objects, []);
    assert.equal(c.skipped, 4);
    assert.deepEqual(c.fullPassTypes, ['vendors']);
    assert.deepEqual(outcomes.entries(), [
      ['skipped: not mirrored', [unknown.id, child.id]],
      ['skipped: target is not an object id', [notAnId.id]],
      ['skipped: no project', [noProject.id]],
      ['pass requested', [all.id]],
    ]);
  });

  it("takes the resource's scope from the account's source system, not the catalog", () => {
    // sqlerp lists cost codes per account, the catalog per project: no project is needed.
    const c = classifyEvents([ev('UPDATE', 'cost-code', uuid(6))], 'acc', sqlerp, new Outcomes());
    assert.deepEqual(c.objects[0]!.key, { accountId: 'acc', resource: 'cost-codes', scope: '' });
    assert.equal(c.objects[0]!.projectId, undefined);
  });
});

describe("grouping the upstream's answers by stream", () => {
  const outcomes = new Outcomes();
  const objects = classifyEvents(
    [
      ev('UPDATE', 'vendor', uuid(1)),
      ev('DELETE', 'vendor', uuid(2)),
      ev('DELETE', 'vendor', uuid(3)),
      ev('UPDATE', 'drawing', uuid(4), 'p1'),
      ev('UPDATE', 'vendor', uuid(5)),
    ],
    'acc',
    buildpro,
    outcomes,
  ).objects;

  it('writes what the upstream returned, marks gone what it answered 404 for, and a DELETE of an object still there is an update', () => {
    const fetched: PromiseSettledResult<Record<string, unknown> | undefined>[] = [
      { status: 'fulfilled', value: { id: uuid(1) } },
      { status: 'fulfilled', value: { id: uuid(2) } },
      { status: 'fulfilled', value: undefined },
      { status: 'fulfilled', value: { id: uuid(4) } },
      { status: 'fulfilled', value: { id: uuid(5) } },
    ];
    const { streams, failure } = groupByStream(objects, fetched);
    assert.equal(failure, undefined);
    assert.deepEqual(
      streams.map((s) => s.key.resource + ' ' + s.key.scope),
      ['vendors ', 'drawings project=p1'],
    );
    const [vendors, drawings] = streams;
    assert.deepEqual(
      vendors!.items.map((i) => i.id),
      [uuid(1), uuid(2), uuid(5)],
    );
    assert.deepEqual(
      vendors!.upserted.map((e) => e.target),
      [uuid(1), uuid(5)],
    );
    assert.deepEqual(
      vendors!.refused.map((e) => e.target),
      [uuid(2)],
      'a DELETE the upstream disproves',
    );
    assert.deepEqual(vendors!.gone, [uuid(3)]);
    assert.deepEqual(
      vendors!.deleted.map((e) => e.target),
      [uuid(3)],
    );
    assert.deepEqual(drawings!.gone, []);
  });

  it('keeps out of every stream the objects whose fetch failed, and returns the first failure', () => {
    const first = new Error('the upstream said 503');
    const fetched: PromiseSettledResult<Record<string, unknown> | undefined>[] = [
      { status: 'fulfilled', value: { id: uuid(1) } },
      { status: 'rejected', reason: first },
      { status: 'rejected', reason: new Error('later') },
      { status: 'fulfilled', value: { id: uuid(4) } },
      { status: 'fulfilled', value: undefined },
    ];
    const { streams, failure } = groupByStream(objects, fetched);
    assert.equal(failure, first);
    const targets = streams.flatMap((s) => [...s.upserted, ...s.refused, ...s.deleted].map((e) => e.target));
    assert.deepEqual(targets.sort(), [uuid(1), uuid(4), uuid(5)].sort());
  });
});
