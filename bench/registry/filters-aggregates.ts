// [11] A source_data filter and a grouped aggregate through the read API against raw SQL on the same table.
import { formatRequestCpu, settledText } from '../lib/processes.ts';
import { fmt, info, judged } from '../lib/report.ts';
import { filtersAggregates } from '../scenarios/filters-aggregates.ts';
import type { Scenario } from './scenario.ts';

export const filtersAggregatesScenario: Scenario = {
  number: 11,
  label: 'filters and aggregates',
  setup: 'main',
  api: true,
  async run({ o, rows, notes, results: earlier }, { env: main, account }) {
    if (!earlier.first) throw new Error('needs the full sync (scenario 2)');
    const { comparisons: results, settledMs } = await filtersAggregates(main, account, {
      seconds: o.readSeconds,
      warmupSeconds: o.warmupSeconds,
      rounds: o.rounds,
      connections: o.connections,
    });
    notes.push(`[11] ${settledText(settledMs)}`);
    for (const r of results) {
      const label = r.kind === 'filter' ? 'source_data filter, list page' : `aggregate over ${o.records.toLocaleString('en-US')} records`;
      rows.push(
        judged(
          {
            scenario: 11,
            figure: `${label}: req/s`,
            value: r.mirror.rps,
            unit: 'req/s',
            reference: { label: 'raw SQL baseline', value: r.baseline.rps, unit: 'req/s' },
            ratio: r.mirror.rps / r.baseline.rps,
            target: '>= 0.8',
          },
          { min: 0.8, on: 'ratio' },
        ),
      );
      rows.push(
        info({
          scenario: 11,
          figure: `${label}: p99`,
          value: r.mirror.p99,
          unit: 'ms',
          reference: { label: 'raw SQL baseline', value: r.baseline.p99, unit: 'ms' },
          ratio: r.baseline.p99 / r.mirror.p99,
        }),
      );
      notes.push(
        `[11] ${label} (${r.query}; ${r.rows} rows, equal on both sides): mirror ${fmt(r.mirror.rps)} req/s p50 ${r.mirror.p50} ms p99 ${r.mirror.p99} ms (${r.mirror.non2xx} non-2xx, ${r.mirror.errors} errors; ${formatRequestCpu(r.mirror.cpu)}); raw SQL ${fmt(r.baseline.rps)} req/s p50 ${r.baseline.p50} ms p99 ${r.baseline.p99} ms (${formatRequestCpu(r.baseline.cpu)}). Best of ${o.rounds} x ${o.readSeconds} s (the best round's rate, the lowest p99 of the rounds).`,
      );
    }
  },
};
