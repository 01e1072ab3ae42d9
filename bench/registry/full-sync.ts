// [2] A full sync of the main list end to end, against the ingest ceiling of [1].
import { cpuNote, mb, stallNote } from '../lib/pass-notes.ts';
import { fmt, info, judged } from '../lib/report.ts';
import { probeSingleGet } from '../scenarios/read-api.ts';
import { timedFullSync } from '../scenarios/ingest.ts';
import type { Scenario } from './scenario.ts';

export const fullSync: Scenario = {
  number: 2,
  label: 'full sync',
  setup: 'main',
  async run({ o, rows, notes, say, results }, { env: main, workers, account }) {
    say(`[2] full sync of ${o.records.toLocaleString('en-US')} customers ...`);
    const { ceiling } = results;
    const first = await timedFullSync(main, workers, account, o.records);
    results.first = first;
    const endToEnd = { scenario: 2, figure: 'full sync: records/s end to end', value: first.rate, unit: 'rec/s' };
    // Without the ceiling (`--only` left scenario 1 out) there is nothing to judge against.
    rows.push(
      ceiling
        ? judged(
            {
              ...endToEnd,
              reference: { label: 'ceiling', value: ceiling.rowsPerSecond, unit: 'rows/s' },
              ratio: first.rate / ceiling.rowsPerSecond,
              target: '>= 0.5',
            },
            { min: 0.5, on: 'ratio' },
          )
        : info({ ...endToEnd, target: '>= 0.5 x ceiling (not measured)' }),
    );
    const pagesRate = first.pagesSeconds ? first.records / first.pagesSeconds : null;
    rows.push(
      info({
        scenario: 2,
        figure: 'full sync: records/s to the last page',
        value: pagesRate,
        unit: 'rec/s',
        reference: { label: 'ceiling', value: ceiling?.rowsPerSecond ?? null, unit: 'rows/s' },
        ratio: ceiling && pagesRate ? pagesRate / ceiling.rowsPerSecond : null,
      }),
    );
    rows.push(info({ scenario: 2, figure: 'full sync: time', value: first.effectiveSeconds, unit: 's' }));
    const finishing = first.pagesSeconds === undefined ? null : first.seconds - first.pagesSeconds;
    rows.push({
      scenario: 2,
      figure: 'full sync: finishing after the last page',
      value: finishing,
      unit: 's',
      target: 'ends by itself',
      verdict: finishing === null ? 'error' : first.stall ? 'FAIL' : 'pass',
      ...(first.stall ? { note: 'stuck: unstuck by the benchmark (ANALYZE, then cancel)' } : {}),
    });
    rows.push(
      info({
        scenario: 2,
        figure: 'full sync: worker peak RSS',
        value: mb(first.peakRss[0]),
        unit: 'MB',
        reference: { label: 'at start', value: mb(first.startRss[0]), unit: 'MB' },
      }),
    );
    notes.push(
      `[2] ${first.records.toLocaleString('en-US')} customers, 1000 per page, sandbox without rate limits; inserted ${first.counts.inserted}, updated ${first.counts.updated}, unchanged ${first.counts.unchanged}; last page committed at ${fmt(first.pagesSeconds)} s. ` +
        `Peak RSS ${first.peakReset ? 'since the pass started' : 'since the worker started (could not reset it)'}.${cpuNote(first, 1000)}${stallNote(first)}`,
    );
  },
  /**
   * Nothing may have analyzed the freshly loaded tables yet (this machine's Postgres runs with
   * autovacuum off; elsewhere autoanalyze gets to it within a minute or so of such a load). The
   * scenarios after it run as they would once it has; a quick probe first shows the difference.
   */
  async after({ notes, wants, autovacuum, results }, { env: main, account }) {
    if (!results.first || !(wants(3) || wants(5) || wants(6))) return;
    const analyzed = await main.services.pool.query<{ at: Date | null }>(
      `SELECT coalesce(last_analyze, last_autoanalyze) AS at FROM pg_stat_user_tables WHERE relname = 'records_customers'`,
    );
    const before = wants(5) || wants(6) ? await probeSingleGet(main, account, 30) : null;
    await main.services.pool.query('ANALYZE');
    const after = wants(5) || wants(6) ? await probeSingleGet(main, account, 30) : null;
    notes.push(
      `[2] after the full sync the tables had ${analyzed.rows[0]?.at ? 'statistics' : 'never been analyzed'} (autovacuum ${autovacuum ?? 'unknown'}); the bench ran ANALYZE before scenarios 3, 5 and 6.` +
        (before !== null
          ? ` A single-object GET through the read API took ${fmt(before)} ms (median of 30, one at a time) before it, ${fmt(after)} ms after.`
          : ''),
    );
  },
};
