import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { GovernorKeys } from '../../../connectors/governor.ts';
import { MemoryRateGovernor } from '../../../connectors/governor/memory-governor.ts';
import type { RateLimitReport } from '../../../connectors/rate-limit-headers.ts';
import { FixedWindow, ManualClock, maxInAnyWindow, settle, SlidingWindow, testProfiles, type Hit } from './governor-fakes.ts';

interface Upstream {
  /** One request arriving now: its status and the headers it reports. */
  serve(now: number): { status: number; report: RateLimitReport };
}

interface Outcome {
  sent: number[];
  rejected: number[];
  maxConcurrent: number;
}

/** `workers` loops of acquire -> request (taking `latencyMs`) -> report -> release, for `durationMs`. */
async function simulate(options: {
  governor: MemoryRateGovernor;
  clock: ManualClock;
  keys: GovernorKeys;
  upstream: Upstream;
  workers: number;
  latencyMs: number;
  durationMs: number;
  /** Tell the governor when each reported request was sent (as the upstream client does). */
  reportSentAt?: boolean;
  /** Latency of the n-th request, when not constant. */
  latencyOf?: (n: number) => number;
}): Promise<Outcome> {
  const { governor, clock, keys, upstream } = options;
  const end = clock.now() + options.durationMs;
  const outcome: Outcome = { sent: [], rejected: [], maxConcurrent: 0 };
  let concurrent = 0;
  const loop = async () => {
    for (;;) {
      const release = await governor.acquire(keys);
      const at = clock.now();
      if (at >= end) {
        release();
        return;
      }
      concurrent++;
      outcome.maxConcurrent = Math.max(outcome.maxConcurrent, concurrent);
      outcome.sent.push(at);
      const { status, report } = upstream.serve(at);
      if (status === 429) outcome.rejected.push(at);
      await clock.sleep(options.latencyOf ? options.latencyOf(outcome.sent.length) : options.latencyMs);
      governor.report(keys, report, status, options.reportSentAt ? at : undefined);
      concurrent--;
      release();
    }
  };
  const loops = Array.from({ length: options.workers }, loop);
  await clock.runUntil(end);
  // Waiters hold slots past the end: let them come back and stop.
  await clock.runUntil(end + 3_600_000);
  await Promise.all(loops);
  return outcome;
}

function serviceOnly(window: FixedWindow | SlidingWindow): Upstream {
  return {
    serve(now) {
      const hit = window.hit(now);
      return { status: hit.status, report: { service: hit.window, sourceSystems: {} } };
    },
  };
}

/** Requests per window-length span, from the first send: the achieved rate of each window. */
function perWindow(sent: readonly number[], start: number, windowMs: number, windows: number): number[] {
  return Array.from({ length: windows }, (_, i) => sent.filter((t) => t >= start + i * windowMs && t < start + (i + 1) * windowMs).length);
}

const keys: GovernorKeys = { client: 'client-1', account: 'acct-1' };

// BuildPro publishes 60/min; SQL ERP serves one request at a time; DocVault four.
const profiles = testProfiles({
  buildpro: { name: 'BuildPro', concurrency: 10, requestsPerMinute: 60 },
  sqlerp: { name: 'SQL ERP', concurrency: 1 },
  docvault: { concurrency: 4 },
});

