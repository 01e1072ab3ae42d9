// Scenario 15: the read API with one streaming replica against the primary alone, side by side in one
// run. A primary and a standby are started on this machine (test/helpers/replica-cluster.ts); the
// mirror syncs a few accounts' vendors into the primary; two API processes serve them, one with
// DATABASE_REPLICA_URLS, one without. Each is loaded in turn with single-object GETs and list pages of
// the reading accounts while another account writes through it and reads each write right after
// (read-your-writes: a read that does not show its write is a violation). Measured: req/s and p99 of
// the reads both ways, the share of reads the replica answered (the API's own count), the share of
// transactions each server ran meanwhile (pg_stat_database), and the violations.
import { setTimeout as sleep } from 'node:timers/promises';
import pg from 'pg';
import { freePort } from '../../bin/test-runner.ts';
import { startReplicaCluster } from '../../test/helpers/replica-cluster.ts';
import { MirrorEnv, type BenchShared, type Linked } from '../lib/mirror-env.ts';
import { load, type LoadResult } from './read-api.ts';

export interface ReplicaSide {
  reads: LoadResult;
  /** Reads the API answered from the replica / all it answered from a server (its mirror_reads_total). */
  replicaShare: number | null;
  /** Transactions the replica ran / both servers ran while the side was loaded (reads, writes, probes, control plane). */
  transactionShare: number;
  pairs: number;
  violations: number;
  fallbacks: Record<string, number>;
}

export interface ReadReplicasRun {
  primaryOnly: ReplicaSide;
  withReplica: ReplicaSide;
  vendors: number;
}

const readers = 3;

/** Transactions committed or rolled back in the mirror's database of a server so far. */
async function transactions(url: string): Promise<number> {
  const c = new pg.Client({ connectionString: url });
  await c.connect();
  try {
    const { rows } = await c.query<{ n: string }>('SELECT (xact_commit + xact_rollback)::text AS n FROM pg_stat_database WHERE datname = current_database()');
    return Number(rows[0]!.n);
  } finally {
    await c.end();
  }
}

