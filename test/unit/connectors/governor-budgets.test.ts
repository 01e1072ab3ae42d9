import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { planFor, resolveOptions, sourceSystemWindow } from '../../../connectors/governor/budgets.ts';
import { testProfiles } from './governor-fakes.ts';

const options = resolveOptions({
  profiles: testProfiles({ sqlerp: { name: 'SQL ERP', concurrency: 1, requestsPerMinute: 300 }, buildpro: { name: 'BuildPro', concurrency: 10 } }),
});

describe('planFor', () => {
  it('spends the service budget per client and account, and the source system per account', () => {
    const plan = planFor({ client: 'c1', account: 'a1', sourceSystem: 'sqlerp' }, options);
    assert.equal(plan.service.key, 'svc:c1:a1');
    assert.deepEqual(plan.service.initial, { windowMs: 60_000, total: 150 });
    assert.equal(plan.sourceSystem?.key, 'source:a1:sqlerp');
    // A source system's window length is a guess ("typically 60 s") until its headers say.
    assert.deepEqual(plan.sourceSystem?.initial, { windowMs: 60_000, total: 300, lengthGuessed: true });
    // The narrower cap first: the serial source system, then the account's 10.
    assert.deepEqual(plan.caps, [
      { key: 'concurrency:source:a1:sqlerp', limit: 1 },
      { key: 'concurrency:account:a1', limit: 10 },
    ]);
  });
  it('names the service budget by the header prefix; link calls (no account) only spend the client', () => {
    const plan = planFor({ client: 'c1' }, resolveOptions({ headerPrefix: 'Agave' }));
    assert.equal(plan.service.key, 'agave:c1:');
    assert.equal(plan.sourceSystem, undefined);
    assert.deepEqual(plan.caps, []);
  });
  it('an unknown source system has no first guess and no cap of its own unless configured', () => {
    const plan = planFor({ client: 'c1', account: 'a1', sourceSystem: 'mystery' }, options);
    assert.deepEqual(plan.sourceSystem?.initial, { windowMs: 60_000, lengthGuessed: true });
    assert.deepEqual(
      plan.caps.map((c) => c.key),
      ['concurrency:account:a1'],
    );
    const capped = planFor({ client: 'c1', account: 'a1', sourceSystem: 'mystery' }, resolveOptions({ sourceSystemConcurrency: 2 }));
    assert.deepEqual(capped.caps[0], { key: 'concurrency:source:a1:mystery', limit: 2 });
  });
});

describe('sourceSystemWindow', () => {
  const window = { total: 60, remaining: 10 };
  it('finds the header named like the slug or the profile name, else the only one', () => {
    const plan = planFor({ client: 'c1', account: 'a1', sourceSystem: 'sqlerp' }, options);
    assert.equal(sourceSystemWindow(plan, { sourceSystems: { 'sql-erp': window, other: { total: 1, remaining: 1 } } }), window);
    assert.equal(sourceSystemWindow(plan, { sourceSystems: { sqlerp: window } }), window);
    assert.equal(sourceSystemWindow(plan, { sourceSystems: { erp: window } }), window, 'the only one reported');
    assert.equal(sourceSystemWindow(plan, { sourceSystems: { a: window, b: window } }), undefined);
    assert.equal(sourceSystemWindow(planFor({ client: 'c1' }, options), { sourceSystems: { sqlerp: window } }), undefined);
  });
});
