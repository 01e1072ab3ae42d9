// `/metrics` in Prometheus' text format: this process's own counters (upstream requests and 429s per
// source system, API latency) and, derived from Postgres at scrape time, what the whole cluster did
// (records written, pages, stream lag, rate budgets, inbox, outbound deliveries). Behind the mirror's
// client credentials or OPERATOR_TOKEN (Prometheus: `authorization: { credentials: <token> }`).
import type { FastifyInstance, FastifySchema } from 'fastify';
import { answer } from '../route-schema.ts';
import type { UpstreamClient } from '../../connectors/upstream-client.ts';
import { registerUpstreamClassMetrics } from '../../connectors/upstream-metrics.ts';
import { databaseMetrics, renderFamilies } from '../../mirror/ops/metrics.ts';
import { freshnessMetrics, type FreshnessSettings } from '../../mirror/streams/freshness.ts';
import { createProcessMetrics, type ProcessMetrics } from '../../lib/process-metrics.ts';
import type { Pool } from '../../mirror/db/pool.ts';
import type { Authenticator } from '../auth.ts';
import { operatorGuard } from '../status-page/auth.ts';

interface MetricsRouteDeps {
  pool: Pool;
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
    return reply.header('cache-control', 'no-store').type(metrics.registry.contentType).send(`${own}\n${shared}`);
  });
  return metrics;
}
