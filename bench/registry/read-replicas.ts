// [15] The read API with one streaming replica against the primary alone, side by side: req/s and p99
// of the reads, the share the replica answered, and read-your-writes violations of a writer beside them.
import { fmt, info, judged } from '../lib/report.ts';
import { readReplicas } from '../scenarios/read-replicas.ts';
import type { Scenario } from './scenario.ts';

export const readReplicasScenario: Scenario = {
  number: 15,
  label: 'reads on a replica',
  setup: 'own',
  async run({ o, rows, notes, say, shared }) {
    const vendors = o.quick ? 2_000 : 10_000;
    say(
      `[15] a primary and a streaming standby on this machine; ${vendors} vendors for each of 3 reading accounts; the read API without and with the replica ...`,
    );
    const r = await readReplicas(shared, { vendors, seconds: o.readSeconds, connections: o.connections });
    const { primaryOnly: p, withReplica: w } = r;
    rows.push(
      judged({ scenario: 15, figure: 'share of reads the replica answered', value: w.replicaShare, unit: '', target: '>= 0.9' }, { min: 0.9, on: 'value' }),
      judged(
        {
          scenario: 15,
          figure: 'read-your-writes violations (with the replica)',
          value: w.violations,
          unit: '',
          target: '= 0',
          note: `of ${w.pairs} write-then-read pairs`,
        },
        { max: 0, on: 'value' },
      ),
      info({
        scenario: 15,
        figure: 'reads with the replica: req/s',
        value: w.reads.rps,
        unit: 'req/s',
        reference: { label: 'primary alone', value: p.reads.rps, unit: 'req/s' },
        ratio: w.reads.rps / p.reads.rps,
        target: 'reference',
      }),
      info({
        scenario: 15,
        figure: 'reads with the replica: p99',
        value: w.reads.p99,
        unit: 'ms',
        reference: { label: 'primary alone', value: p.reads.p99, unit: 'ms' },
        ratio: p.reads.p99 / w.reads.p99,
        target: 'reference',
      }),
      info({ scenario: 15, figure: "share of the two servers' transactions the replica ran", value: w.transactionShare, unit: '', target: 'reference' }),
    );
    notes.push(
      `[15] primary alone: ${fmt(p.reads.rps)} req/s, p50 ${p.reads.p50} ms, p99 ${p.reads.p99} ms (${p.reads.requests} reads, ${p.reads.non2xx + p.reads.errors} not 2xx), ${p.pairs} write-then-read pairs, ${p.violations} violations. ` +
        `With the replica: ${fmt(w.reads.rps)} req/s, p50 ${w.reads.p50} ms, p99 ${w.reads.p99} ms (${w.reads.requests} reads, ${w.reads.non2xx + w.reads.errors} not 2xx), ${w.pairs} pairs, ${w.violations} violations; ` +
        `the replica answered ${w.replicaShare === null ? '?' : (w.replicaShare * 100).toFixed(1)} % of the API's reads and ran ${(w.transactionShare * 100).toFixed(1)} % of both servers' transactions (the primary's include the writer's writes, the lag probes, the position snapshots and the control plane: accounts, tokens); fallbacks to the primary ${JSON.stringify(w.fallbacks)}. ` +
        "Both servers share this machine's two cores: the replica adds no CPU here, so req/s shows the routing's cost rather than the capacity a replica host adds.",
    );
  },
};
