// [7] The sandbox serves a 1000-record page well within what a real upstream takes, so the sync passes measure the mirror.
import { fmt, judged } from '../lib/report.ts';
import { pageServing } from '../scenarios/ingest.ts';
import type { Scenario } from './scenario.ts';

export const sandboxPageServing: Scenario = {
  number: 7,
  label: 'sandbox page serving',
  setup: 'main',
  async run({ o, rows, notes }, { env: main, account }) {
    const r = await pageServing(main, account, o.records, o.pageSamples);
    const limit = { label: 'limit', value: 50, unit: 'ms' };
    rows.push(
      judged(
        {
          scenario: 7,
          figure: 'sandbox 1000-record page p50',
          value: r.p50,
          unit: 'ms',
          reference: limit,
          ratio: r.p50 === null ? null : r.p50 / 50,
          target: '<= 0.5 (well under)',
        },
        { max: 0.5, on: 'ratio' },
      ),
    );
    rows.push(
      judged(
        {
          scenario: 7,
          figure: 'sandbox 1000-record page p99',
          value: r.p99,
          unit: 'ms',
          reference: limit,
          ratio: r.p99 === null ? null : r.p99 / 50,
          target: '< 1',
        },
        { max: 0.999, on: 'ratio' },
      ),
    );
    notes.push(`[7] ${r.pages} pages of 1000 customers with source data at random offsets, one at a time, to the last byte; max ${fmt(r.max)} ms.`);
  },
};
