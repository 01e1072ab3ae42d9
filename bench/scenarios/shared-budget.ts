// Scenario 10: one budget for the sync and the application. A full sync at the limit (the
// short windows of scenario 4) by a worker process, while a simulated application sends pass-through
// calls through the API process at a steady 10% of the allowance. The sandbox's answers say which
// window each request fell in; from them, per window: what the sync and the application got, and the
// 429s; from the application's side: the calls refused and how long each waited for its slot.
import type { IncomingMessage, Server, ServerResponse } from 'node:http';
import { performance } from 'node:perf_hooks';
import type { BenchShared } from '../lib/mirror-env.ts';
import { MirrorEnv } from '../lib/mirror-env.ts';
import { rateLimitedSystem } from './rate-limited.ts';

const headerName = 'crmcloud-ratelimit';
const resources = ['customers', 'leads', 'opportunities', 'activities'];

export interface SharedBudgetOptions {
  windowMs: number;
  limit: number;
  windows: number;
  recordsPerResource: number;
  /** MIRROR_SYNC_BUDGET_SHARE of the mirror's processes; undefined: unset (the application's reserve sized by its use). */
  share: number | undefined;
  /** The application's share of the allowance (0.1: one call every 10 requests' worth of the window). */
  appShare: number;
}

export interface SharedBudgetRun {
  share: number | undefined;
  /** Per window (in order): the sync's and the application's accepted requests, and the 429s. */
  perWindow: { sync: number; app: number; rejected: number }[];
  /** Application calls after the first window answered 429 (by the upstream or the governor). */
  appRejectedAfterFirst: number;
  /** The same in the steady state (the windows measured, once the governor learned the window's length). */
  appRejectedSteady: number;
  appCalls: number;
  /** p99 of the time an application call waited before it reached the upstream, beyond the least seen (ms), after the first window. */
  appWaitP99: number | null;
  /** The same in the steady state. */
  appWaitP99Steady: number | null;
  /** One request spacing of the window: windowMs / limit. */
  spacingMs: number;
  /** Steady state (complete windows of the second half), mean of sync / (limit - app). */
  syncShareOfLeft: number | null;
  /** Steady state, mean of sync / limit. */
  syncShareOfWindow: number | null;
  /** Steady state, mean of (sync + app) / limit. */
  totalUse: number | null;
  upstream429s: number;
}

interface Seen {
  t: number;
  app: boolean;
  status: number;
  resetsAt: number | undefined;
}

function record(server: Server, accountToken: string): { seen: Seen[]; stop(): void } {
  const seen: Seen[] = [];
  const listener = (req: IncomingMessage, res: ServerResponse) => {
    if (req.headers['account-token'] !== accountToken) return;
    const t = performance.timeOrigin + performance.now();
    let resetsAt: number | undefined;
    const writeHead = res.writeHead.bind(res) as (...args: unknown[]) => ServerResponse;
    res.writeHead = (...args: unknown[]) => {
      const headers = args.find((a): a is Record<string, unknown> => typeof a === 'object' && a !== null && !Array.isArray(a));
      const key = headers && Object.keys(headers).find((k) => k.toLowerCase() === `${headerName}-resetsattimestamp`);
      if (key) resetsAt = Number(headers[key]);
      return writeHead(...args);
    };
    const app = (req.url ?? '').startsWith('/passthrough');
    res.once('close', () => {
      const reset = resetsAt ?? res.getHeader(`${headerName}-resetsattimestamp`);
      seen.push({ t, app, status: res.headersSent ? res.statusCode : 0, resetsAt: reset === undefined ? undefined : Number(reset) });
    });
  };
  server.on('request', listener);
  return { seen, stop: () => server.off('request', listener) };
}

const mean = (xs: number[]) => (xs.length === 0 ? null : xs.reduce((a, b) => a + b, 0) / xs.length);

