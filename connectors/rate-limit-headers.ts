// Reads the rate-limit headers of one upstream response: the service's own window
// (`{Prefix}-RateLimit-Total/-Remaining`) and the source system's (`{SourceSystem}-RateLimit-*`).

export interface RateLimitWindow {
  total: number;
  remaining: number;
  /** Epoch milliseconds when the window resets, when the upstream says. */
  resetsAt?: number;
}

export interface RateLimitReport {
  service?: RateLimitWindow;
  /** Keyed by the header's source-system name, lower-cased. */
  sourceSystems: Record<string, RateLimitWindow>;
}

type Headers = Record<string, string | string[] | undefined>;

function num(v: string | string[] | undefined): number | undefined {
  const s = Array.isArray(v) ? v[0] : v;
  if (s === undefined || s === '') return undefined;
  const n = Number(s);
  return Number.isFinite(n) ? n : undefined;
}

export function readRateLimits(headers: Headers, prefix: string): RateLimitReport {
  const servicePrefix = `${prefix.toLowerCase()}-ratelimit-`;
  const report: RateLimitReport = { sourceSystems: {} };
  const total = num(headers[`${servicePrefix}total`]);
  const remaining = num(headers[`${servicePrefix}remaining`]);
  if (total !== undefined && remaining !== undefined) {
    const reset = num(headers[`${servicePrefix}resetsattimestamp`]);
    report.service = { total, remaining, ...(reset !== undefined ? { resetsAt: reset * 1000 } : {}) };
  }
  for (const name of Object.keys(headers)) {
    const lower = name.toLowerCase();
    if (!lower.endsWith('-ratelimit-total') || lower.startsWith(servicePrefix)) continue;
    const system = lower.slice(0, -'-ratelimit-total'.length);
    const t = num(headers[name]);
    const r = num(headers[`${system}-ratelimit-remaining`]);
    if (t === undefined || r === undefined) continue;
    const reset = num(headers[`${system}-ratelimit-resetsattimestamp`]);
    report.sourceSystems[system] = { total: t, remaining: r, ...(reset !== undefined ? { resetsAt: reset * 1000 } : {}) };
  }
  return report;
}

/** The latest reset among the reported windows, for a 429 without a usable header. */
export function resetAtOf(report: RateLimitReport, now: number, windowMs = 60_000): number {
  const resets = [report.service?.resetsAt, ...Object.values(report.sourceSystems).map((w) => w.resetsAt)].filter(
    (v): v is number => v !== undefined && v > now,
  );
  return resets.length > 0 ? Math.max(...resets) : now + windowMs;
}
