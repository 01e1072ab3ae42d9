// [8] Full syncs of growing lists in setups of their own: the cost per record as the list grows.
import { mb, stallNote } from '../lib/pass-notes.ts';
import { errorRow, fmt, info } from '../lib/report.ts';
import { scalePoint, type SyncRun } from '../scenarios/ingest.ts';
import type { Scenario } from './scenario.ts';

export const scaleCurve: Scenario = {
  number: 8,
  label: 'scale curve',
  setup: 'own',
  async run({ o, rows, notes, say, shared, results }) {
    const { first } = results;
    const points: { records: number; run: SyncRun }[] = [];
    for (const n of [...o.scale].sort((a, b) => a - b)) {
      if (n === o.records && first) {
        points.push({ records: n, run: first });
        continue;
      }
      say(`[8] full sync of ${n.toLocaleString('en-US')} customers in a setup of its own ...`);
      try {
        points.push({ records: n, run: await scalePoint(shared, n) });
      } catch (error) {
        rows.push(errorRow(8, `scale: full sync of ${n.toLocaleString('en-US')}`, error));
      }
    }
    const base = points[0];
    for (const p of points) {
      const perRecord = p.run.effectiveSeconds / p.records;
      const ratio = base ? perRecord / (base.run.effectiveSeconds / base.records) : null;
      rows.push(
        info({
          scenario: 8,
          figure: `scale: full sync of ${p.records.toLocaleString('en-US')}`,
          value: p.run.effectiveSeconds,
          unit: 's',
          // The ratio is the cost per record relative to the smallest size's (1.00 = linear).
          ...(base && p !== base ? { reference: { label: `${base.records.toLocaleString('en-US')}:`, value: base.run.effectiveSeconds, unit: 's' } } : {}),
          ratio: p === base ? null : ratio,
          target: p === base ? '-' : 'per record',
          ...(p.run.stall ? { note: 'stuck finishing' } : {}),
        }),
      );
      notes.push(
        `[8] ${p.records.toLocaleString('en-US')} customers: ${fmt(p.run.effectiveSeconds)} s, ${fmt(p.run.rate)} rec/s (last page at ${fmt(p.run.pagesSeconds)} s), worker RSS ${fmt(mb(p.run.startRss[0]))} MB at start, ${fmt(mb(p.run.peakRss[0]))} MB peak.${stallNote(p.run)}`,
      );
    }
  },
};
