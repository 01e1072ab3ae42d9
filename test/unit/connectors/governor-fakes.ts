// Test doubles for the governor: a manual clock, and an upstream's rate-limit counters (a fixed window
// that resets at a reported time, or a sliding window), each reporting what the headers would; and a
// simulated sync beside an application on them (runClasses).
import type { GovernorKeys } from '../../../connectors/governor.ts';
import type { Clock } from '../../../connectors/governor/budgets.ts';
import { MemoryRateGovernor } from '../../../connectors/governor/memory-governor.ts';
import { abortReason } from '../../../connectors/governor/semaphore.ts';
import type { RateLimitWindow } from '../../../connectors/rate-limit-headers.ts';
import { sourceSystemProfileSchema, type SourceSystemProfile } from '../../../connectors/source-systems/profile.ts';

interface Timer {
  at: number;
  resolve(): void;
  reject(reason: unknown): void;
}

/** Time moves only when the test advances it; sleepers wake in order. */
export class ManualClock implements Clock {
  private readonly timers: Timer[] = [];
  constructor(public t = 1_700_000_000_000) {}

  now(): number {
    return this.t;
  }

  sleep(ms: number, signal?: AbortSignal): Promise<void> {
    return new Promise((resolve, reject) => {
      const timer: Timer = { at: this.t + Math.max(0, ms), resolve, reject };
      if (signal) {
        if (signal.aborted) return reject(abortReason(signal));
        signal.addEventListener(
          'abort',
          () => {
            this.timers.splice(this.timers.indexOf(timer), 1);
            reject(abortReason(signal));
          },
          { once: true },
        );
      }
      this.timers.push(timer);
    });
  }

  /** Runs every timer due until `end`, letting promise chains settle between them. */
  async runUntil(end: number): Promise<void> {
    for (;;) {
      await settle();
      this.timers.sort((a, b) => a.at - b.at);
      const next = this.timers[0];
      if (!next || next.at > end) break;
      this.t = Math.max(this.t, next.at);
      while (this.timers[0] && this.timers[0].at <= this.t) this.timers.shift()!.resolve();
    }
    this.t = Math.max(this.t, end);
    await settle();
  }
}

export async function settle(): Promise<void> {
  for (let i = 0; i < 5; i++) await new Promise((resolve) => setImmediate(resolve));
}

export interface Hit {
  status: number;
  window: RateLimitWindow;
}

/** A window that starts with the first request after the last reset and resets `windowMs` later. */
export class FixedWindow {
  private start: number | undefined;
  private count = 0;
  constructor(
    readonly total: number,
    readonly windowMs: number,
    private readonly reportReset = true,
    /** Resets are reported rounded up to whole seconds, as epoch-second headers do. */
    private readonly wholeSeconds = false,
  ) {}

  hit(now: number): Hit {
    if (this.start === undefined || now >= this.start + this.windowMs) {
      this.start = now;
      this.count = 0;
    }
    this.count++;
    const window: RateLimitWindow = { total: this.total, remaining: Math.max(0, this.total - this.count) };
    if (this.reportReset) window.resetsAt = this.wholeSeconds ? Math.ceil((this.start + this.windowMs) / 1000) * 1000 : this.start + this.windowMs;
    return { status: this.count > this.total ? 429 : 200, window };
  }
}

/** Counts the requests of the last `windowMs`; reports no reset (it has none). */
export class SlidingWindow {
  readonly times: number[] = [];
  constructor(
    readonly total: number,
    readonly windowMs: number,
  ) {}

  hit(now: number): Hit {
    while (this.times.length > 0 && this.times[0]! <= now - this.windowMs) this.times.shift();
    const ok = this.times.length < this.total;
    if (ok) this.times.push(now);
    return { status: ok ? 200 : 429, window: { total: this.total, remaining: this.total - this.times.length } };
  }
}

/** The most requests in any span of `windowMs` (half-open) among sorted send times. */
export function maxInAnyWindow(times: readonly number[], windowMs: number): number {
  let max = 0;
  let first = 0;
  for (let i = 0; i < times.length; i++) {
    while (times[i]! - times[first]! >= windowMs) first++;
    max = Math.max(max, i - first + 1);
  }
  return max;
}

