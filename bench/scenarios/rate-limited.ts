// Scenario 4: a sync against the sandbox with short rate-limit windows, with one and with two worker
// processes (their budget is shared through Postgres). The sandbox's own answers say which window
// each request fell in (its source-system `ResetsAtTimestamp` names the window) and how many it
// allowed; from them: accepted requests per window / allowed, and 429s after the first window.
import type { IncomingMessage, Server, ServerResponse } from 'node:http';
import { performance } from 'node:perf_hooks';
import type { BenchShared, Linked } from '../lib/mirror-env.ts';
import { MirrorEnv } from '../lib/mirror-env.ts';

export const rateLimitedSystem = 'crmcloud';
const headerName = 'crmcloud-ratelimit';
const resources = ['customers', 'leads', 'opportunities', 'activities'];

export interface RateLimitOptions {
  windowMs: number;
  /** Requests allowed per window (the source system's limit; the service's is set out of reach). */
  limit: number;
  /** Windows to measure (the sync is stopped after them if it has not finished). */
  windows: number;
  /** Records per resource (four resources, 200 per page). */
  recordsPerResource: number;
}

export interface RateLimitRun {
  workers: number;
  requests: number;
  accepted: number;
  rejected: number;
  /** Accepted requests in each sandbox window, in order. */
  perWindow: number[];
  /** Mean over the complete windows of the second half (steady state) of accepted / allowed. */
  utilization: number | null;
  /** Accepted requests per second after the first window / allowed per second. */
  rateRatio: number | null;
  rejectedAfterFirst: number;
  finished: boolean;
  seconds: number;
  /** The governor's rows for this account after the run: what it believed the windows were. */
  budgets: { kind: string; total: number | null; windowMs: number; spacingMs: number }[];
}

interface Seen {
  t: number;
  status: number;
  resetsAt: number | undefined;
}

/** Listens beside the sandbox's own handler: every answer to this account, with its window. */
function record(server: Server, accountToken: string): { seen: Seen[]; stop(): void } {
  const seen: Seen[] = [];
  const listener = (req: IncomingMessage, res: ServerResponse) => {
    if (req.headers['account-token'] !== accountToken) return;
    const t = performance.timeOrigin + performance.now();
    // Fastify hands its headers to writeHead (not setHeader): read the window there.
    let resetsAt: number | undefined;
    const writeHead = res.writeHead.bind(res) as (...args: unknown[]) => ServerResponse;
    res.writeHead = (...args: unknown[]) => {
      const headers = args.find((a): a is Record<string, unknown> => typeof a === 'object' && a !== null && !Array.isArray(a));
      const key = headers && Object.keys(headers).find((k) => k.toLowerCase() === `${headerName}-resetsattimestamp`);
      if (key) resetsAt = Number(headers[key]);
      return writeHead(...args);
    };
    res.once('close', () => {
      const reset = resetsAt ?? res.getHeader(`${headerName}-resetsattimestamp`);
      seen.push({ t, status: res.headersSent ? res.statusCode : 0, resetsAt: reset === undefined ? undefined : Number(reset) });
    });
  };
  server.on('request', listener);
  return { seen, stop: () => server.off('request', listener) };
}

export function analyse(
  seen: readonly Seen[],
  o: { limit: number; windowMs: number },
  stoppedAt: number,
  finished: boolean,
): Omit<RateLimitRun, 'workers' | 'finished' | 'seconds' | 'budgets'> {
  const windows = new Map<number, { accepted: number; rejected: number; first: number }>();
  let accepted = 0;
  let rejected = 0;
  for (const s of seen) {
    if (s.status === 429) rejected++;
    else accepted++;
    if (s.resetsAt === undefined) continue;
    const w = windows.get(s.resetsAt) ?? { accepted: 0, rejected: 0, first: s.t };
    if (s.status === 429) w.rejected++;
    else w.accepted++;
    w.first = Math.min(w.first, s.t);
    windows.set(s.resetsAt, w);
  }
  const ordered = [...windows.entries()].sort((a, b) => a[0] - b[0]);
  // Steady state: the complete windows (ended before the stop, and not the last one of a finished
  // sync) of the second half. The first half covers the governor learning the windows: the headers
  // give a window's total and reset time, never its length, which takes two resets to see.
  const complete = ordered
    .slice(Math.max(1, Math.floor(ordered.length / 2)))
    .filter(([reset], i, all) => reset * 1000 <= stoppedAt && !(finished && i === all.length - 1));
  const utilization = complete.length > 0 ? complete.reduce((a, [, w]) => a + w.accepted, 0) / complete.length / o.limit : null;
  const firstEnd = ordered[0] ? ordered[0][1].first + o.windowMs : undefined;
  let rateRatio: number | null = null;
  if (firstEnd !== undefined) {
    const end = finished ? Math.max(...seen.map((s) => s.t)) : stoppedAt;
    const after = seen.filter((s) => s.t >= firstEnd && s.t <= end && s.status !== 429).length;
    const span = end - firstEnd;
    if (span > o.windowMs) rateRatio = after / ((span / o.windowMs) * o.limit);
  }
  const rejectedAfterFirst = ordered.slice(1).reduce((a, [, w]) => a + w.rejected, 0) + seen.filter((s) => s.status === 429 && s.resetsAt === undefined).length;
  return { requests: seen.length, accepted, rejected, perWindow: ordered.map(([, w]) => w.accepted), utilization, rateRatio, rejectedAfterFirst };
}

