// [1] The ingest ceiling: a raw COPY of the same customers into a bare table, what [2] is judged against.
import { fmt, info } from '../lib/report.ts';
import { ingestCeiling } from '../scenarios/ingest.ts';
import type { Scenario } from './scenario.ts';

export const ingestCeilingScenario: Scenario = {
  number: 1,
  label: 'ingest ceiling',
  setup: 'main',
  async run({ o, rows, notes, results }, { env: main, account }) {
    const ceiling = await ingestCeiling(main, account, o.records);
    rows.push(info({ scenario: 1, figure: 'ingest ceiling: raw COPY into a bare table (median of 3)', value: ceiling.rowsPerSecond, unit: 'rows/s' }));
    results.ceiling = ceiling;
    notes.push(
      `[1] ${ceiling.rows.toLocaleString('en-US')} rows (${fmt(ceiling.bytes / 2 ** 20)} MB of COPY text, the same customers the sync fetches) in one COPY, ${ceiling.runs.length} times: ` +
        `${ceiling.runs.map((r) => Math.round(r).toLocaleString('en-US')).join(', ')} rows/s; the ceiling is their median (${fmt(ceiling.seconds)} s).` +
        (ceiling.checkpointed ? ' Each from a CHECKPOINT.' : '') +
        (ceiling.walBytes.every((b) => b !== undefined) ? ` WAL written: ${ceiling.walBytes.map((b) => fmt(b / 2 ** 20)).join(', ')} MB.` : ''),
    );
  },
};
