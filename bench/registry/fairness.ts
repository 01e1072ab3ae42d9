// [14] Fair across accounts: a small account's changes while a big account backfills on the same worker,
// with the mirror's fairness keys and priorities honoured by the Temporal server, and without.
import { fmt, info, judged } from '../lib/report.ts';
import { fairness } from '../scenarios/fairness.ts';
import type { Scenario } from './scenario.ts';

export const fairnessScenario: Scenario = {
  number: 14,
  label: 'fair across accounts',
  setup: 'own',
  async run({ o, rows, notes, say, shared }) {
    // The big account: a BuildPro-like account of many project lists, its first full pass running 16
    // streams at once on a worker that runs 4 activities at once.
    const options = o.quick
      ? { projects: 40, bigProjects: 4, big: 2_000, small: 100, changes: 5, everyMs: 3_000, afterMs: 5_000, backfillConcurrency: 16 }
      : { projects: 100, bigProjects: 10, big: 5_000, small: 200, changes: 8, everyMs: 3_000, afterMs: 8_000, backfillConcurrency: 16 };
    say(
      `[14] a ${options.projects}-project account backfills (${options.bigProjects} projects of ${options.big} records a list) while a small account's leads change, ${options.changes} times; with fairness, then without ...`,
    );
    const { withKeys, withoutKeys } = await fairness(shared, options);
    rows.push(
      judged(
        {
          scenario: 14,
          figure: "a small account's change visible during another's backfill, max",
          value: withKeys.max,
          unit: 'ms',
          reference: { label: 'without fairness', value: withoutKeys.max, unit: 'ms' },
          ratio: withKeys.max === null || withoutKeys.max === null || withoutKeys.max === 0 ? null : withKeys.max / withoutKeys.max,
          target: '<= 5,000 ms',
        },
        { max: 5_000, on: 'value' },
      ),
    );
    rows.push(
      info({
        scenario: 14,
        figure: "a small account's changes not visible within 30 s",
        value: withKeys.missed,
        unit: '',
        reference: { label: 'without fairness', value: withoutKeys.missed, unit: '' },
      }),
    );
    rows.push(
      info({
        scenario: 14,
        figure: "a small account's change visible during another's backfill, p50",
        value: withKeys.p50,
        unit: 'ms',
        reference: { label: 'without fairness', value: withoutKeys.p50, unit: 'ms' },
      }),
    );
    for (const [tag, r] of [
      ['with fairness keys and priorities', withKeys],
      ['without (the server dispatching first in, first out)', withoutKeys],
    ] as const) {
      notes.push(
        `[14] ${tag}: each change visible after [${r.latencies.map((l) => (l === null ? 'not within 30 s' : `${fmt(l)} ms`)).join(', ')}]; the backfill had written ${r.backfilled} records by then` +
          (r.eventLoop
            ? `; the worker's event-loop delay meanwhile: max ${fmt(r.eventLoop.maxMs)} ms, worst p99 of a second ${fmt(r.eventLoop.p99Ms)} ms`
            : '') +
          (r.problems.length > 0 ? `; problems: ${r.problems.join('; ')}` : ''),
      );
      notes.push(`[14] ${tag}, where the time went (since each change was made): ${r.hops}`);
    }
  },
};