describe('MemoryRateGovernor pacing', () => {
  it('spends the service budget evenly (one every window/total), not in a burst, with no 429', async () => {
    const clock = new ManualClock();
    const start = clock.now();
    const governor = new MemoryRateGovernor({ profiles, clock, utilization: 0.98 });
    // The contract's service window reports no reset time.
    const outcome = await simulate({
      governor,
      clock,
      keys,
      upstream: serviceOnly(new FixedWindow(150, 60_000, false)),
      workers: 10,
      latencyMs: 120,
      durationMs: 300_000,
    });
    assert.deepEqual(outcome.rejected, []);
    const gaps = outcome.sent.slice(1).map((t, i) => t - outcome.sent[i]!);
    const spacing = 60_000 / (150 * 0.98);
    assert.ok(
      gaps.every((g) => Math.abs(g - spacing) < 1e-3),
      `uneven gaps: ${[...new Set(gaps.map((g) => g.toFixed(1)))].join(', ')}`,
    );
    for (const n of perWindow(outcome.sent, start, 60_000, 5)) assert.ok(n >= 0.95 * 150 && n <= 150, `per window: ${n}`);
    assert.ok(maxInAnyWindow(outcome.sent, 60_000) <= 150);
  });

  it('with a reset header, counts as unseen only the requests sent after the reported one (>= 0.95 of each window)', async () => {
    // Uneven latency (one slow request in three) keeps requests sent before the reported one in
    // flight when its report arrives: counting them as unseen (the upstream has counted them) would
    // spread the rest of the window too thinly.
    const run = async (reportSentAt: boolean) => {
      const clock = new ManualClock();
      const governor = new MemoryRateGovernor({ profiles, clock, serviceLimit: { total: 20, windowMs: 2_000 } });
      const window = new FixedWindow(20, 2_000);
      // Accepted requests per upstream window (named by its reset time).
      const accepted = new Map<number, number>();
      const upstream: Upstream = {
        serve(now) {
          const hit = window.hit(now);
          if (hit.status !== 429) accepted.set(hit.window.resetsAt!, (accepted.get(hit.window.resetsAt!) ?? 0) + 1);
          return { status: hit.status, report: { service: hit.window, sourceSystems: {} } };
        },
      };
      const outcome = await simulate({
        governor,
        clock,
        keys,
        upstream,
        workers: 6,
        latencyMs: 0,
        latencyOf: (n) => (n % 3 === 0 ? 600 : 50),
        durationMs: 40_000,
        reportSentAt,
      });
      // Steady state: past the first two windows, and not the last (cut short by the end).
      const counts = [...accepted.entries()]
        .sort((a, b) => a[0] - b[0])
        .map(([, n]) => n)
        .slice(2, -1);
      return { rejected: outcome.rejected, counts, mean: counts.reduce((a, b) => a + b, 0) / counts.length };
    };
    const precise = await run(true);
    assert.deepEqual(precise.rejected, []);
    assert.ok(precise.mean >= 0.95 * 20, `per window: ${precise.counts.join(' ')}`);
    const cautious = await run(false);
    assert.deepEqual(cautious.rejected, []);
    assert.ok(cautious.mean < precise.mean, `without send times the governor is more cautious: ${cautious.mean} vs ${precise.mean}`);
  });

  it('keeps a sliding window (no reset header) within its total at 0.98 of it', async () => {
    const clock = new ManualClock();
    const start = clock.now();
    const governor = new MemoryRateGovernor({ profiles, clock, serviceLimit: { total: 20, windowMs: 1_000 } });
    const outcome = await simulate({
      governor,
      clock,
      keys,
      upstream: serviceOnly(new SlidingWindow(20, 1_000)),
      workers: 4,
      latencyMs: 30,
      durationMs: 20_000,
    });
    assert.deepEqual(outcome.rejected, []);
    const counts = perWindow(outcome.sent, start, 1_000, 20);
    assert.ok(
      counts.every((n) => n >= 19 && n <= 20),
      counts.join(' '),
    );
    assert.ok(maxInAnyWindow(outcome.sent, 1_000) <= 20);
  });

  it('learns the real total from the headers when the first guess was too high', async () => {
    const clock = new ManualClock();
    const start = clock.now();
    const governor = new MemoryRateGovernor({ profiles, clock });
    // Guess 150/min; the upstream allows 60 and reports it (with its reset time).
    const outcome = await simulate({
      governor,
      clock,
      keys,
      upstream: serviceOnly(new FixedWindow(60, 60_000)),
      workers: 10,
      latencyMs: 100,
      durationMs: 240_000,
    });
    assert.deepEqual(outcome.rejected, []);
    const counts = perWindow(outcome.sent, start, 60_000, 4).slice(1);
    assert.ok(
      counts.every((n) => n >= 57 && n <= 60),
      counts.join(' '),
    );
  });

  it('with a source-system window too, a request waits for the later of the two', async () => {
    const clock = new ManualClock();
    const start = clock.now();
    const governor = new MemoryRateGovernor({ profiles, clock });
    const service = new FixedWindow(150, 60_000, false);
    const source = new FixedWindow(60, 60_000);
    const upstream: Upstream = {
      serve(now) {
        const a = service.hit(now);
        const b = source.hit(now);
        return { status: Math.max(a.status, b.status), report: { service: a.window, sourceSystems: { buildpro: b.window } } };
      },
    };
    const k = { ...keys, sourceSystem: 'buildpro' };
    const outcome = await simulate({ governor, clock, keys: k, upstream, workers: 10, latencyMs: 100, durationMs: 300_000 });
    assert.deepEqual(outcome.rejected, []);
    const counts = perWindow(outcome.sent, start, 60_000, 5);
    assert.ok(
      counts.every((n) => n >= 57 && n <= 60),
      counts.join(' '),
    );
    // Both schedules advanced by the same slots.
    const [svc, src] = governor.budgets(k);
    assert.equal(svc!.spec.kind, 'service');
    assert.equal(src!.spec.kind, 'source-system');
    assert.ok(Math.abs(governor.schedule(src!.spec.key)!.spacingMs - 60_000 / (60 * 0.98)) < 1e-6);
  });

  it('spreads what others leave of a shared source-system budget until its reset, without 429s after the first window', async () => {
    const clock = new ManualClock();
    const start = clock.now();
    const governor = new MemoryRateGovernor({ profiles, clock });
    const source = new FixedWindow(60, 60_000);
    // Another client of the same account spends 20 at the start of every window of the source system.
    let lastBurst = Number.NEGATIVE_INFINITY;
    const upstream: Upstream = {
      serve(now) {
        if (now - lastBurst >= 60_000) {
          lastBurst = now;
          for (let i = 0; i < 20; i++) source.hit(now);
        }
        const hit: Hit = source.hit(now);
        return { status: hit.status, report: { sourceSystems: { BuildPro: hit.window } } };
      },
    };
    const k = { ...keys, sourceSystem: 'buildpro' };
    const outcome = await simulate({ governor, clock, keys: k, upstream, workers: 10, latencyMs: 100, durationMs: 600_000 });
    assert.deepEqual(
      outcome.rejected.filter((t) => t >= start + 60_000),
      [],
      `429s at ${outcome.rejected.map((t) => t - start).join(', ')}`,
    );
    const counts = perWindow(outcome.sent, start, 60_000, 10).slice(1);
    assert.ok(
      counts.every((n) => n >= 36 && n <= 40),
      `ours per window (40 left by the other client): ${counts.join(' ')}`,
    );
    // Spread, not burst: no two of ours closer than the full-window spacing.
    const gaps = outcome.sent.slice(1).map((t, i) => t - outcome.sent[i]!);
    assert.ok(Math.min(...gaps) >= 60_000 / (60 * 0.98) - 1e-6);
  });
});