/** A profiles lookup of the test's own, so tests do not depend on the real profiles' figures. */
export function testProfiles(
  list: Record<string, { concurrency: number; requestsPerMinute?: number; name?: string }>,
): (slug: string) => SourceSystemProfile | undefined {
  const bySlug = new Map(
    Object.entries(list).map(([slug, p]) => [
      slug,
      sourceSystemProfileSchema.parse({
        slug,
        name: p.name ?? slug,
        kind: 'unknown',
        defaultPerPage: 100,
        maxPerPage: 1000,
        resources: {},
        concurrency: p.concurrency,
        requestsPerMinute: p.requestsPerMinute,
      }),
    ]),
  );
  return (slug) => bySlug.get(slug);
}

/** A Park-Miller generator: the same sequence on every run. */
export function seeded(seed: number): () => number {
  let s = seed;
  return () => {
    s = (s * 16_807) % 2_147_483_647;
    return s / 2_147_483_647;
  };
}

const classesProfiles = testProfiles({});
const classesBackground: GovernorKeys = { client: 'client-1', account: 'acct-1', priority: 'background' };
const classesInteractive: GovernorKeys = { client: 'client-1', account: 'acct-1', priority: 'interactive' };

export interface ClassesRun {
  /** Accepted requests per upstream window (by reset), per class, steady state only. */
  sync: number[];
  app: number[];
  rejected: number;
  /** How long each interactive request waited for its slot (ms). */
  appWaits: number[];
  refused: number;
}

/**
 * The governor's two classes on a manual clock against a fixed window (service budget of `total` per
 * `windowMs`): `workers` background loops (acquire, 50 ms request, report) for `durationMs`, and, when `appEveryMs`,
 * one interactive request every `appEveryMs`.
 */
export async function runClasses(o: {
  share: number | 'adaptive';
  appEveryMs?: number;
  workers?: number;
  durationMs?: number;
  total?: number;
  windowMs?: number;
  /** The governor's timers wake up to this late (ms; a loaded machine), by a seeded random amount. */
  lateMs?: number;
  /** The upstream reports its resets in whole seconds. */
  wholeSeconds?: boolean;
}): Promise<ClassesRun> {
  const clock = new ManualClock();
  const total = o.total ?? 20;
  const windowMs = o.windowMs ?? 2_000;
  const late = seeded(1);
  const governorClock: Clock = o.lateMs ? { now: () => clock.now(), sleep: (ms, signal) => clock.sleep(ms + late() * o.lateMs!, signal) } : clock;
  const governor = new MemoryRateGovernor({ profiles: classesProfiles, clock: governorClock, serviceLimit: { total, windowMs }, syncShare: o.share });
  const window = new FixedWindow(total, windowMs, true, o.wholeSeconds ?? false);
  const end = clock.now() + (o.durationMs ?? 60_000);
  const counts = new Map<number, { sync: number; app: number }>();
  const result: ClassesRun = { sync: [], app: [], rejected: 0, appWaits: [], refused: 0 };
  const send = async (keys: GovernorKeys, release: () => void) => {
    const at = clock.now();
    const hit = window.hit(at);
    if (hit.status === 429) result.rejected++;
    else {
      const c = counts.get(hit.window.resetsAt!) ?? { sync: 0, app: 0 };
      if (keys.priority === 'interactive') c.app++;
      else c.sync++;
      counts.set(hit.window.resetsAt!, c);
    }
    await clock.sleep(50);
    governor.report(keys, { service: hit.window, sourceSystems: {} }, hit.status, at);
    release();
  };
  const loop = async () => {
    for (;;) {
      const release = await governor.acquire(classesBackground);
      if (clock.now() >= end) return release();
      await send(classesBackground, release);
    }
  };
  const app = async () => {
    const pending: Promise<void>[] = [];
    for (let t = clock.now() + 1_000; t < end; t += o.appEveryMs!) {
      await clock.sleep(t - clock.now());
      pending.push(
        (async () => {
          const asked = clock.now();
          try {
            const release = await governor.acquire(classesInteractive);
            result.appWaits.push(clock.now() - asked);
            await send(classesInteractive, release);
          } catch {
            result.refused++;
          }
        })(),
      );
    }
    await Promise.all(pending);
  };
  const loops = [...Array.from({ length: o.workers ?? 4 }, loop), ...(o.appEveryMs ? [app()] : [])];
  await clock.runUntil(end);
  await clock.runUntil(end + 3_600_000);
  await Promise.all(loops);
  // Steady state: past the first two windows, not the last (cut short).
  const steady = [...counts.entries()].sort((a, b) => a[0] - b[0]).slice(2, -1);
  result.sync = steady.map(([, c]) => c.sync);
  result.app = steady.map(([, c]) => c.app);
  return result;
}
