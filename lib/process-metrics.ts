// Metrics that live in one process: the upstream requests it made (rate and 429s per source system),
// its API latency, and Node's own figures. Each process exports its registry: the API at /metrics,
// a worker at `mirror worker --metrics-port`. What Postgres holds for the whole cluster is added by
// mirror/ops/metrics.ts at scrape time. Here in lib/: connectors/ and api/ feed it, mirror/ only renders
// beside it, and none of them has to import another for it.
import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';
import { buildInfo } from './build-info.ts';

/** What the registry counts of one upstream attempt (connectors/upstream-client.ts's observation has more). */
interface UpstreamAttempt {
  sourceSystem: string | undefined;
  /** The upstream's HTTP status; undefined when no answer came (timeout, reset, refused). */
  status: number | undefined;
  durationMs: number;
}

export interface ProcessMetrics {
  registry: Registry;
  /** Counts one upstream attempt (an UpstreamClient observer). */
  observeUpstream(o: UpstreamAttempt): void;
  /** Times one API request, labelled by its route pattern (never its URL: ids would explode the series). */
  observeApi(r: { method: string; route: string | undefined; status: number; seconds: number }): void;
}

function statusClass(status: number | undefined): string {
  if (status === undefined) return 'error';
  if (status === 429) return '429';
  return `${Math.floor(status / 100)}xx`;
}

export function createProcessMetrics(options: { process: string; defaultMetrics?: boolean }): ProcessMetrics {
  const registry = new Registry();
  registry.setDefaultLabels({ process: options.process });
  if (options.defaultMetrics !== false) collectDefaultMetrics({ register: registry, prefix: 'mirror_node_' });
  const requests = new Counter({
    name: 'mirror_upstream_requests_total',
    help: 'Requests this process sent to the upstream, by source system and status class (429 apart; "error" when no answer came).',
    labelNames: ['source_system', 'status'] as const,
    registers: [registry],
  });
  const rateLimited = new Counter({
    name: 'mirror_upstream_rate_limited_total',
    help: 'Upstream answers 429 (rate limited) to this process, by source system.',
    labelNames: ['source_system'] as const,
    registers: [registry],
  });
  const upstreamSeconds = new Histogram({
    name: 'mirror_upstream_request_duration_seconds',
    help: 'Time from sending an upstream request to its answer, by source system.',
    labelNames: ['source_system'] as const,
    buckets: [0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30],
    registers: [registry],
  });
  const apiSeconds = new Histogram({
    name: 'mirror_api_request_duration_seconds',
    help: "Time the mirror's API took to answer, by route pattern and status class.",
    labelNames: ['method', 'route', 'status'] as const,
    buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 10],
    registers: [registry],
  });
  // The release this process runs (lib/build-info.ts): a constant 1, its labels are the information.
  const build = new Gauge({
    name: 'mirror_build_info',
    help: 'The release this process runs: package version and git commit ("unknown" when neither MIRROR_COMMIT nor git says).',
    labelNames: ['version', 'commit'] as const,
    registers: [registry],
  });
  const info = buildInfo();
  build.set({ version: info.version, commit: info.commit ?? 'unknown' }, 1);
  return {
    registry,
    observeUpstream(o) {
      const sourceSystem = o.sourceSystem ?? 'none';
      requests.inc({ source_system: sourceSystem, status: statusClass(o.status) });
      if (o.status === 429) rateLimited.inc({ source_system: sourceSystem });
      upstreamSeconds.observe({ source_system: sourceSystem }, o.durationMs / 1000);
    },
    observeApi(r) {
      apiSeconds.observe({ method: r.method, route: r.route ?? 'unmatched', status: statusClass(r.status) }, r.seconds);
    },
  };
}
