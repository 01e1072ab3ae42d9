// Scenario 11 (part 2): on [5]'s list of customers, a `source_data` filter through the read
// API and a grouped aggregate through `/mirror/aggregates`, each against a raw `pg` + `node:http`
// baseline answering the same query on the same table (bench/filters-baseline-server.ts): HTTP on
// both sides, the same result rows checked first, req/s and p99 measured with autocannon.
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import autocannon from 'autocannon';
import { freePort } from '../../bin/test-runner.ts';
import type { Linked, MirrorEnv } from '../lib/mirror-env.ts';
import { benchNodeArgs, keptRound, logTail, spawnNode, untilPostgresIdle, withRequestCpu, type Child, type RequestCpu } from '../lib/processes.ts';

export interface Load {
  rps: number;
  p50: number;
  p99: number;
  non2xx: number;
  errors: number;
  /** What a request cost in CPU, per side (bench/lib/processes.ts withRequestCpu). */
  cpu?: RequestCpu;
}

export interface FilterAggregateComparison {
  kind: 'filter' | 'aggregate';
  /** What was asked, for the notes. */
  query: string;
  /** Rows (filter: records on the page; aggregate: groups) both sides answered. */
  rows: number;
  mirror: Load;
  baseline: Load;
}

async function load(url: string, path: string, headers: Record<string, string>, seconds: number, connections: number, pid?: number): Promise<Load> {
  const { result: r, cpu } = await withRequestCpu(
    pid,
    () => autocannon({ url: `${url}${path}`, connections, duration: seconds, headers }),
    (x) => x.requests.total,
  );
  return { rps: r['2xx'] / r.duration, p50: r.latency.p50, p99: r.latency.p99, non2xx: r.non2xx, errors: r.errors, ...(cpu ? { cpu } : {}) };
}

async function startBaseline(env: MirrorEnv, account: Linked, wrapped: boolean): Promise<{ url: string; child: Child }> {
  const port = await freePort();
  const child = spawnNode(
    'filters-baseline',
    [...benchNodeArgs(), '--import', 'tsx', 'bench/filters-baseline-server.ts'],
    {
      ...process.env,
      BASELINE_PORT: String(port),
      DATABASE_URL: env.databaseUrl,
      BASELINE_ACCOUNT_ID: account.accountId,
      BASELINE_SOURCE_WRAPPED: wrapped ? '1' : '0',
    },
    join(env.shared.logDir, 'filters-baseline.log'),
  );
  const url = `http://127.0.0.1:${port}`;
  const deadline = Date.now() + 30_000;
  for (;;) {
    if (child.process.exitCode !== null) throw new Error(`the filters baseline exited at start:\n${logTail(child.logFile)}`);
    if (
      await fetch(`${url}/aggregate`).then(
        (r) => r.ok,
        () => false,
      )
    )
      return { url, child };
    if (Date.now() > deadline) throw new Error(`the filters baseline did not answer:\n${logTail(child.logFile)}`);
    await sleep(100);
  }
}

