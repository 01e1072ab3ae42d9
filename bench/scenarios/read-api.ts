// Scenario 5: the read API against a minimal raw `pg` + `node:http` baseline on the same rows, side by
// side: single-object GET, 100-record list GET at random pages, and the same list's page 1 (what a random
// page should cost), req/s and p99, each measured with autocannon. With them, on the baseline
// alone, the same two pages as raw ranges of the list's index (random places, and its start): what
// Postgres itself makes of a random page against page 1 on this machine, the floor of the mirror's ratio.
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { setTimeout as sleep } from 'node:timers/promises';
import autocannon from 'autocannon';
import { freePort } from '../../bin/test-runner.ts';
import type { Linked, MirrorEnv } from '../lib/mirror-env.ts';
import { benchNodeArgs, keptRound, logTail, spawnNode, untilPostgresIdle, withRequestCpu, type Child, type RequestCpu } from '../lib/processes.ts';

export interface LoadResult {
  rps: number;
  p50: number;
  p99: number;
  requests: number;
  non2xx: number;
  errors: number;
  /** What a request cost in CPU, per side (bench/lib/processes.ts withRequestCpu). */
  cpu?: RequestCpu;
}

export interface ReadComparison {
  kind: 'single' | 'list' | 'first';
  mirror: LoadResult;
  baseline: LoadResult;
}

/** Raw SQL's own random page against its page 1, both as ranges of the index (baseline-server.ts by=ordinal). */
export interface RawRanges {
  random: LoadResult;
  first: LoadResult;
}

export async function load(
  url: string,
  headers: Record<string, string>,
  nextPath: () => string,
  seconds: number,
  connections: number,
  pid?: number,
): Promise<LoadResult> {
  const { result, cpu } = await withRequestCpu(
    pid,
    () =>
      autocannon({
        url,
        connections,
        duration: seconds,
        headers,
        requests: [{ method: 'GET', setupRequest: (req) => ({ ...req, path: nextPath() }) }],
      }),
    (r) => r.requests.total,
  );
  return {
    ...(cpu ? { cpu } : {}),
    rps: result['2xx'] / result.duration,
    p50: result.latency.p50,
    p99: result.latency.p99,
    requests: result.requests.total,
    non2xx: result.non2xx,
    errors: result.errors,
  };
}

async function startBaseline(env: MirrorEnv, account: Linked): Promise<{ url: string; child: Child }> {
  const port = await freePort();
  const child = spawnNode(
    'baseline',
    [...benchNodeArgs(), '--import', 'tsx', 'bench/baseline-server.ts'],
    { ...process.env, BASELINE_PORT: String(port), DATABASE_URL: env.databaseUrl, BASELINE_ACCOUNT_ID: account.accountId, BASELINE_RESOURCE: 'customers' },
    join(env.shared.logDir, 'baseline.log'),
  );
  const url = `http://127.0.0.1:${port}`;
  const deadline = Date.now() + 30_000;
  for (;;) {
    if (child.process.exitCode !== null) throw new Error(`the baseline server exited at start:\n${logTail(child.logFile)}`);
    if (
      await fetch(`${url}/customers?per_page=1`).then(
        (r) => r.ok,
        () => false,
      )
    )
      return { url, child };
    if (Date.now() > deadline) throw new Error(`the baseline server did not answer:\n${logTail(child.logFile)}`);
    await sleep(100);
  }
}

export async function readApi(
  env: MirrorEnv,
  account: Linked,
  options: { seconds: number; warmupSeconds: number; rounds: number; connections: number; records: number },
): Promise<{ comparisons: ReadComparison[]; ranges: RawRanges; settledMs: number[] }> {
  if (!env.api) throw new Error('the read API is not running');
  const { rows } = await env.services.pool.query<{ id: string }>(
    `SELECT id FROM records WHERE account_id = $1 AND resource = 'customers' AND deleted_at IS NULL ORDER BY random() LIMIT 2000`,
    [account.accountId],
  );
  const ids = rows.map((r) => r.id);
  const pages = Math.max(1, Math.floor(options.records / 100));
  const pick = <T>(xs: readonly T[]) => xs[Math.floor(Math.random() * xs.length)]!;
  const paths = {
    single: () => `/customers/${pick(ids)}`,
    list: () => `/customers?page=${1 + Math.floor(Math.random() * pages)}&per_page=100`,
    first: () => `/customers?page=1&per_page=100`,
    // The baseline alone: the same pages as raw ranges of the index.
    range: () => `/customers?page=${1 + Math.floor(Math.random() * pages)}&per_page=100&by=ordinal`,
    rangeFirst: () => `/customers?page=1&per_page=100&by=ordinal`,
  };
  // Both answer the same object and the same page byte for byte (modulo the mirror's headers).
  const baseline = await startBaseline(env, account);
  try {
    const mirrorHeaders = env.mirrorHeaders(account.accountToken);
    const sample = ids[0]!;
    const [m, b] = await Promise.all([
      fetch(`${env.api.url}/customers/${sample}`, { headers: mirrorHeaders }).then((r) => r.text()),
      fetch(`${baseline.url}/customers/${sample}`).then((r) => r.text()),
    ]);
    if (m !== b) throw new Error(`the mirror and the baseline answer differently for /customers/${sample}`);
    // A range is the list's page only where its ordinals are dense from 0: a page near the end, both ways.
    const late = `/customers?page=${Math.max(1, pages - 3)}&per_page=100`;
    const [byOffset, byRange] = await Promise.all(
      [fetch(`${baseline.url}${late}`), fetch(`${baseline.url}${late}&by=ordinal`)].map((p) => p.then((r) => r.text())),
    );
    if (byOffset !== byRange) throw new Error(`the baseline's range and OFFSET pages differ for ${late}: the list's ordinals are not dense`);
    // Random pages are judged against page 1 as the mirror against its baseline: side by side. So the
    // two lists' rounds interleave (each round runs random pages and page 1 on both sides, in an order
    // that alternates), rather than one list's rounds after the other's, where a drift in the
    // machine's load between the two phases went into the ratio.
    type Kind = keyof typeof paths;
    const phases: (readonly Kind[])[] = [['single'], ['list', 'first', 'range', 'rangeFirst']];
    const baselineOnly = (kind: Kind) => kind === 'range' || kind === 'rangeFirst';
    const best = new Map<string, LoadResult>();
    const settled: number[] = [];
    for (const kinds of phases) {
      for (const kind of kinds) {
        if (!baselineOnly(kind)) await load(env.api.url, mirrorHeaders, paths[kind], options.warmupSeconds, options.connections);
        await load(baseline.url, {}, paths[kind], options.warmupSeconds, options.connections);
      }
      const runs = kinds.flatMap((kind) => (baselineOnly(kind) ? (['baseline'] as const) : (['baseline', 'mirror'] as const)).map((who) => ({ kind, who })));
      for (let round = 0; round < options.rounds; round++) {
        // Alternate the order so drift in the machine's load favours none of them.
        for (const { kind, who } of round % 2 === 0 ? runs : [...runs].reverse()) {
          // Each from a Postgres with nothing left running of the load before.
          settled.push(await untilPostgresIdle(env.services.pool));
          const r =
            who === 'mirror'
              ? await load(env.api.url, mirrorHeaders, paths[kind], options.seconds, options.connections, env.api.child.process.pid)
              : await load(baseline.url, {}, paths[kind], options.seconds, options.connections, baseline.child.process.pid);
          best.set(`${kind}:${who}`, keptRound(best.get(`${kind}:${who}`), r));
        }
      }
    }
    return {
      comparisons: (['single', 'list', 'first'] as const).map((kind) => ({
        kind,
        mirror: best.get(`${kind}:mirror`)!,
        baseline: best.get(`${kind}:baseline`)!,
      })),
      ranges: { random: best.get('range:baseline')!, first: best.get('rangeFirst:baseline')! },
      settledMs: settled,
    };
  } finally {
    await baseline.child.stop();
  }
}