describe('MemoryRateGovernor after a 429', () => {
  it('sends nothing until the reported reset, then resumes at the even pace', async () => {
    const clock = new ManualClock();
    const t0 = clock.now();
    const governor = new MemoryRateGovernor({ profiles, clock, resetSlackMs: 0, utilization: 1 });
    const k = { ...keys, sourceSystem: 'buildpro' };
    const release = await governor.acquire(k);
    governor.report(k, { service: { total: 150, remaining: 100 }, sourceSystems: { buildpro: { total: 60, remaining: 0, resetsAt: t0 + 30_000 } } }, 429);
    release();
    const times: number[] = [];
    const waiters = [0, 1, 2].map(async () => {
      const r = await governor.acquire(k);
      times.push(clock.now());
      r();
    });
    await clock.runUntil(t0 + 29_999);
    assert.deepEqual(times, []);
    await clock.runUntil(t0 + 40_000);
    await Promise.all(waiters);
    assert.deepEqual(times, [t0 + 30_000, t0 + 31_000, t0 + 32_000], 'the source system paces at 60/min after the reset');
  });

  it('without a reset header, waits a whole window', async () => {
    const clock = new ManualClock();
    const t0 = clock.now();
    const governor = new MemoryRateGovernor({ profiles, clock, resetSlackMs: 0 });
    (await governor.acquire(keys))();
    governor.report(keys, { sourceSystems: {} }, 429);
    let at: number | undefined;
    const waiter = governor.acquire(keys).then((r) => {
      at = clock.now();
      r();
    });
    await clock.runUntil(t0 + 120_000);
    await waiter;
    assert.equal(at, t0 + 60_000);
  });

  it('blocks only the window that says it is spent', async () => {
    const clock = new ManualClock();
    const t0 = clock.now();
    const governor = new MemoryRateGovernor({ profiles, clock, resetSlackMs: 0 });
    const k = { ...keys, sourceSystem: 'buildpro' };
    (await governor.acquire(k))();
    governor.report(k, { service: { total: 150, remaining: 0, resetsAt: t0 + 45_000 }, sourceSystems: { buildpro: { total: 60, remaining: 30 } } }, 429);
    const [svc, src] = governor.budgets(k);
    assert.equal(governor.schedule(svc!.spec.key)!.blockedUntil, t0 + 45_000);
    assert.equal(governor.schedule(src!.spec.key)!.blockedUntil, undefined);
  });
});