export async function filtersAggregates(
  env: MirrorEnv,
  account: Linked,
  options: { seconds: number; warmupSeconds: number; rounds: number; connections: number },
): Promise<{ comparisons: FilterAggregateComparison[]; settledMs: number[] }> {
  if (!env.api) throw new Error('the read API is not running');
  // The source object's key that carries the status (its name is the source system's), and whether
  // the object is stored in the wrapper {path, content_type, data}.
  const { rows } = await env.services.pool.query<{ key: string; wrapped: boolean; value: string }>(
    `SELECT e.key, (r.source_data ? 'data' AND r.source_data ? 'content_type') AS wrapped, e.value #>> '{}' AS value
       FROM records r, jsonb_each(CASE WHEN r.source_data ? 'data' AND r.source_data ? 'content_type' THEN r.source_data->'data' ELSE r.source_data END) e
      WHERE r.account_id = $1 AND r.resource = 'customers' AND r.deleted_at IS NULL AND jsonb_typeof(e.value) = 'string' AND e.value #>> '{}' = r.data->>'status'
      ORDER BY r.ordinal LIMIT 1`,
    [account.accountId],
  );
  const found = rows[0];
  if (!found) throw new Error('no customer carries its status in its source object');
  const headers = env.mirrorHeaders(account.accountToken);
  const baseline = await startBaseline(env, account, found.wrapped);
  try {
    const filter = encodeURIComponent(JSON.stringify([{ field: `source_data.${found.key}`, operator: '=', value: found.value }]));
    const cases = [
      {
        kind: 'filter' as const,
        query: `source_data.${found.key} = ${JSON.stringify(found.value)}, page 1 of 100`,
        mirror: `/customers?per_page=100&filters=${filter}`,
        baseline: `/filter?key=${encodeURIComponent(found.key)}&value=${encodeURIComponent(found.value)}`,
      },
      {
        kind: 'aggregate' as const,
        query: 'count and sum of balance, grouped by status',
        mirror: '/mirror/aggregates/customers?count&sum=balance&group_by=status&limit=1000',
        baseline: '/aggregate',
      },
    ];
    const out: FilterAggregateComparison[] = [];
    const settled: number[] = [];
    for (const c of cases) {
      // The same answer first: the same records in the same order, or the same groups, counts and sums.
      const [m, b] = await Promise.all([
        fetch(`${env.api.url}${c.mirror}`, { headers }).then(async (r) => ({
          status: r.status,
          body: (await r.json()) as { data: Record<string, unknown>[] },
        })),
        fetch(`${baseline.url}${c.baseline}`).then(async (r) => ({ status: r.status, body: (await r.json()) as { data: Record<string, unknown>[] } })),
      ]);
      if (m.status !== 200 || b.status !== 200) throw new Error(`${c.kind}: the mirror answered ${m.status}, the baseline ${b.status}`);
      const key = (e: Record<string, unknown>) =>
        c.kind === 'filter'
          ? String(e.id)
          : `${JSON.stringify(e.group)}:${String(e.count)}:${Number((e.sum as { balance: number | null }).balance).toFixed(2)}`;
      const mk = m.body.data.map(key);
      const bk = b.body.data.map(key);
      if (c.kind === 'aggregate') {
        bk.sort();
        mk.sort();
      }
      if (mk.length === 0 || mk.join('\n') !== bk.join('\n'))
        throw new Error(`${c.kind}: the mirror and the baseline answer differently (${mk.length} and ${bk.length} rows)`);
      // Aggregates read every record per request: fewer connections than the two cores can serve are pointless.
      const connections = c.kind === 'aggregate' ? Math.min(options.connections, 4) : options.connections;
      await load(env.api.url, c.mirror, headers, options.warmupSeconds, connections);
      await load(baseline.url, c.baseline, {}, options.warmupSeconds, connections);
      let bestMirror: Load | undefined;
      let bestBaseline: Load | undefined;
      for (let round = 0; round < options.rounds; round++) {
        // Alternate which goes first so drift in the machine's load favours neither.
        for (const who of round % 2 === 0 ? (['baseline', 'mirror'] as const) : (['mirror', 'baseline'] as const)) {
          // Each from a Postgres with nothing left running of the load before (an aggregate runs for seconds).
          settled.push(await untilPostgresIdle(env.services.pool));
          const r =
            who === 'mirror'
              ? await load(env.api.url, c.mirror, headers, options.seconds, connections, env.api.child.process.pid)
              : await load(baseline.url, c.baseline, {}, options.seconds, connections, baseline.child.process.pid);
          if (who === 'mirror') bestMirror = keptRound(bestMirror, r);
          else bestBaseline = keptRound(bestBaseline, r);
        }
      }
      out.push({ kind: c.kind, query: c.query, rows: mk.length, mirror: bestMirror!, baseline: bestBaseline! });
    }
    return { comparisons: out, settledMs: settled };
  } finally {
    await baseline.child.stop();
  }
}