async function runWith(env: MirrorEnv, account: Linked, workers: number, o: RateLimitOptions): Promise<RateLimitRun> {
  const set = await env.startWorkers(workers, `${env.taskQueue}-w${workers}`);
  const rec = record(env.sandbox.app.server, account.accountToken);
  const t0 = performance.timeOrigin + performance.now();
  try {
    const handle = await set.sync.start({ accountId: account.accountId, mode: 'full', concurrency: 4 });
    let finished = false;
    const result = handle.result().then(
      () => {
        finished = true;
      },
      () => undefined,
    );
    // Measure `windows` windows from the account's first request (or until the sync is done).
    const deadline = async () => {
      while (rec.seen.length === 0 && performance.timeOrigin + performance.now() - t0 < 60_000) await new Promise((r) => setTimeout(r, 50));
      const first = rec.seen.length > 0 ? Math.min(...rec.seen.map((s) => s.t)) : t0;
      const end = first + o.windows * o.windowMs + 250;
      const wait = end - (performance.timeOrigin + performance.now());
      if (wait > 0) await new Promise((r) => setTimeout(r, wait));
    };
    await Promise.race([result, deadline()]);
    const stoppedAt = performance.timeOrigin + performance.now();
    if (!finished) await handle.terminate('benchmark: enough windows measured').catch(() => undefined);
    rec.stop();
    if (process.env.BENCH_DUMP_DIR) (await import('node:fs')).writeFileSync(`${process.env.BENCH_DUMP_DIR}/rate-${workers}.json`, JSON.stringify(rec.seen));
    const { rows } = await env.services.pool.query<{ key: string; total: number | null; window_ms: number; spacing_ms: number }>(
      `SELECT key, total, window_ms, spacing_ms FROM rate_budgets WHERE key LIKE '%' || $1 || '%' ORDER BY key`,
      [account.accountId],
    );
    const budgets = rows.map((r) => ({
      kind: r.key.startsWith('source:') ? 'source system' : 'service',
      total: r.total,
      windowMs: r.window_ms,
      spacingMs: r.spacing_ms,
    }));
    return { workers, finished, seconds: (stoppedAt - t0) / 1000, budgets, ...analyse(rec.seen, o, stoppedAt, finished) };
  } finally {
    rec.stop();
    await set.stop();
  }
}

export async function rateLimited(shared: BenchShared, o: RateLimitOptions): Promise<RateLimitRun[]> {
  const sizes = Object.fromEntries(resources.map((r) => [r, o.recordsPerResource]));
  const env = await MirrorEnv.start(shared, {
    name: 'rate',
    sandbox: { sizes, rateLimits: { windowMs: o.windowMs, accountLimit: 1_000_000, sourceSystemLimits: { [rateLimitedSystem]: o.limit } } },
    assumeLimits: true,
  });
  try {
    const runs: RateLimitRun[] = [];
    for (const workers of [1, 2]) {
      // A fresh account each time: fresh windows upstream, fresh budgets in the governor.
      const account = await env.link(rateLimitedSystem, `bench-rate-${workers}`);
      runs.push(await runWith(env, account, workers, o));
    }
    return runs;
  } finally {
    await env.close();
  }
}
