// Test doubles for the governor: a manual clock, and an upstream's rate-limit counters (a fixed window
// that resets at a reported time, or a sliding window), each reporting what the headers would.
import type { Clock } from '../../../connectors/governor/budgets.ts';
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
  ) {}

  hit(now: number): Hit {
    if (this.start === undefined || now >= this.start + this.windowMs) {
      this.start = now;
      this.count = 0;
    }
    this.count++;
    const window: RateLimitWindow = { total: this.total, remaining: Math.max(0, this.total - this.count) };
    if (this.reportReset) window.resetsAt = this.start + this.windowMs;
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
