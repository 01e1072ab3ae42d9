// [6] From an upstream mutation to its webhook, to the row written, to the read API showing it.
import { fmt, info, judged } from '../lib/report.ts';
import { webhookLatency } from '../scenarios/webhooks.ts';
import type { Scenario } from './scenario.ts';

export const webhookLatencyScenario: Scenario = {
  number: 6,
  label: 'webhook latency',
  setup: 'main',
  api: true,
  async run({ o, rows, notes, results }, { env: main, workers, account }) {
    if (!results.first) throw new Error('needs the full sync (scenario 2)');
    const r = await webhookLatency(main, workers, account, {
      perSecond: o.webhookPerSecond,
      seconds: o.webhookSeconds,
      warmupSeconds: 2,
      sampleEvery: 20,
      pollMs: 25,
      timeoutMs: 30_000,
    });
    rows.push(judged({ scenario: 6, figure: 'webhook -> read API: p99', value: r.apiP99, unit: 'ms', target: '< 1,000 ms' }, { max: 999.999, on: 'value' }));
    rows.push(info({ scenario: 6, figure: 'webhook -> read API: p50', value: r.apiP50, unit: 'ms' }));
    rows.push(
      judged(
        {
          scenario: 6,
          figure: 'webhook: mutations visible',
          value: r.written,
          unit: '',
          reference: { label: 'sent', value: r.mutations, unit: '' },
          ratio: r.mutations ? r.written / r.mutations : null,
          target: '= 1',
        },
        { min: 1, on: 'ratio' },
      ),
    );
    rows.push(info({ scenario: 6, figure: 'webhook -> row written: p99', value: r.writeP99, unit: 'ms' }));
    rows.push(info({ scenario: 6, figure: 'webhook -> row written: p99 with the warm-up', value: r.allWriteP99, unit: 'ms' }));
    notes.push(
      `[6] ${r.mutations} customer mutations at ${o.webhookPerSecond}/s, the first ${r.warmup} (2 s, from idle to the steady rate) left out of the percentiles; ${r.registered} upstream webhooks registered; read API polled every 25 ms for every 20th mutation: ${r.polledVisible}/${r.polled} seen; rows written for ${r.written}/${r.mutations} (p50 ${fmt(r.writeP50)} ms), at ${fmt(r.applyPerSecond)} rows/s from first to last; events stored in the inbox p50 ${fmt(r.inboxP50)} ms, p99 ${fmt(r.inboxP99)} ms after the mutation. ` +
        `Deliveries by status: ${JSON.stringify(r.deliveries)}; inbox: ${JSON.stringify(r.inbox)}.${r.problems.length ? ` Problems: ${r.problems.slice(0, 5).join('; ')}` : ''}`,
    );
  },
};
