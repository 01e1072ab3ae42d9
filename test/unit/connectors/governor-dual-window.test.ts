// A source system with two limits at once (a cloud construction PM system with an hourly
// and a 10-second limit) whose headers report whichever window is nearer to running out: the
// governor learns limits only from headers, so the window it paces by switches under it. On a manual
// clock, scaled down: 10 per 1 s and 40 per 10 s.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { GovernorKeys } from '../../../connectors/governor.ts';
import { MemoryRateGovernor } from '../../../connectors/governor/memory-governor.ts';
import type { RateLimitWindow } from '../../../connectors/rate-limit-headers.ts';
import { ManualClock, testProfiles } from './governor-fakes.ts';

/** Fixed windows that all count every request; the answer reports the one with the fewest left. */
class DualWindow {
  private readonly state: { start: number | undefined; count: number }[];
  constructor(
    readonly windows: readonly { total: number; windowMs: number }[],
    private readonly wholeSeconds: boolean,
  ) {
    this.state = windows.map(() => ({ start: undefined, count: 0 }));
  }

  hit(now: number): { status: number; window: RateLimitWindow; which: number; starts: number[] } {
    const views = this.windows.map((w, i) => {
      const s = this.state[i]!;
      if (s.start === undefined || now >= s.start + w.windowMs) {
        s.start = now;
        s.count = 0;
      }
      return { i, w, s };
    });
    const refused = views.some(({ w, s }) => s.count >= w.total);
    if (!refused) for (const { s } of views) s.count++;
    // Nearer to running out: the fewest left; of two as near, the one that resets later (it keeps the
    // client out longer).
    const left = (v: (typeof views)[number]) => v.w.total - v.s.count;
    const resetOf = (v: (typeof views)[number]) => v.s.start! + v.w.windowMs;
    const reported = views.reduce((a, b) => (left(b) < left(a) || (left(b) === left(a) && resetOf(b) > resetOf(a)) ? b : a));
    const reset = resetOf(reported);
    return {
      status: refused ? 429 : 200,
      which: reported.i,
      starts: views.map((v) => v.s.start!),
      window: {
        total: reported.w.total,
        remaining: Math.max(0, reported.w.total - reported.s.count),
        resetsAt: this.wholeSeconds ? Math.ceil(reset / 1000) * 1000 : reset,
      },
    };
  }
}

async function run(o: { share: number; wholeSeconds: boolean; appEveryMs?: number; durationMs?: number }) {
  const clock = new ManualClock(1_700_000_000_000 + 300);
  const governor = new MemoryRateGovernor({
    profiles: testProfiles({ pm: { concurrency: 100 } }),
    clock,
    serviceLimit: { total: 100_000, windowMs: 60_000 },
    syncShare: o.share,
  });
  const background: GovernorKeys = { client: 'c', account: 'a', sourceSystem: 'pm', priority: 'background' };
  const interactive: GovernorKeys = { ...background, priority: 'interactive' };
  const upstream = new DualWindow(
    [
      { total: 10, windowMs: 1_000 },
      { total: 40, windowMs: 10_000 },
    ],
    o.wholeSeconds,
  );
  const begin = clock.now();
  const end = begin + (o.durationMs ?? 60_000);
  const rejected: number[] = [];
  const switches: string[] = [];
  let last = -1;
  const sent: { at: number; app: boolean; longStart: number }[] = [];
  const refused: number[] = [];
  const send = async (keys: GovernorKeys, release: () => void) => {
    const at = clock.now();
    const hit = upstream.hit(at);
    if (hit.status === 429) rejected.push(at - begin);
    else sent.push({ at: at - begin, app: keys.priority === 'interactive', longStart: hit.starts[1]! });
    if (hit.which !== last) switches.push(`${Math.round(at - begin)}:${hit.which === 0 ? 'short' : 'long'}`);
    last = hit.which;
    await clock.sleep(40);
    governor.report(keys, { sourceSystems: { pm: hit.window } }, hit.status, at);
    release();
  };
  const loop = async () => {
    for (;;) {
      const release = await governor.acquire(background);
      if (clock.now() >= end) return release();
      await send(background, release);
    }
  };
  const app = async () => {
    if (!o.appEveryMs) return;
    for (let t = begin + 500; t < end; t += o.appEveryMs) {
      await clock.sleep(t - clock.now());
      try {
        const release = await governor.acquire(interactive);
        await send(interactive, release);
      } catch {
        refused.push(t - begin);
      }
    }
  };
  const all = Promise.all([loop(), loop(), loop(), loop(), app()]);
  await clock.runUntil(end + 600_000);
  await all;
  const longWindows = new Map<number, number>();
  for (const s of sent) longWindows.set(s.longStart, (longWindows.get(s.longStart) ?? 0) + 1);
  return { rejected, switches, sent, refused, perLong: [...longWindows.values()] };
}

describe('a source system with two windows, the nearer reported', () => {
  for (const wholeSeconds of [false, true]) {
    for (const share of [1, 0.8]) {
      // With a share, an application beside the sync: 10% and 7% of the long window. With exact
      // resets one of its calls a long window met a 429 at the window's very end: the long window
      // was reported spent while the budget's schedule already reached past its reset, so no block
      // was set, and the call took its early slot a spacing before the schedule's next, the spacing
      // just shortened to the short window's (25 ms): 5 ms before the reset.
      for (const appEveryMs of share < 1 ? [2_500, 3_700] : [undefined]) {
        const app = appEveryMs ? `, an application call every ${appEveryMs} ms` : '';
        it(`no 429 after the first long window (share ${share}, resets ${wholeSeconds ? 'in whole seconds' : 'exact'}${app})`, async () => {
          const r = await run({ share, wholeSeconds, ...(appEveryMs ? { appEveryMs } : {}) });
          const what = `429s at ${r.rejected.map(Math.round).join(', ')}; reported window switched at ${r.switches.join(' ')}; accepted per long window ${r.perLong.join(' ')}`;
          assert.deepEqual(
            r.rejected.filter((t) => t >= 10_000),
            [],
            what,
          );
          // The long window is the binding one: used, not starved, by pacing to whichever is reported.
          assert.ok(
            r.perLong.slice(1, -1).every((n) => n >= 36 && n <= 40),
            what,
          );
          assert.deepEqual(r.refused, [], `application calls refused at ${r.refused.join(', ')}`);
        });
      }
    }
  }
});
