// Fair across accounts: a small account's changes while a big account backfills on the same worker.
// One worker with few activity slots (SYNC_STREAM_CONCURRENCY=2: 4 at once, and 2 on its prompt task
// queue, where the change workflow applies events); a BuildPro-like account
// with many project lists starts its first full pass with more streams at once than the worker has
// slots, so its tasks queue up; meanwhile a small CRM Cloud account's leads change upstream, each
// delivered to the mirror as a webhook, and each change is timed from just before it is made until
// the read API answers it. Run twice: on the Temporal server every other scenario uses (priority
// and fairness on: the mirror's work carries its account as the fairness key and event-driven work
// goes first, lib/work-priority.ts), and on one with the new matcher off, where the same keys are
// ignored and tasks are dispatched first in, first out.
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { setTimeout as sleep } from 'node:timers/promises';
import { Client, Connection } from '@temporalio/client';
import { startDevServer } from '../../bin/temporal-cli.ts';
import { freePort } from '../../bin/test-runner.ts';
import { MirrorEnv, type BenchShared } from '../lib/mirror-env.ts';
import { percentile } from '../lib/report.ts';
import { changeHops, hopsNote, type TimedChange } from './fairness-hops.ts';

export interface FairnessOptions {
  /** The big account: its projects, of which `bigProjects` hold `big` records per list and the others `small`. */
  projects: number;
  bigProjects: number;
  big: number;
  small: number;
  /** Changes of the small account, one every `everyMs`, once the backfill has run `afterMs`. */
  changes: number;
  everyMs: number;
  afterMs: number;
  /** Streams the backfill runs at once (the worker runs 4 activities at once). */
  backfillConcurrency: number;
}

export interface FairnessRun {
  /** Each change's time until the read API answered it (ms); null: not within the timeout. */
  latencies: (number | null)[];
  /** Of every change, one not visible within `timeoutMs` counted as that. */
  p50: number | null;
  max: number | null;
  /** Changes not visible within `timeoutMs`. */
  missed: number;
  /** Records the backfill had written when the last change was answered. */
  backfilled: number;
  /** Where the changes' time went, hop by hop (fairness-hops.ts). */
  hops: string;
  /** The worker's event-loop delay while the changes were timed: the largest of any second, and the largest p99 of one. */
  eventLoop: { maxMs: number; p99Ms: number } | null;
  problems: string[];
}

const now = () => performance.timeOrigin + performance.now();

/** How long a change is watched for. */
export const timeoutMs = 30_000;

/** Samples the worker's event-loop delay once a second from its /metrics (each scrape resets the histogram). */
function eventLoopSampler(metricsUrl: string): { stop(): Promise<{ maxMs: number; p99Ms: number } | null> } {
  let maxMs = 0;
  let p99Ms = 0;
  let samples = 0;
  let running = true;
  const figure = (text: string, name: string) => Number(new RegExp(`^\\w*${name}(?:\\{[^}]*\\})? (\\S+)$`, 'm').exec(text)?.[1] ?? NaN) * 1000;
  const loop = (async () => {
    while (running) {
      const text = await fetch(metricsUrl)
        .then((r) => r.text())
        .catch(() => '');
      const max = figure(text, 'eventloop_lag_max_seconds');
      const p99 = figure(text, 'eventloop_lag_p99_seconds');
      if (Number.isFinite(max) && Number.isFinite(p99)) {
        samples++;
        maxMs = Math.max(maxMs, max);
        p99Ms = Math.max(p99Ms, p99);
      }
      await sleep(1_000);
    }
  })();
  return {
    async stop() {
      running = false;
      await loop;
      return samples > 0 ? { maxMs, p99Ms } : null;
    },
  };
}