export async function sharedBudget(shared: BenchShared, o: SharedBudgetOptions): Promise<SharedBudgetRun> {
  const sizes = Object.fromEntries(resources.map((r) => [r, o.recordsPerResource]));
  const env = await MirrorEnv.start(shared, {
    name: `budget-${o.share ?? 'default'}`,
    sandbox: { sizes, rateLimits: { windowMs: o.windowMs, accountLimit: 1_000_000, sourceSystemLimits: { [rateLimitedSystem]: o.limit } } },
    assumeLimits: true,
    api: true,
    env: o.share === undefined ? {} : { MIRROR_SYNC_BUDGET_SHARE: String(o.share) },
  });
  try {
    const account = await env.link(rateLimitedSystem, `bench-budget-${o.share ?? 'default'}`);
    const set = await env.startWorkers(1);
    const rec = record(env.sandbox.app.server, account.accountToken);
    const now = () => performance.timeOrigin + performance.now();
    try {
      const handle = await set.sync.start({ accountId: account.accountId, mode: 'full', concurrency: 4 });
      let finished = false;
      const result = handle.result().then(
        () => (finished = true),
        () => undefined,
      );
      // The application: one pass-through call every `every` ms through the API process, one at a time.
      const every = o.windowMs / (o.appShare * o.limit);
      const calls: { sentAt: number; status: number; arrivedAt: number | undefined }[] = [];
      let stop = false;
      const application = (async () => {
        for (let i = 0; !stop; i++) {
          const sentAt = now();
          const seenBefore = rec.seen.length;
          const res = await fetch(`${env.api!.url}/passthrough-download`, {
            method: 'POST',
            headers: { ...env.mirrorHeaders(account.accountToken), 'content-type': 'application/json' },
            body: JSON.stringify({ method: 'GET', path: `/files/app-${i}.bin` }),
          });
          await res.arrayBuffer();
          const arrived = rec.seen.slice(seenBefore).find((s) => s.app);
          calls.push({ sentAt, status: res.status, arrivedAt: arrived?.t });
          const next = sentAt + every - now();
          if (next > 0) await new Promise((r) => setTimeout(r, next));
        }
      })();
      const deadline = async () => {
        while (rec.seen.length === 0) await new Promise((r) => setTimeout(r, 50));
        const first = Math.min(...rec.seen.map((s) => s.t));
        const wait = first + o.windows * o.windowMs + 250 - now();
        if (wait > 0) await new Promise((r) => setTimeout(r, wait));
      };
      await Promise.race([result, deadline()]);
      const stoppedAt = now();
      stop = true;
      await application;
      if (!finished) await handle.terminate('benchmark: enough windows measured').catch(() => undefined);
      rec.stop();
      if (process.env.BENCH_DUMP_DIR)
        (await import('node:fs')).writeFileSync(`${process.env.BENCH_DUMP_DIR}/budget-${o.share ?? 'default'}.json`, JSON.stringify({ seen: rec.seen, calls }));

      const windows = new Map<number, { sync: number; app: number; rejected: number }>();
      for (const s of rec.seen) {
        if (s.resetsAt === undefined) continue;
        const w = windows.get(s.resetsAt) ?? { sync: 0, app: 0, rejected: 0 };
        if (s.status === 429) w.rejected++;
        else if (s.app) w.app++;
        else w.sync++;
        windows.set(s.resetsAt, w);
      }
      const ordered = [...windows.entries()].sort((a, b) => a[0] - b[0]);
      // As scenario 4: the complete windows of the second half (the first half covers the governor
      // learning the windows' length), not the last one of a finished sync.
      const steadyEntries = ordered
        .slice(Math.max(1, Math.floor(ordered.length / 2)))
        .filter(([reset], i, all) => reset * 1000 <= stoppedAt && !(finished && i === all.length - 1));
      const steady = steadyEntries.map(([, w]) => w);
      const steadyFrom = steadyEntries.length > 0 ? steadyEntries[0]![0] * 1000 - o.windowMs : stoppedAt;
      const firstEnd = Math.min(...rec.seen.map((s) => s.t)) + o.windowMs;
      const after = calls.filter((c) => c.sentAt >= firstEnd);
      const inSteady = calls.filter((c) => c.sentAt >= steadyFrom && c.sentAt <= stoppedAt);
      const delays = after.filter((c) => c.arrivedAt !== undefined).map((c) => c.arrivedAt! - c.sentAt);
      const floor = delays.length > 0 ? Math.min(...delays) : 0;
      const p99 = (list: typeof calls): number | null => {
        const added = list
          .filter((c) => c.arrivedAt !== undefined)
          .map((c) => c.arrivedAt! - c.sentAt - floor)
          .sort((a, b) => a - b);
        return added.length > 0 ? added[Math.min(added.length - 1, Math.floor(added.length * 0.99))]! : null;
      };
      return {
        share: o.share,
        perWindow: ordered.map(([, w]) => w),
        appRejectedAfterFirst: after.filter((c) => c.status === 429).length,
        appRejectedSteady: inSteady.filter((c) => c.status === 429).length,
        appCalls: calls.length,
        appWaitP99: p99(after),
        appWaitP99Steady: p99(inSteady),
        spacingMs: o.windowMs / o.limit,
        syncShareOfLeft: mean(steady.map((w) => w.sync / (o.limit - w.app))),
        syncShareOfWindow: mean(steady.map((w) => w.sync / o.limit)),
        totalUse: mean(steady.map((w) => (w.sync + w.app) / o.limit)),
        upstream429s: rec.seen.filter((s) => s.status === 429).length,
      };
    } finally {
      rec.stop();
      await set.stop();
    }
  } finally {
    await env.close();
  }
}
