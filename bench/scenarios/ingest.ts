// Scenarios 1, 2, 3, 7 and 8: the ingest ceiling (raw COPY of the same rows into a bare table), a full
// sync of one big list end to end, the unchanged pass, sandbox page serving, and the scale curve.
import { createHash } from 'node:crypto';
import { performance } from 'node:perf_hooks';
import { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { setTimeout as sleep } from 'node:timers/promises';
import pg from 'pg';
import { from as copyFrom } from 'pg-copy-streams';
import type { BenchShared, Linked, MirrorEnv, WorkerSet } from '../lib/mirror-env.ts';
import { MirrorEnv as Env } from '../lib/mirror-env.ts';
import { CpuMeter, currentRss, peakRss, resetPeakRss, type CpuUse } from '../lib/processes.ts';
import { percentile } from '../lib/report.ts';

/** The sandbox data of the ingest scenarios: one list of `records` customers and little else. */
export function bigListSizes(records: number): Record<string, number> {
  return { customers: records, projects: 1, jobs: 0, appointments: 0 };
}

export const bigListSystem = 'fieldops';
export const bigListResource = 'customers';
const perPage = 1000;

function copyEscape(s: string): string {
  return s.replace(/[\\\t\n\r]/g, (c) => (c === '\\' ? '\\\\' : c === '\t' ? '\\t' : c === '\n' ? '\\n' : '\\r'));
}

function copyNullable(v: unknown): string {
  return typeof v === 'string' && v !== '' ? copyEscape(v) : '\\N';
}

/** Every page of the big list as the mirror asks for it, each turned into COPY text rows of `records`' shape. */
async function fetchCopyChunks(env: MirrorEnv, account: Linked, records: number): Promise<{ chunks: Buffer[]; rows: number }> {
  const chunks: Buffer[] = [];
  let rows = 0;
  const headers = { ...env.upstreamHeaders, 'account-token': account.accountToken, 'include-source-data': 'true' };
  for (let page = 1; rows < records; page++) {
    const res = await fetch(`${env.sandbox.url}/${bigListResource}?page=${page}&per_page=${perPage}`, { headers });
    if (!res.ok) throw new Error(`sandbox page ${page}: ${res.status} ${await res.text()}`);
    const body = (await res.json()) as { data: Record<string, unknown>[]; meta: { has_more_results: boolean | null } };
    const lines: string[] = [];
    for (const item of body.data) {
      const { source_data: sourceData, ...data } = item;
      const dataText = JSON.stringify(data);
      const sourceText = sourceData === undefined ? null : JSON.stringify(sourceData);
      const hash = createHash('md5')
        .update(dataText + (sourceText ?? ''))
        .digest('hex');
      const uuid = `${hash.slice(0, 8)}-${hash.slice(8, 12)}-${hash.slice(12, 16)}-${hash.slice(16, 20)}-${hash.slice(20)}`;
      lines.push(
        [
          account.accountId,
          bigListResource,
          '',
          copyEscape(String(item.id)),
          copyNullable(item.source_id),
          copyEscape(dataText),
          sourceText === null ? '\\N' : copyEscape(sourceText),
          uuid,
          copyNullable(item.source_create_time),
          copyNullable(item.source_update_time),
          '1',
          String(rows++),
        ].join('\t'),
      );
    }
    chunks.push(Buffer.from(`${lines.join('\n')}\n`));
    if (body.meta.has_more_results === false || body.data.length === 0) break;
  }
  return { chunks, rows };
}

export interface CeilingResult {
  rows: number;
  /** The median run's time. */
  seconds: number;
  /** The median run's rate: the ceiling. */
  rowsPerSecond: number;
  bytes: number;
  /** Every run's rate, in the order they ran. */
  runs: number[];
  /** The WAL each run wrote (undefined where Postgres would not say). */
  walBytes: (number | undefined)[];
  /** Whether every run started from a CHECKPOINT (the role may not be allowed one). */
  checkpointed: boolean;
}

/** A CHECKPOINT, where the role may ask for one (superuser or pg_checkpoint): whether it ran. */
async function checkpoint(client: Pick<pg.Client, 'query'>): Promise<boolean> {
  return client.query('CHECKPOINT').then(
    () => true,
    () => false,
  );
}

/**
 * Where the WAL is now (undefined where the role may not ask). The ceiling's COPY and the full sync
 * both start right after a CHECKPOINT and say how much WAL they wrote: a checkpoint that starts
 * during a run (every max_wal_size / 2 or so of WAL) makes each page touched after it write its
 * whole image to the WAL again, a cost one run would otherwise pay for WAL the one before it wrote.
 */
async function walPosition(client: Pick<pg.Client, 'query'>): Promise<string | undefined> {
  return client
    .query<{ lsn: string }>('SELECT pg_current_wal_lsn()::text AS lsn')
    .then((r) => r.rows[0]?.lsn)
    .catch(() => undefined);
}

/** The WAL written since `from` (a `walPosition`). */
async function walSince(client: Pick<pg.Client, 'query'>, from: string | undefined): Promise<number | undefined> {
  if (from === undefined) return undefined;
  return client
    .query<{ bytes: string }>('SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), $1::pg_lsn)::text AS bytes', [from])
    .then((r) => Number(r.rows[0]!.bytes))
    .catch(() => undefined);
}

/**
 * How many times the COPY runs; the ceiling is their median. One COPY of the default list swung
 * between 49k and 80k rows/s from run to run on one machine (the first after a start slowest, while
 * Postgres makes its WAL files), more than any change a ratio against it is meant to show.
 */
const ceilingRuns = 3;

/** Scenario 1: COPY of the big list's rows (as `records` would hold them) into a bare table, the median of `ceilingRuns`. */
export async function ingestCeiling(env: MirrorEnv, account: Linked, records: number): Promise<CeilingResult> {
  const { chunks, rows } = await fetchCopyChunks(env, account, records);
  const client = new pg.Client({ connectionString: env.databaseUrl });
  await client.connect();
  try {
    const columns = 'account_id, resource, scope, id, source_id, data, source_data, hash, source_create_time, source_update_time, generation, ordinal';
    const times: number[] = [];
    const walBytes: (number | undefined)[] = [];
    let checkpointed = true;
    for (let run = 0; run < ceilingRuns; run++) {
      await client.query('DROP TABLE IF EXISTS bench_ceiling');
      await client.query('CREATE TABLE bench_ceiling (LIKE records INCLUDING DEFAULTS)');
      if (!(await checkpoint(client))) checkpointed = false;
      const wal = await walPosition(client);
      const t0 = performance.now();
      await pipeline(Readable.from(chunks), client.query(copyFrom(`COPY bench_ceiling (${columns}) FROM STDIN`)));
      times.push((performance.now() - t0) / 1000);
      walBytes.push(await walSince(client, wal));
      const { rows: counted } = await client.query<{ n: number }>('SELECT count(*)::int AS n FROM bench_ceiling');
      if (counted[0]!.n !== rows) throw new Error(`COPY wrote ${counted[0]!.n} rows of ${rows}`);
    }
    await client.query('DROP TABLE bench_ceiling');
    const seconds = [...times].sort((a, b) => a - b)[Math.floor(times.length / 2)]!;
    return {
      rows,
      seconds,
      rowsPerSecond: rows / seconds,
      bytes: chunks.reduce((a, c) => a + c.length, 0),
      runs: times.map((t) => rows / t),
      walBytes,
      checkpointed,
    };
  } finally {
    await client.end();
  }
}

export interface SyncRun {
  records: number;
  /** From start to result, end to end (including any wait described by `stall`). */
  seconds: number;
  /** `seconds` less the benchmark's wait on a stuck pass (see `stall`): the pass as it runs when unstuck. */
  effectiveSeconds: number;
  /** Records per second over `effectiveSeconds`. */
  rate: number;
  /** From start until the pass's last page was committed (before it was finished). */
  pagesSeconds: number | undefined;
  /**
   * Set when the pass did not finish within `stallCapSeconds` after its last page: the benchmark then
   * ran ANALYZE and cancelled the statement it was stuck in, so the activity's retry could finish it.
   */
  stall: { waitedSeconds: number; statement: string | undefined; finishSecondsAfter: number } | undefined;
  /** Peak RSS of each worker process during the pass (bytes). */
  peakRss: (number | undefined)[];
  /** RSS of each worker process when the pass started (bytes). */
  startRss: (number | undefined)[];
  /** Whether peak RSS was reset before the pass (else it includes the worker's start-up). */
  peakReset: boolean;
  counts: { inserted: number; updated: number; unchanged: number };
  /** Where the machine's CPU went from start to result (undefined without /proc). */
  cpu: CpuUse | undefined;
  /** The WAL Postgres wrote from start to result (the pass starts right after a CHECKPOINT; see `walPosition`). */
  walBytes: number | undefined;
  /** Whether the pass started from a CHECKPOINT (see `checkpoint`). */
  checkpointed: boolean;
  /** Records the workflow's own result counted (differs from `records` after a retried slice). */
  reported: number;
}

/**
 * Unsticks a pass stuck finishing: collects statistics (this Postgres may run without autovacuum),
 * then cancels the stuck statement; the activity fails and Temporal's retry finishes the pass.
 */
async function unstick(env: MirrorEnv): Promise<string | undefined> {
  const client = new pg.Client({ connectionString: env.databaseUrl });
  await client.connect();
  try {
    const { rows } = await client.query<{ pid: number; query: string }>(
      `SELECT pid, query FROM pg_stat_activity WHERE datname = current_database() AND state = 'active' AND pid <> pg_backend_pid()
          AND application_name = 'worker' ORDER BY query_start LIMIT 1`,
    );
    await client.query('ANALYZE records');
    await client.query('ANALYZE stream_pages');
    for (const r of rows) await client.query('SELECT pg_cancel_backend($1)', [r.pid]);
    return rows[0]?.query.replace(/\s+/g, ' ').trim().slice(0, 160);
  } finally {
    await client.end();
  }
}

/**
 * Runs a full pass of the big list through the workers and times it from start to result. Watches the
 * stream's progress to know when its last page was committed; a pass that then does not finish within
 * `stallCapSeconds` (at least 20 s, else as long as its pages took) is unstuck (see `unstick`) and
 * reported as such.
 */
export async function timedFullSync(env: MirrorEnv, workers: WorkerSet, account: Linked, expected: number): Promise<SyncRun> {
  const pool = env.services.pool;
  const streamOf = async () =>
    (
      await pool.query<{ generation: number; records: number }>(
        `SELECT generation, records FROM streams WHERE account_id = $1 AND resource = $2 AND scope = ''`,
        [account.accountId, bigListResource],
      )
    ).rows[0];
  const before = (await streamOf())?.generation ?? 0;
  const checkpointed = await checkpoint(pool);
  const wal = await walPosition(pool);
  const peakReset = workers.children.map((c) => resetPeakRss(c.pid)).every(Boolean);
  const startRss = workers.children.map((c) => currentRss(c.pid));
  const meter = new CpuMeter(workers.children.map((c) => c.pid));
  const t0 = performance.now();
  const elapsed = () => (performance.now() - t0) / 1000;
  const handle = await workers.sync.start({ accountId: account.accountId, mode: 'full', resource: bigListResource });
  let done = false;
  const outcome = handle.result().then(
    (r) => ({ result: r, at: elapsed() }),
    (error: unknown) => ({ error, at: elapsed() }),
  );
  void outcome.then(() => (done = true));
  let pagesSeconds: number | undefined;
  let stall: SyncRun['stall'];
  const deadline = 30 * 60;
  while (!done) {
    await Promise.race([outcome, sleep(100)]);
    meter.sample();
    if (done) break;
    if (pagesSeconds === undefined) {
      const s = await streamOf();
      if (s && s.generation > before && s.records >= expected) pagesSeconds = elapsed();
    } else if (!stall && elapsed() - pagesSeconds > Math.max(20, pagesSeconds)) {
      const waitedSeconds = elapsed() - pagesSeconds;
      const statement = await unstick(env);
      stall = { waitedSeconds, statement, finishSecondsAfter: 0 };
    }
    if (elapsed() > deadline) {
      await handle.terminate('benchmark: full sync took over 30 minutes').catch(() => undefined);
      throw new Error(`the full sync of ${expected} records did not finish within 30 minutes`);
    }
  }
  const o = await outcome;
  meter.sample();
  const cpu = meter.use();
  const walBytes = await walSince(pool, wal);
  if ('error' in o) throw o.error instanceof Error ? o.error : new Error(String(o.error));
  const seconds = o.at;
  // Finished between two looks: the last page went in less than one poll (100 ms) before the end.
  pagesSeconds ??= seconds;
  if (stall && pagesSeconds !== undefined) stall.finishSecondsAfter = seconds - pagesSeconds - stall.waitedSeconds;
  const peak = workers.children.map((c) => peakRss(c.pid));
  const result = o.result;
  if (result.failed.length > 0) throw new Error(`sync failed: ${result.failed.map((f) => `${f.resource} ${f.scope}: ${f.error ?? ''}`).join('; ')}`);
  const synced = result.byResource[bigListResource] ?? 0;
  // After a retried slice (the unstuck pass) the workflow counts only the last attempt's records: the
  // database is the judge of what was mirrored.
  if (synced !== expected && !stall) throw new Error(`sync saw ${synced} ${bigListResource}, expected ${expected}`);
  const { rows } = await pool.query<{ inserted: number; updated: number; unchanged: number }>(
    `SELECT r.inserted, r.updated, r.unchanged FROM sync_runs r JOIN streams s ON s.id = r.stream_id
      WHERE s.account_id = $1 AND s.resource = $2 ORDER BY r.generation DESC LIMIT 1`,
    [account.accountId, bigListResource],
  );
  const live = await pool.query<{ n: number }>(`SELECT count(*)::int AS n FROM records WHERE account_id = $1 AND resource = $2 AND deleted_at IS NULL`, [
    account.accountId,
    bigListResource,
  ]);
  if (live.rows[0]!.n !== expected) throw new Error(`the mirror holds ${live.rows[0]!.n} live ${bigListResource}, expected ${expected}`);
  const effectiveSeconds = seconds - (stall?.waitedSeconds ?? 0);
  return {
    records: expected,
    seconds,
    effectiveSeconds,
    rate: expected / effectiveSeconds,
    pagesSeconds,
    stall,
    peakRss: peak,
    startRss,
    peakReset,
    counts: rows[0] ?? { inserted: 0, updated: 0, unchanged: 0 },
    cpu,
    walBytes,
    checkpointed,
    reported: synced,
  };
}

export interface PageServing {
  pages: number;
  p50: number | null;
  p99: number | null;
  max: number | null;
}

/** Scenario 7: 1000-record pages at random offsets, one at a time, timed to the last byte. */
export async function pageServing(env: MirrorEnv, account: Linked, records: number, samples: number): Promise<PageServing> {
  const headers = { ...env.upstreamHeaders, 'account-token': account.accountToken, 'include-source-data': 'true' };
  const pages = Math.max(1, Math.floor(records / perPage));
  const get = async (page: number) => {
    const t0 = performance.now();
    const res = await fetch(`${env.sandbox.url}/${bigListResource}?page=${page}&per_page=${perPage}`, { headers });
    await res.arrayBuffer();
    if (!res.ok) throw new Error(`sandbox page ${page}: ${res.status}`);
    return performance.now() - t0;
  };
  for (let i = 0; i < 5; i++) await get(1 + (i % pages)); // warm-up
  const times: number[] = [];
  for (let i = 0; i < samples; i++) times.push(await get(1 + Math.floor(Math.random() * pages)));
  return { pages: samples, p50: percentile(times, 50), p99: percentile(times, 99), max: Math.max(...times) };
}

/** One point of the scale curve in an env of its own: a fresh database, sandbox and worker. */
export async function scalePoint(shared: BenchShared, records: number): Promise<SyncRun> {
  const env = await Env.start(shared, { name: `scale-${records}`, sandbox: { sizes: bigListSizes(records) }, assumeLimits: false });
  try {
    const workers = await env.startWorkers(1);
    const account = await env.link(bigListSystem, `bench-scale-${records}`);
    return await timedFullSync(env, workers, account, records);
  } finally {
    await env.close();
  }
}
