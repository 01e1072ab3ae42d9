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
}

interface Window {
  start: number;
  count: number;
}

export interface RateDecision {
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

  /** Counts one request of an account and says whether it may proceed. */
  take(accountId: string, profile: SourceSystemProfile, now = Date.now()): RateDecision {
    if (!this.settings.enabled) return { headers: {} };
    const s = this.settings;
    const sw = this.window(this.service, accountId, s.windowMs, now);
    const src = this.sourceLimit(profile);
    const pw = this.window(this.source, accountId, src.windowMs, now);
    const headers = (): Record<string, string> => ({
      [`${this.headerPrefix}-RateLimit-Total`]: String(s.accountLimit),
      [`${this.headerPrefix}-RateLimit-Remaining`]: String(Math.max(0, s.accountLimit - sw.count)),
      [`${profile.headerName}-RateLimit-Total`]: String(src.limit),
      [`${profile.headerName}-RateLimit-Remaining`]: String(Math.max(0, src.limit - pw.count)),
      [`${profile.headerName}-RateLimit-ResetsAtTimestamp`]: String(Math.ceil((pw.start + src.windowMs) / 1000)),
    });
    if (sw.count >= s.accountLimit) {
      return { headers: headers(), exceeded: { message: `Rate limit exceeded: ${s.accountLimit} requests per ${s.windowMs / 1000} seconds for this linked account`, resetAt: sw.start + s.windowMs } };
    }
    sw.count++;
    if (pw.count >= src.limit) {
      return { headers: headers(), exceeded: { message: `${profile.name} rate limit exceeded: ${src.limit} requests per ${src.windowMs / 1000} seconds`, resetAt: pw.start + src.windowMs } };
    }
    pw.count++;
    return { headers: headers() };
  }
}
