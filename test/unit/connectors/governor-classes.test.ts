// The governor's two classes of request: background work (the sync) spends at most its
// share of each window; interactive requests (an application's forwarded calls) go first, may use the
// rest, wait at most about one spacing for their slot, and are refused at once (with what the governor
// knows of the windows) rather than held longer than the bound. On a manual clock, against a fixed
// window that resets at the time it reports.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { GovernorKeys } from '../../../connectors/governor.ts';
import { MemoryRateGovernor } from '../../../connectors/governor/memory-governor.ts';
import { ManualClock, runClasses as run, settle, testProfiles } from './governor-fakes.ts';

const profiles = testProfiles({});
const background: GovernorKeys = { client: 'client-1', account: 'acct-1', priority: 'background' };
const interactive: GovernorKeys = { client: 'client-1', account: 'acct-1', priority: 'interactive' };

const mean = (xs: number[]) => xs.reduce((a, b) => a + b, 0) / xs.length;
const p99 = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.min(xs.length - 1, Math.floor(xs.length * 0.99))]!;

describe('governor classes: background share, interactive first', () => {
  it('keeps background work to its share of each window (0.5: 0.5 +- 0.05 of it), with no 429', async () => {
    const r = await run({ share: 0.5 });
    assert.equal(r.rejected, 0);
    const share = mean(r.sync) / 20;
    assert.ok(share >= 0.45 && share <= 0.5, `background spent ${share.toFixed(3)} of each window: ${r.sync.join(' ')}`);
  });

  it('with share 1, background work takes whole windows as before', async () => {
    const r = await run({ share: 1 });
    assert.equal(r.rejected, 0);
    assert.ok(mean(r.sync) >= 0.95 * 20, `per window: ${r.sync.join(' ')}`);
  });

  it('serves an application at 10% of the allowance beside a sync at the limit: no refusal, no 429, no wait behind the sync', async () => {
    // 20 per 2 s: 10% is one request every second.
    const r = await run({ share: 0.8, appEveryMs: 1_000 });
    assert.equal(r.rejected, 0, 'no 429 from the upstream');
    assert.equal(r.refused, 0, 'no application call refused');
    // An application's call comes right behind the sync's last request (an early slot), not a spacing
    // (102 ms) later.
    const spacing = 2_000 / (20 * 0.98);
    assert.ok(p99(r.appWaits) < spacing / 2, `application waits p99 ${p99(r.appWaits)} ms, one spacing ${spacing.toFixed(1)} ms`);
    // The whole share (0.8 x 0.98 of 20: 15.7) though the application's slots delay the sync's: the lane banks
    // one spacing.
    const sync = mean(r.sync) / 20;
    assert.ok(sync >= 0.76 && sync <= 0.8, `the sync spent ${sync.toFixed(3)} of each window: ${r.sync.join(' ')}`);
    assert.ok(mean(r.app) >= 1.9, `the application got ${r.app.join(' ')} per window`);
  });

  it('with share 1, an application beside a sync at the limit gets no early slot, and no 429', async () => {
    const r = await run({ share: 1, appEveryMs: 1_000 });
    assert.equal(r.rejected, 0, 'no 429 from the upstream');
    assert.ok(mean(r.sync) + mean(r.app) >= 19.5, `per window: ${r.sync.join(' ')} + ${r.app.join(' ')}`);
  });

  it('refuses an interactive request at once when its slot is beyond the bound, with the windows as known', async () => {
    const clock = new ManualClock();
    const governor = new MemoryRateGovernor({ profiles, clock, serviceLimit: { total: 20, windowMs: 60_000 }, syncShare: 0.8, interactiveMaxWaitMs: 2_000 });
    const release = await governor.acquire(interactive);
    const resetsAt = clock.now() + 30_000;
    governor.report(interactive, { service: { total: 20, remaining: 0, resetsAt }, sourceSystems: {} }, 429, clock.now());
    release();
    const before = clock.now();
    const outcome = governor.acquire(interactive).then(
      () => 'granted',
      (error: unknown) => error,
    );
    await settle();
    await clock.runUntil(before + 2_500);
    const error = (await Promise.race([outcome, Promise.resolve('still waiting')])) as
      { code?: string; waitMs?: number; windows?: { name: string; total?: number; remaining?: number; resetsAt?: number }[] } | string;
    assert.ok(typeof error === 'object', `expected a refusal, got: ${typeof error === 'string' ? error : 'an object'}`);
    assert.equal(error.code, 'rate_limited');
    assert.ok(error.waitMs! > 2_000);
    assert.deepEqual(error.windows, [{ name: 'service', total: 20, remaining: 0, resetsAt }]);
    // A background request is held instead (the sync waits for the window).
    let granted = false;
    void governor.acquire(background).then((r) => {
      granted = true;
      r();
    });
    await clock.runUntil(before + 10_000);
    assert.equal(granted, false);
    await clock.runUntil(resetsAt + 5_000);
    assert.equal(granted, true);
  });

  it('lets an interactive request ahead of background ones waiting for the account concurrency cap', async () => {
    const clock = new ManualClock();
    const governor = new MemoryRateGovernor({ profiles, clock, assumeLimits: false, accountConcurrency: 1 });
    const order: string[] = [];
    const first = await governor.acquire(background);
    const waiting = [
      governor.acquire(background).then((r) => (order.push('background'), r())),
      governor.acquire(background).then((r) => (order.push('background'), r())),
      governor.acquire(interactive).then((r) => (order.push('interactive'), r())),
    ];
    await settle();
    first();
    await Promise.all(waiting);
    assert.deepEqual(order, ['interactive', 'background', 'background']);
  });
});