/** Median of `count` sequential single-object GETs through the read API (a quick probe, in ms). */
export async function probeSingleGet(env: MirrorEnv, account: Linked, count: number): Promise<number | null> {
  if (!env.api) return null;
  const { rows } = await env.services.pool.query<{ id: string }>(
    `SELECT id FROM records WHERE account_id = $1 AND resource = 'customers' AND deleted_at IS NULL ORDER BY ordinal DESC LIMIT $2`,
    [account.accountId, count],
  );
  const headers = env.mirrorHeaders(account.accountToken);
  const times: number[] = [];
  for (const r of rows) {
    const t0 = performance.now();
    const res = await fetch(`${env.api.url}/customers/${r.id}`, { headers });
    await res.arrayBuffer();
    times.push(performance.now() - t0);
  }
  times.sort((a, b) => a - b);
  return times.length ? times[Math.floor(times.length / 2)]! : null;
}

export interface BufferProbe {
  /** Blocks a 100-record range at a random place of the list read from outside shared_buffers (mean), and found in them. */
  random: { read: number; hit: number };
  /** The same for the list's first 100 records. */
  first: { read: number; hit: number };
  heapBytes: number;
  sharedBuffersBytes: number;
}

/**
 * Where a random page's time goes beyond page 1's, in Postgres's own counts: the blocks a 100-record
 * range of the list reads (EXPLAIN's buffers), at random places and at the start, after the loads. A
 * list whose heap is larger than shared_buffers serves random pages from the operating system's cache
 * (a read a block) while page 1 stays in shared_buffers.
 */
export async function probeListBuffers(env: MirrorEnv, account: Linked, samples: number): Promise<BufferProbe> {
  const pool = env.services.pool;
  const { rows: places } = await pool.query<{ ordinal: string }>(
    `SELECT ordinal FROM records WHERE account_id = $1 AND resource = 'customers' AND scope = '' AND deleted_at IS NULL ORDER BY random() LIMIT $2`,
    [account.accountId, samples],
  );
  const range = async (from: string | null) => {
    const { rows } = await pool.query<{ 'QUERY PLAN': [{ Plan: { 'Shared Read Blocks': number; 'Shared Hit Blocks': number } }] }>(
      `EXPLAIN (ANALYZE, BUFFERS, TIMING OFF, FORMAT JSON)
       SELECT data::text FROM records WHERE account_id = $1 AND resource = 'customers' AND scope = '' AND deleted_at IS NULL
          AND ordinal >= coalesce($2::bigint, 0) ORDER BY ordinal, id LIMIT 100`,
      [account.accountId, from],
    );
    const plan = rows[0]!['QUERY PLAN'][0].Plan;
    return { read: plan['Shared Read Blocks'], hit: plan['Shared Hit Blocks'] };
  };
  const random = { read: 0, hit: 0 };
  for (const p of places) {
    const b = await range(p.ordinal);
    random.read += b.read / places.length;
    random.hit += b.hit / places.length;
  }
  const first = await range(null);
  const { rows: sizes } = await pool.query<{ heap: string; buffers: string }>(
    `SELECT pg_relation_size('records_customers')::text AS heap,
            (SELECT setting::bigint * 8192 FROM pg_settings WHERE name = 'shared_buffers')::text AS buffers`,
  );
  return { random, first, heapBytes: Number(sizes[0]!.heap), sharedBuffersBytes: Number(sizes[0]!.buffers) };
}
