// The application's reserve sized by its use: the rule (the application's mean use of its recent
// complete windows plus a margin, between a floor and a ceiling), the per-window counts it reads, and
// the in-memory governor following it; MIRROR_SYNC_BUDGET_SHARE set keeps the fixed cap.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { appUseSlots, backgroundShare, countAppUse, defaultReserveRule, emptyAppUse, recentAppUse, windowIndex } from '../../../connectors/governor/reserve.ts';
import { configSchema } from '../../../lib/config.ts';
import { runClasses } from './governor-fakes.ts';

const mean = (xs: number[]) => xs.reduce((a, b) => a + b, 0) / xs.length;
const close = (a: number, b: number) => Math.abs(a - b) < 1e-9;

describe('the application reserve rule', () => {
  it('is the mean use of the last complete windows plus the margin, between the floor and the ceiling', () => {
    const { floor, margin, ceiling, initial } = defaultReserveRule;
    assert.ok(close(backgroundShare([], 20), 1 - initial), 'nothing known yet: the initial reserve');
    assert.ok(close(backgroundShare([2, 2, 2, 2], 20), 1 - (0.1 + margin)), 'an application at 10%: 0.1 + the margin');
    assert.ok(close(backgroundShare([1, 3, 2, 2], 20), 1 - (0.1 + margin)), 'averaged over the windows');
    assert.ok(close(backgroundShare([20, 0, 0, 0, 0], 20), 1 - floor), 'only the last four windows count');
    assert.ok(close(backgroundShare([0, 0], 20), 1 - floor), 'an idle application: the floor');
    assert.ok(close(backgroundShare([20, 20, 20, 20], 20), 1 - ceiling), 'an application taking everything: the ceiling');
    assert.ok(close(backgroundShare([5, 5], 20, { ...defaultReserveRule, margin: 0.1 }), 1 - 0.35), 'the margin is the rule’s');
  });

  it('counts interactive requests per window in a ring, and reads the complete windows before now (none counted: 0)', () => {
    let use = emptyAppUse();
    for (const n of [100, 100, 101, 103, 103, 103]) use = countAppUse(use, n);
    assert.deepEqual(recentAppUse(use, 104, 4, 0), [2, 1, 0, 3]);
    assert.deepEqual(recentAppUse(use, 103, 4, 0), [0, 2, 1, 0], 'the current window is not complete');
    assert.deepEqual(recentAppUse(use, 104, 4, 102), [0, 3], 'windows before the budget was seen are not read');
    // A window a whole ring later takes the slot over.
    use = countAppUse(use, 100 + appUseSlots);
    assert.deepEqual(recentAppUse(use, 101 + appUseSlots, 1, 0), [1]);
    assert.deepEqual(recentAppUse(use, 105, 5, 0), [0, 1, 0, 3, 0], 'window 100 was overwritten');
    assert.equal(windowIndex(4_100, 2_000), 2);
  });

  it('is read from MIRROR_SYNC_BUDGET_SHARE: unset is the adaptive reserve, set is the fixed share', () => {
    assert.equal(configSchema.shape.MIRROR_SYNC_BUDGET_SHARE.parse(undefined), undefined);
    assert.equal(configSchema.shape.MIRROR_SYNC_BUDGET_SHARE.parse('0.5'), 0.5);
  });
});

describe('the governor with the adaptive reserve (20 per 2 s, a sync at the limit)', () => {
  it('gives background work what an application at 10% leaves (total >= 0.95), the application first: no 429, no refusal, no wait', async () => {
    const r = await runClasses({ share: 'adaptive', appEveryMs: 1_000 });
    assert.equal(r.rejected, 0, 'no 429 from the upstream');
    assert.equal(r.refused, 0, 'no application call refused');
    const spacing = 2_000 / 20;
    assert.ok(Math.max(...r.appWaits) <= spacing, `application waits up to ${Math.max(...r.appWaits)} ms`);
    const total = (mean(r.sync) + mean(r.app)) / 20;
    assert.ok(total >= 0.95, `total use ${total.toFixed(3)}: ${r.sync.join(' ')} + ${r.app.join(' ')}`);
  });

  it('follows the application: at 25% of the allowance the sync keeps to 1 - (0.25 + margin)', async () => {
    const r = await runClasses({ share: 'adaptive', appEveryMs: 400 });
    assert.equal(r.rejected, 0);
    assert.equal(r.refused, 0);
    assert.ok(mean(r.app) >= 4.9, `the application got ${r.app.join(' ')} per window`);
    const sync = mean(r.sync) / 20;
    const share = 1 - (0.25 + defaultReserveRule.margin);
    // Within a hundredth of the window: this upstream's windows begin with their first request, so a
    // window spans a little more than its length of the lane's even pace.
    assert.ok(sync <= share + 0.01 && sync >= share * 0.98 - 0.05, `the sync spent ${sync.toFixed(3)} of each window: ${r.sync.join(' ')}`);
  });

  it('keeps only the floor with no application', async () => {
    const r = await runClasses({ share: 'adaptive' });
    assert.equal(r.rejected, 0);
    const sync = mean(r.sync) / 20;
    assert.ok(sync >= (1 - defaultReserveRule.floor) * 0.98 - 0.05, `the sync spent ${sync.toFixed(3)} of each window: ${r.sync.join(' ')}`);
  });

  it('keeps only the floor with no application when its timers wake late (a loaded machine)', async () => {
    // One sync loop whose slots are each taken once due, late by up to 50 ms (half a spacing). Counted
    // from the late slot, the budget's own schedule (102 ms apart) held the sync to 16-17 a window of
    // the 18.6 its lane allows (0.81 of the window: what a fixed share of 0.8 gets).
    for (const share of ['adaptive', 0.95] as const) {
      const r = await runClasses({ share, lateMs: 50, workers: 1 });
      assert.equal(r.rejected, 0);
      const sync = mean(r.sync) / 20;
      assert.ok(sync >= (1 - defaultReserveRule.floor) * 0.98 - 0.05, `share ${share}: the sync spent ${sync.toFixed(3)} of each window: ${r.sync.join(' ')}`);
    }
  });

  it('keeps the hard cap with the share set, whatever the application leaves', async () => {
    const r = await runClasses({ share: 0.5, appEveryMs: 1_000 });
    assert.equal(r.rejected, 0);
    const sync = mean(r.sync) / 20;
    assert.ok(sync >= 0.45 && sync <= 0.5, `the sync spent ${sync.toFixed(3)} of each window: ${r.sync.join(' ')}`);
  });
});
