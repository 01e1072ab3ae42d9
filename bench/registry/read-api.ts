// [5] The read API against a raw pg + node:http baseline of the same SQL: single objects, list pages, random pages against page 1.
import { formatRequestCpu, settledText } from '../lib/processes.ts';
import { fmt, info, judged } from '../lib/report.ts';
import { readApi } from '../scenarios/read-api.ts';
import type { Scenario } from './scenario.ts';

export const readApiScenario: Scenario = {
  number: 5,
  label: 'read API',
  setup: 'main',
  api: true,
  async run({ o, rows, notes, results: earlier }, { env: main, account }) {
    const { first } = earlier;
    if (!first) throw new Error('needs the full sync (scenario 2)');
    const {
      comparisons: results,
      ranges,
      settledMs,
    } = await readApi(main, account, {
      seconds: o.readSeconds,
      warmupSeconds: o.warmupSeconds,
      rounds: o.rounds,
      connections: o.connections,
      records: o.records,
    });
    notes.push(`[5] ${settledText(settledMs)}`);
    for (const r of results) {
      const label = r.kind === 'single' ? 'single-object GET' : r.kind === 'list' ? '100-record list GET' : '100-record list GET, page 1';
      const base = { label: 'baseline', unit: 'req/s' };
      rows.push(
        judged(
          {
            scenario: 5,
            figure: `read API ${label}: req/s`,
            value: r.mirror.rps,
            unit: 'req/s',
            reference: { ...base, value: r.baseline.rps },
            ratio: r.mirror.rps / r.baseline.rps,
            target: '>= 0.8',
          },
          { min: 0.8, on: 'ratio' },
        ),
      );
      rows.push(
        judged(
          {
            scenario: 5,
            figure: `read API ${label}: p99`,
            value: r.mirror.p99,
            unit: 'ms',
            reference: { label: 'baseline', value: r.baseline.p99, unit: 'ms' },
            ratio: r.baseline.p99 / r.mirror.p99,
            target: '>= 0.8 (baseline/mirror)',
          },
          { min: 0.8, on: 'ratio' },
        ),
      );
      if (r.kind === 'single')
        rows.push(
          judged(
            { scenario: 5, figure: 'read API single-object GET: req/s (absolute)', value: r.mirror.rps, unit: 'req/s', target: '> 2,500 req/s' },
            { min: 2500, on: 'value' },
          ),
        );
      // Any page is to be as fast as the first: random pages of the list against its page 1, same run.
      const pageOne = results.find((x) => x.kind === 'first');
      if (r.kind === 'list' && pageOne) {
        rows.push(
          judged(
            {
              scenario: 5,
              figure: 'random list pages: req/s',
              value: r.mirror.rps,
              unit: 'req/s',
              reference: { label: 'page 1', value: pageOne.mirror.rps, unit: 'req/s' },
              ratio: r.mirror.rps / pageOne.mirror.rps,
              target: '>= 0.8',
            },
            { min: 0.8, on: 'ratio' },
          ),
        );
        rows.push(
          judged(
            {
              scenario: 5,
              figure: 'random list pages: p99',
              value: r.mirror.p99,
              unit: 'ms',
              reference: { label: 'page 1', value: pageOne.mirror.p99, unit: 'ms' },
              ratio: pageOne.mirror.p99 / r.mirror.p99,
              target: '>= 0.8 (page 1/random)',
            },
            { min: 0.8, on: 'ratio' },
          ),
        );
        rows.push(
          judged(
            { scenario: 5, figure: 'random list pages: req/s (absolute)', value: r.mirror.rps, unit: 'req/s', target: '>= 1,000 req/s' },
            { min: 1000, on: 'value' },
          ),
        );
        // Not judged: what Postgres itself makes of a random page against page 1 here (the same
        // rows as raw ranges of the index, through the baseline), the floor of the ratios above.
        rows.push(
          ...(['rps', 'p99'] as const).map((m) => {
            const unit = m === 'rps' ? 'req/s' : 'ms';
            return info({
              scenario: 5,
              figure: `raw SQL ranges, random place: ${m === 'rps' ? 'req/s' : 'p99'}`,
              value: ranges.random[m],
              unit,
              reference: { label: 'start', value: ranges.first[m], unit },
              // Higher is better, as above: the rate random/start, the latency start/random.
              ratio: m === 'rps' ? ranges.random.rps / ranges.first.rps : ranges.first.p99 / ranges.random.p99,
              target: 'reference',
            });
          }),
        );
        notes.push(
          `[5] raw SQL ranges (the baseline, by=ordinal: the page's rows as a range of the list's index, no positions to look up, no ids checked): at random places ${fmt(ranges.random.rps)} req/s p50 ${ranges.random.p50} ms p99 ${ranges.random.p99} ms (${formatRequestCpu(ranges.random.cpu)}); at the start ${fmt(ranges.first.rps)} req/s p50 ${ranges.first.p50} ms p99 ${ranges.first.p99} ms (${formatRequestCpu(ranges.first.cpu)}). Random against start: ${(ranges.random.rps / ranges.first.rps).toFixed(2)}x in req/s, the mirror's random pages against its page 1 ${(r.mirror.rps / pageOne.mirror.rps).toFixed(2)}x.`,
        );
      }
      notes.push(
        `[5] ${label}: mirror ${fmt(r.mirror.rps)} req/s p50 ${r.mirror.p50} ms p99 ${r.mirror.p99} ms (${r.mirror.non2xx} non-2xx, ${r.mirror.errors} errors; ${formatRequestCpu(r.mirror.cpu)}); baseline ${fmt(r.baseline.rps)} req/s p50 ${r.baseline.p50} ms p99 ${r.baseline.p99} ms (${r.baseline.non2xx} non-2xx; ${formatRequestCpu(r.baseline.cpu)}). ${o.connections} connections, best of ${o.rounds} x ${o.readSeconds} s (the best round's rate, the lowest p99 of the rounds).`,
      );
    }
  },
};
