// Fixed-window request quotas: one per linked account (the service's own) and one per linked
// account and source system. Both are reported in headers on every answer and give 429 when spent.
import type { SourceSystemProfile } from '../source-systems/profiles.ts';

export interface RateLimitSettings {
  enabled: boolean;
  /** Service window, and (when set explicitly) every source-system window too. */
  windowMs: number;
  /** Whether windowMs was given explicitly: then it replaces the source systems' own windows. */
  windowOverride: boolean;
  accountLimit: number;
  sourceSystemLimits: Record<string, number>;
  /**
   * Source systems (by slug) that enforce several windows at once, in place of their one window: a
   * cloud construction PM system with an hourly and a 10-second limit. Every request counts
   * in each; the headers report the one nearer to running out (see {@link nearer}).
   */
  sourceSystemWindows?: Record<string, readonly SourceSystemWindow[]>;
}

export interface SourceSystemWindow {
  limit: number;
  windowMs: number;
}

interface Window {
  start: number;
  count: number;
}

interface RateDecision {
  headers: Record<string, string>;
  /** Set when the request must be refused. */
  exceeded?: { message: string; resetAt: number };
}

export class RateLimiter {
  private readonly service = new Map<string, Window>();
  private readonly source = new Map<string, Window>();

  constructor(
    public settings: RateLimitSettings,
    private readonly headerPrefix: string,
  ) {}

  reset(): void {
    this.service.clear();
    this.source.clear();
  }

  private window(map: Map<string, Window>, key: string, windowMs: number, now: number): Window {
    let w = map.get(key);
    if (!w || now >= w.start + windowMs) {
      w = { start: now, count: 0 };
      map.set(key, w);
    }
    return w;
  }

  sourceLimit(profile: SourceSystemProfile): { limit: number; windowMs: number } {
    return {
      limit: this.settings.sourceSystemLimits[profile.slug] ?? profile.rateLimit.limit,
      windowMs: this.settings.windowOverride ? this.settings.windowMs : profile.rateLimit.windowMs,
    };
  }

  /** The source system's windows: several when configured (`sourceSystemWindows`), else its one. */
  sourceWindows(profile: SourceSystemProfile): readonly SourceSystemWindow[] {
    const several = this.settings.sourceSystemWindows?.[profile.slug];
    if (several && several.length > 0) return several;
    const one = this.sourceLimit(profile);
    // The profile's own burst windows, unless a setting scales this system's limit or window (tests and
    // the bench set one window then).
    const scaled = this.settings.windowOverride || this.settings.sourceSystemLimits[profile.slug] !== undefined;
    return [{ limit: one.limit, windowMs: one.windowMs }, ...(scaled ? [] : (profile.burstLimits ?? []))];
  }

  /** Counts one request of an account and says whether it may proceed. */
  take(accountId: string, profile: SourceSystemProfile, now = Date.now()): RateDecision {
    if (!this.settings.enabled) return { headers: {} };
    const s = this.settings;
    const sw = this.window(this.service, accountId, s.windowMs, now);
    const limits = this.sourceWindows(profile);
    // One counter per window; a single window keeps its key of before (the admin reset clears all).
    const windows = limits.map((l, i) => ({
      ...l,
      w: this.window(this.source, limits.length === 1 ? accountId : `${accountId}|${i}|${l.windowMs}`, l.windowMs, now),
    }));
    const headers = (): Record<string, string> => {
      const src = nearer(windows);
      return {
        [`${this.headerPrefix}-RateLimit-Total`]: String(s.accountLimit),
        [`${this.headerPrefix}-RateLimit-Remaining`]: String(Math.max(0, s.accountLimit - sw.count)),
        [`${profile.headerName}-RateLimit-Total`]: String(src.limit),
        [`${profile.headerName}-RateLimit-Remaining`]: String(Math.max(0, src.limit - src.w.count)),
        [`${profile.headerName}-RateLimit-ResetsAtTimestamp`]: String(Math.ceil((src.w.start + src.windowMs) / 1000)),
      };
    };
    if (sw.count >= s.accountLimit) {
      return {
        headers: headers(),
        exceeded: {
          message: `Rate limit exceeded: ${s.accountLimit} requests per ${s.windowMs / 1000} seconds for this linked account`,
          resetAt: sw.start + s.windowMs,
        },
      };
    }
    sw.count++;
    const spent = windows.filter((x) => x.w.count >= x.limit);
    if (spent.length > 0) {
      // The window that keeps the client out longest.
      const src = spent.reduce((a, b) => (b.w.start + b.windowMs > a.w.start + a.windowMs ? b : a));
      return {
        headers: headers(),
        exceeded: {
          message: `${profile.name} rate limit exceeded: ${src.limit} requests per ${src.windowMs / 1000} seconds`,
          resetAt: src.w.start + src.windowMs,
        },
      };
    }
    for (const x of windows) x.w.count++;
    return { headers: headers() };
  }
}

/**
 * The window the headers report when several apply: the one nearer to running out (the fewest
 * requests left); of two as near, the one that resets later, as it would keep the client out longer.
 */
function nearer<T extends { limit: number; windowMs: number; w: Window }>(windows: readonly T[]): T {
  const left = (x: T) => x.limit - x.w.count;
  const reset = (x: T) => x.w.start + x.windowMs;
  return windows.reduce((a, b) => (left(b) < left(a) || (left(b) === left(a) && reset(b) > reset(a)) ? b : a));
}