async function runOnce(shared: BenchShared, o: FairnessOptions, name: string): Promise<FairnessRun> {
  const problems: string[] = [];
  const metricsPort = await freePort();
  const env = await MirrorEnv.start(shared, {
    name,
    sandbox: {
      sizes: { projects: o.projects, customers: 50, leads: 60, opportunities: 10, activities: 10 },
      projectSkew: { bigProjects: o.bigProjects, big: o.big, small: o.small },
    },
    assumeLimits: false,
    api: true,
    env: { SYNC_STREAM_CONCURRENCY: '2', WORKER_METRICS_PORT: String(metricsPort) },
  });
  try {
    const workers = await env.startWorkers(1);
    const big = await env.link('buildpro', `fair-big-${name}`);
    const small = await env.link('crmcloud', `fair-small-${name}`);
    // The small account: its leads mirrored and its upstream webhooks registered, before the backfill.
    const first = await (await workers.sync.start({ accountId: small.accountId, mode: 'full', resource: 'leads', registerWebhooks: true })).result();
    for (const f of first.failed) problems.push(`small account's pass: ${f.resource} ${f.scope}: ${f.error ?? ''}`);
    const { rows } = await env.services.pool.query<{ id: string }>(
      `SELECT id FROM records WHERE account_id = $1 AND resource = 'leads' AND deleted_at IS NULL ORDER BY ordinal LIMIT $2`,
      [small.accountId, o.changes],
    );
    if (rows.length < o.changes) problems.push(`only ${rows.length} leads mirrored for the small account`);

    // The big account's backfill, as its link starts it.
    const backfill = await workers.sync.start({ accountId: big.accountId, mode: 'full', kind: 'backfill', concurrency: o.backfillConcurrency });
    await sleep(o.afterMs);
    const headers = env.mirrorHeaders(small.accountToken);
    const admin = { ...env.upstreamHeaders, 'content-type': 'application/json' };
    const latencies: (number | null)[] = [];
    const timed: TimedChange[] = [];
    // A scrape before the changes, so the first sample covers only their time.
    await fetch(`http://127.0.0.1:${metricsPort}/metrics`).catch(() => undefined);
    const sampler = eventLoopSampler(`http://127.0.0.1:${metricsPort}/metrics`);
    for (const [i, { id }] of rows.entries()) {
      const value = `fair-${name}-${i}-${Date.now().toString(36)}`;
      const t0 = now();
      const res = await fetch(`${env.sandbox.url}/_admin/objects`, {
        method: 'PATCH',
        headers: admin,
        body: JSON.stringify({ account_token: small.accountToken, resource: 'leads', id, patch: { customer: value } }),
      });
      if (!res.ok) problems.push(`PATCH lead ${id}: ${res.status} ${(await res.text()).slice(0, 200)}`);
      const patched = now();
      let seen: number | null = null;
      while (now() - t0 < timeoutMs) {
        const r = await fetch(`${env.api!.url}/leads/${id}`, { headers }).catch(() => undefined);
        const body = r?.ok ? ((await r.json()) as { customer?: unknown }) : undefined;
        if (body?.customer === value) {
          seen = now() - t0;
          break;
        }
        await sleep(50);
      }
      latencies.push(seen);
      timed.push({ id, t0, patched, seen });
      const rest = o.everyMs - (now() - t0);
      if (rest > 0) await sleep(rest);
    }
    const eventLoop = await sampler.stop();
    const { rows: written } = await env.services.pool.query<{ n: number }>('SELECT count(*)::int AS n FROM records WHERE account_id = $1', [big.accountId]);
    const hops = await changeHops(env.services.pool, shared.temporal, small.accountId, timed);
    // BENCH_DUMP_DIR: each change's hops, for a closer look.
    if (process.env.BENCH_DUMP_DIR) writeFileSync(join(process.env.BENCH_DUMP_DIR, `fairness-${name}-hops.json`), JSON.stringify(hops));
    await backfill.terminate('benchmark: the changes are measured').catch(() => undefined);
    // A change not visible within the timeout counts as the timeout: the figures are then lower bounds.
    const counted = latencies.map((l) => l ?? timeoutMs);
    return {
      latencies,
      p50: counted.length > 0 ? percentile(counted, 50) : null,
      max: counted.length > 0 ? Math.max(...counted) : null,
      missed: latencies.filter((l) => l === null).length,
      backfilled: written[0]!.n,
      hops: hopsNote(hops),
      eventLoop,
      problems,
    };
  } finally {
    await env.close();
  }
}

/** The same run with fairness (the shared server) and without (a server of its own with the new matcher off). */
export async function fairness(shared: BenchShared, o: FairnessOptions): Promise<{ withKeys: FairnessRun; withoutKeys: FairnessRun }> {
  const withKeys = await runOnce(shared, o, 'fair');
  const port = await freePort();
  const server = await startDevServer({
    port,
    headless: true,
    dynamicConfig: { 'matching.useNewMatcher': false, 'matching.enableFairness': false },
  });
  try {
    const connection = await Connection.connect({ address: server.address });
    try {
      const temporal = new Client({ connection, namespace: 'default' });
      const withoutKeys = await runOnce({ ...shared, temporalAddress: server.address, temporal }, o, 'fifo');
      return { withKeys, withoutKeys };
    } finally {
      await connection.close();
    }
  } finally {
    await server.stop();
  }
}
