// The upstream client's figures by class of request, for a process's Prometheus registry:
// how many requests the sync and the applications sent, and what the governor made each class wait
// for (a concurrency slot, or a send slot: the window's pace, a spent window, the sync's share) or
// refused. Counted in this process; the API process holds the applications' calls, workers the sync's.
import { Counter, type Registry } from 'prom-client';
import type { Priority } from './governor.ts';
import type { UpstreamClient } from './upstream-client.ts';

/** How the figures name a class: the sync (background work) and the applications (interactive calls). */
const className: Record<Priority, string> = { background: 'sync', interactive: 'application' };

/** Registers the by-class figures of `client` on `registry`; returns the removal of its observer. */
export function registerUpstreamClassMetrics(registry: Registry, client: UpstreamClient): () => void {
  const requests = new Counter({
    name: 'mirror_upstream_requests_by_class_total',
    help: 'Requests this process sent to the upstream, by class: sync (background work) or application (forwarded calls).',
    labelNames: ['class'] as const,
    registers: [registry],
  });
  const usage = () => client.usage();
  new Counter({
    name: 'mirror_governor_granted_total',
    help: "Requests this process's rate governor let go, by class.",
    labelNames: ['class'] as const,
    registers: [registry],
    collect() {
      this.reset();
      const u = usage();
      if (u) for (const p of ['background', 'interactive'] as const) this.inc({ class: className[p] }, u[p].granted);
    },
  });
  new Counter({
    name: 'mirror_governor_refused_total',
    help: 'Application calls answered 429 at once by the governor: their send slot was further than MIRROR_INTERACTIVE_MAX_WAIT_MS.',
    labelNames: ['class'] as const,
    registers: [registry],
    collect() {
      this.reset();
      const u = usage();
      if (u) for (const p of ['background', 'interactive'] as const) this.inc({ class: className[p] }, u[p].refused);
    },
  });
  new Counter({
    name: 'mirror_governor_wait_seconds_total',
    help: 'Time requests of this process waited in the rate governor, by class and reason: concurrency (a concurrency cap) or rate (the window pace, a spent window or a 429, and for the sync its share of the window).',
    labelNames: ['class', 'reason'] as const,
    registers: [registry],
    collect() {
      this.reset();
      const u = usage();
      if (!u) return;
      for (const p of ['background', 'interactive'] as const) {
        this.inc({ class: className[p], reason: 'concurrency' }, u[p].waitedForConcurrencyMs / 1000);
        this.inc({ class: className[p], reason: 'rate' }, u[p].waitedForRateMs / 1000);
      }
    },
  });
  return client.observe((o) => requests.inc({ class: className[o.priority] }));
}