/** `mirror_reads_total` and `mirror_read_fallbacks_total` of an API process. */
async function readCounts(url: string, headers: Record<string, string>): Promise<{ byServer: Map<string, number>; fallbacks: Record<string, number> }> {
  const text = await (await fetch(`${url}/metrics`, { headers })).text();
  const byServer = new Map<string, number>();
  const fallbacks: Record<string, number> = {};
  for (const m of text.matchAll(/^mirror_reads_total\{server="([^"]+)"\} (\S+)$/gm)) byServer.set(m[1]!, Number(m[2]));
  for (const m of text.matchAll(/^mirror_read_fallbacks_total\{reason="([^"]+)"\} (\S+)$/gm)) fallbacks[m[1]!] = Number(m[2]);
  return { byServer, fallbacks };
}

export async function readReplicas(shared: BenchShared, o: { vendors: number; seconds: number; connections: number }): Promise<ReadReplicasRun> {
  const cluster = await startReplicaCluster();
  try {
    const env = await MirrorEnv.start(shared, {
      name: 'replicas',
      sandbox: { sizes: { projects: 2, vendors: o.vendors } },
      assumeLimits: false,
      databaseUrl: cluster.primary.url,
      env: { MIRROR_RESOURCES: 'projects,vendors' },
    });
    try {
      const set = await env.startWorkers(1);
      const accounts: Linked[] = [];
      for (let i = 0; i <= readers; i++) {
        const a = await env.link('buildpro', `bench-replicas-${i}`);
        const r = await (await set.sync.start({ accountId: a.accountId, mode: 'full' })).result();
        if (r.failed.length > 0) throw new Error(`the first pass of account ${i} failed: ${JSON.stringify(r.failed)}`);
        accounts.push(a);
      }
      // The reads alone: no pass runs while they are measured.
      await set.stop();
      await cluster.caughtUp();
      const [writer, ...reading] = accounts as [Linked, ...Linked[]];
      const idsOf = async (a: Linked, limit: number) =>
        (
          await env.services.pool.query<{ id: string }>(
            `SELECT id FROM records WHERE account_id = $1 AND resource = 'vendors' AND deleted_at IS NULL ORDER BY ordinal LIMIT $2`,
            [a.accountId, limit],
          )
        ).rows.map((r) => r.id);
      const readerIds = await Promise.all(reading.map((a) => idsOf(a, 2000)));
      const writerIds = await idsOf(writer, 4);
      const pages = Math.max(1, Math.floor(o.vendors / 100));
      const pick = <T>(xs: readonly T[]) => xs[Math.floor(Math.random() * xs.length)]!;
      // Autocannon sends one set of headers: the reading accounts take turns by connection instead of by request.
      const operator = env.mirrorHeaders(writer.accountToken);

      const side = async (name: string, extra: Record<string, string>): Promise<ReplicaSide> => {
        const api = await env.startApiProcess(name, await freePort(), extra);
        try {
          // Warm up both servers' caches for this process.
          for (const [k, a] of reading.entries()) await load(api.url, env.mirrorHeaders(a.accountToken), () => `/vendors/${pick(readerIds[k]!)}`, 1, 2);
          const before = await Promise.all([transactions(cluster.primary.url), transactions(cluster.standby.url), readCounts(api.url, operator)]);
          // The writer: write-then-read pairs, one at a time per vendor, all along the reads.
          let stop = false;
          let pairs = 0;
          let violations = 0;
          const writerLoops = writerIds.map(async (id) => {
            for (let n = 0; !stop; n++) {
              const name = `Vendor ${id.slice(0, 8)} write ${n}`;
              const w = await fetch(`${api.url}/vendors/${id}`, {
                method: 'PATCH',
                headers: { ...env.mirrorHeaders(writer.accountToken), 'content-type': 'application/json' },
                body: JSON.stringify({ name }),
              });
              await w.arrayBuffer();
              if (w.status !== 200) throw new Error(`a write through the mirror answered ${w.status}`);
              const r = await fetch(`${api.url}${n % 2 ? `/vendors/${id}` : '/vendors?per_page=100'}`, { headers: env.mirrorHeaders(writer.accountToken) });
              const body = (await r.json()) as { id: string; name: string } | { data: { id: string; name: string }[] };
              const seen = 'data' in body ? body.data.find((v) => v.id === id)?.name : body.name;
              pairs++;
              if (seen !== name) violations++;
            }
          });
          // The reads: each reading account on its share of the connections, single objects and list pages.
          const per = Math.max(1, Math.floor(o.connections / reading.length));
          const results = await Promise.all(
            reading.map((a, k) =>
              load(
                api.url,
                env.mirrorHeaders(a.accountToken),
                () => (Math.random() < 0.5 ? `/vendors/${pick(readerIds[k]!)}` : `/vendors?page=${1 + Math.floor(Math.random() * pages)}&per_page=100`),
                o.seconds,
                per,
              ),
            ),
          );
          stop = true;
          await Promise.all(writerLoops);
          const after = await Promise.all([transactions(cluster.primary.url), transactions(cluster.standby.url), readCounts(api.url, operator)]);
          const reads: LoadResult = {
            rps: results.reduce((n, r) => n + r.rps, 0),
            // The worst account's percentiles: what a reader sees at worst.
            p50: Math.max(...results.map((r) => r.p50)),
            p99: Math.max(...results.map((r) => r.p99)),
            requests: results.reduce((n, r) => n + r.requests, 0),
            non2xx: results.reduce((n, r) => n + r.non2xx, 0),
            errors: results.reduce((n, r) => n + r.errors, 0),
          };
          let replicaReads = 0;
          let allReads = 0;
          for (const [server, n] of after[2].byServer) {
            const d = n - (before[2].byServer.get(server) ?? 0);
            allReads += d;
            if (server !== 'primary') replicaReads += d;
          }
          const primaryTx = after[0] - before[0];
          const replicaTx = after[1] - before[1];
          const fallbacks: Record<string, number> = {};
          for (const [k, v] of Object.entries(after[2].fallbacks)) fallbacks[k] = v - (before[2].fallbacks[k] ?? 0);
          return {
            reads,
            replicaShare: allReads ? replicaReads / allReads : null,
            transactionShare: replicaTx / Math.max(1, primaryTx + replicaTx),
            pairs,
            violations,
            fallbacks,
          };
        } finally {
          await api.child.stop();
        }
      };

      const primaryOnly = await side('api-primary', {});
      await sleep(500);
      const withReplica = await side('api-replica', { DATABASE_REPLICA_URLS: cluster.standby.url });
      return { primaryOnly, withReplica, vendors: o.vendors };
    } finally {
      await env.close();
    }
  } finally {
    await cluster.stop();
  }
}
