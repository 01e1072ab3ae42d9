// [3] The same pass again with nothing changed upstream: how much faster than the first.
import { cpuNote, mb, stallNote } from '../lib/pass-notes.ts';
import { fmt, judged } from '../lib/report.ts';
import { timedFullSync } from '../scenarios/ingest.ts';
import type { Scenario } from './scenario.ts';

export const unchangedPass: Scenario = {
  number: 3,
  label: 'unchanged pass',
  setup: 'main',
  async run({ o, rows, notes, results }, { env: main, workers, account }) {
    const { first } = results;
    if (!first) throw new Error('needs the full sync (scenario 2)');
    const again = await timedFullSync(main, workers, account, o.records);
    rows.push(
      judged(
        {
          scenario: 3,
          figure: 'unchanged pass: time',
          value: again.effectiveSeconds,
          unit: 's',
          reference: { label: 'first pass', value: first.effectiveSeconds, unit: 's' },
          ratio: first.effectiveSeconds / again.effectiveSeconds,
          target: '>= 3 (faster)',
        },
        { min: 3, on: 'ratio' },
      ),
    );
    notes.push(
      `[3] the same pass again with nothing changed: ${fmt(again.rate)} rec/s${again.pagesSeconds !== undefined ? `, last page at ${fmt(again.pagesSeconds)} s` : ''}; unchanged ${again.counts.unchanged}, updated ${again.counts.updated}; worker peak RSS ${fmt(mb(again.peakRss[0]))} MB.${cpuNote(again, 1000)}${stallNote(again)}`,
    );
  },
};
