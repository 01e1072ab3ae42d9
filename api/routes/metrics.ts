// `/metrics` in Prometheus' text format: this process's own counters (upstream requests and 429s per
// source system, API latency) and, derived from Postgres at scrape time, what the whole cluster did
// (records written, pages, stream lag, rate budgets, inbox, outbound deliveries). Behind the mirror's
// client credentials or OPERATOR_TOKEN (Prometheus: `authorization: { credentials: <token> }`).
import type { FastifyInstance, FastifySchema } from 'fastify';
import { answer } from '../route-schema.ts';
import type { UpstreamClient } from '../../connectors/upstream-client.ts';
import { registerUpstreamClassMetrics } from '../../connectors/upstream-metrics.ts';
import { databaseMetrics, renderFamilies, type Family } from '../../mirror/ops/metrics.ts';
import type { ReadRouter, ReadRouting } from '../../mirror/reads/read-router.ts';
import { freshnessMetrics, type FreshnessSettings } from '../../mirror/streams/freshness.ts';
import { createProcessMetrics, type ProcessMetrics } from '../../lib/process-metrics.ts';
import type { Pool } from '../../mirror/db/pool.ts';
import type { Authenticator } from '../auth.ts';
import { operatorGuard } from '../status-page/auth.ts';

interface MetricsRouteDeps {
  pool: Pool;
  /** This process's reads by server, replicas' lag and fallbacks to the primary. */
  router?: ReadRouter;
  auth: Authenticator;
  /** The upstream client of this process, whose requests are counted. */
  upstream?: UpstreamClient;
  operator?: { token?: string };
  /** The freshness views' settings: with them, each list's staleness and the target's verdict are exported. */
  freshness?: FreshnessSettings;
  /** This process's registry; a fresh one by default. */
  metrics?: ProcessMetrics;
  /** Postgres-derived figures are computed at most this often (default 5 s): scrapes stay cheap. */
  cacheMs?: number;
}

export function registerMetricsRoutes(app: FastifyInstance, deps: MetricsRouteDeps): ProcessMetrics {
  const metrics = deps.metrics ?? createProcessMetrics({ process: 'api' });
  const stopObserving = deps.upstream?.observe((o) => metrics.observeUpstream(o));
  const stopByClass = deps.upstream && registerUpstreamClassMetrics(metrics.registry, deps.upstream);
  app.addHook('onClose', async () => {
    stopObserving?.();
    stopByClass?.();
  });
  app.addHook('onResponse', (request, reply, done) => {
    metrics.observeApi({ method: request.method, route: request.routeOptions.url, status: reply.statusCode, seconds: reply.elapsedTime / 1000 });
    done();
  });

  const cacheMs = deps.cacheMs ?? 5000;
  let cached: { at: number; text: Promise<string> } | undefined;
  const fromDatabase = () => {
    if (!cached || Date.now() - cached.at > cacheMs) {
      const freshness = deps.freshness;
      const text = Promise.all([databaseMetrics(deps.pool), freshness ? freshnessMetrics(deps.pool, freshness) : []]).then(([db, fresh]) =>
        renderFamilies([...db, ...fresh]),
      );
      cached = { at: Date.now(), text };
      text.catch(() => (cached = undefined));
    }
    return cached.text;
  };

  const preHandler = operatorGuard({ auth: deps.auth, token: deps.operator?.token });
  const schema = {
    summary: 'Prometheus metrics',
    description:
      'Upstream requests and 429s per source system and API latency (this process), records written, pages, stream lag, governor budgets, inbox, outbound deliveries (from Postgres).',
    tags: ['operator'],
    access: 'operator',
    response: { 200: answer('Prometheus text format 0.0.4', 'text/plain') },
  } satisfies FastifySchema;
  app.get('/metrics', { preHandler, schema }, async (_request, reply) => {
    const [own, shared] = await Promise.all([metrics.registry.metrics(), fromDatabase()]);
    const reads = deps.router ? renderFamilies(readRoutingFamilies(deps.router.status())) : '';
    return reply.header('cache-control', 'no-store').type(metrics.registry.contentType).send(`${own}\n${shared}${reads}`);
  });
  return metrics;
}

/**
 * This API process's reads by server (DATABASE_REPLICA_URLS): each replica's lag and state, the reads
 * each server answered and the reads that went to the primary although replicas are configured.
 */
function readRoutingFamilies(routing: ReadRouting): Family[] {
  const replica = (name: string) => ({ replica: name });
  return [
    {
      name: 'mirror_replica_up',
      type: 'gauge',
      help: 'Whether the replica answers and is measured (1), or is skipped until a probe finds it again (0).',
      samples: routing.replicas.map((r) => ({ labels: replica(r.name), value: r.up ? 1 : 0 })),
    },
    {
      name: 'mirror_replica_lag_seconds',
      type: 'gauge',
      help: `How far the replica's replay is behind the primary when last measured; a replica past MIRROR_REPLICA_MAX_LAG_MS (${routing.maxLagMs} ms) is not read from.`,
      samples: routing.replicas.filter((r) => r.lagMs !== null).map((r) => ({ labels: replica(r.name), value: r.lagMs! / 1000 })),
    },
    {
      name: 'mirror_reads_total',
      type: 'counter',
      help: 'Reads of this API process by the server that answered them (primary, or a replica).',
      samples: [
        { labels: { server: 'primary' }, value: routing.primaryReads },
        ...routing.replicas.map((r) => ({ labels: { server: r.name }, value: r.reads })),
      ],
    },
    {
      name: 'mirror_read_fallbacks_total',
      type: 'counter',
      help: "Reads sent to the primary although replicas are configured: every replica lagging, down, not yet holding the account's last write (not_replayed), or failed mid-read.",
      samples: routing.replicas.length === 0 ? [] : Object.entries(routing.fallbacks).map(([reason, n]) => ({ labels: { reason }, value: n })),
    },
    {
      name: 'mirror_replica_failed_queries_total',
      type: 'counter',
      help: 'Queries of a replica that failed (it was down, restarting or cancelled them) and were answered by the primary instead.',
      samples: routing.replicas.map((r) => ({ labels: replica(r.name), value: r.failedQueries })),
    },
  ];
}