describe('MemoryRateGovernor concurrency caps', () => {
  it('serves a serial source system (profile concurrency 1) one request at a time', async () => {
    const clock = new ManualClock();
    const governor = new MemoryRateGovernor({ profiles, clock });
    const unlimited: Upstream = { serve: () => ({ status: 200, report: { sourceSystems: {} } }) };
    const outcome = await simulate({
      governor,
      clock,
      keys: { ...keys, sourceSystem: 'sqlerp' },
      upstream: unlimited,
      workers: 6,
      latencyMs: 2_000,
      durationMs: 20_000,
    });
    assert.equal(outcome.maxConcurrent, 1);
    assert.ok(outcome.sent.length >= 9, String(outcome.sent.length));
  });

  it('caps a linked account at 10 concurrent requests, and a profile at its own concurrency', async () => {
    const unlimited: Upstream = { serve: () => ({ status: 200, report: { sourceSystems: {} } }) };
    const clock = new ManualClock();
    const noPacing = { profiles, clock, serviceLimit: { total: 1_000_000 } };
    const account = await simulate({
      governor: new MemoryRateGovernor(noPacing),
      clock,
      keys: { ...keys, sourceSystem: 'unknown-erp' },
      upstream: unlimited,
      workers: 30,
      latencyMs: 500,
      durationMs: 10_000,
    });
    assert.equal(account.maxConcurrent, 10);
    const docvault = await simulate({
      governor: new MemoryRateGovernor(noPacing),
      clock,
      keys: { ...keys, sourceSystem: 'docvault' },
      upstream: unlimited,
      workers: 30,
      latencyMs: 5_000,
      durationMs: 30_000,
    });
    assert.equal(docvault.maxConcurrent, 4);
    const perProcess = await simulate({
      governor: new MemoryRateGovernor({ ...noPacing, accountConcurrency: 3 }),
      clock,
      keys,
      upstream: unlimited,
      workers: 30,
      latencyMs: 500,
      durationMs: 10_000,
    });
    assert.equal(perProcess.maxConcurrent, 3);
  });

  it('an aborted waiter gives its place back', async () => {
    const clock = new ManualClock();
    const governor = new MemoryRateGovernor({ profiles, clock, serviceLimit: { total: 1_000_000 } });
    const k = { ...keys, sourceSystem: 'sqlerp' };
    const first = await governor.acquire(k);
    const controller = new AbortController();
    const aborted = governor.acquire(k, controller.signal);
    let thirdGot = false;
    const third = governor.acquire(k).then((r) => {
      thirdGot = true;
      return r;
    });
    await settle();
    controller.abort(new Error('cancelled'));
    await assert.rejects(aborted, /cancelled/);
    assert.equal(thirdGot, false);
    first();
    await clock.runUntil(clock.now() + 1_000);
    assert.equal(thirdGot, true);
    (await third)();
  });
});
