// [13] A day of changes: the freshness scheduler's staleness of every change over a simulated day of
// skewed changes, against the best schedule for the true rates and the round-robin cycle, without and
// with upstream webhooks; polling requests as a share of the sync's budget (the webhook events' object
// fetches printed beside them). The first day after the link, when the mirror learns the lists' rates,
// is printed beside the day after it; the mean's target is judged on the day after.
import { fmt, info, judged } from '../lib/report.ts';
import { dayOfChanges, dayOfChangesOptions } from '../scenarios/day-of-changes.ts';
import type { Scenario } from './scenario.ts';

export const dayOfChangesScenario: Scenario = {
  number: 13,
  label: 'a day of changes',
  setup: 'own',
  async run({ o, rows, notes, say, shared }) {
    const d = dayOfChangesOptions(o.quick);
    const r = await dayOfChanges(shared, d, say);
    const min = (v: number) => `${fmt(v)} min`;
    rows.push(
      info({
        scenario: 13,
        figure: `round-robin cycle: ${r.lists} lists / the sync's ${fmt(r.publishedPerMinute * r.syncShare)} req/min`,
        value: r.syncCycleMinutes,
        unit: 'min',
      }),
      info({
        scenario: 13,
        figure: `round-robin cycle of the polling budget (SYNC_POLLING_SHARE ${r.pollingShare})`,
        value: r.pollingCycleMinutes,
        unit: 'min',
      }),
      info({
        scenario: 13,
        figure: `round-robin cycle of the visits it leaves these lists (less the lists every pass lists)`,
        value: r.scheduleCycleMinutes,
        unit: 'min',
      }),
    );
    for (const day of r.days) {
      const who = day.label;
      rows.push(
        info({ scenario: 13, figure: `${who}: staleness p50`, value: day.p50, unit: 'min' }),
        info({ scenario: 13, figure: `${who}: staleness p95`, value: day.p95, unit: 'min' }),
        info({ scenario: 13, figure: `${who}: staleness mean (optimum for the true rates: reference)`, value: day.optimumMean, unit: 'min' }),
        info({
          scenario: 13,
          figure: `${who}: staleness mean (the same keeping the floor, every list once per 2 cycles: reference)`,
          value: day.flooredMean,
          unit: 'min',
        }),
      );
      const mean = {
        scenario: 13,
        figure: `${who}: staleness mean`,
        value: day.mean,
        unit: 'min',
        reference: { label: 'sqrt-rate optimum, same visits', value: day.optimumMean, unit: 'min' },
        ratio: day.optimumMean > 0 ? day.mean / day.optimumMean : null,
      };
      rows.push(
        // The first day after the link is spent finding out which lists change: printed beside the day
        // after it, which is judged.
        day.firstDay ? info({ ...mean, target: 'learning: reference' }) : judged({ ...mean, target: '<= 1.25' }, { max: 1.25, on: 'ratio' }),
        judged(
          {
            scenario: 13,
            figure: `${who}: staleness max`,
            value: day.max,
            unit: 'min',
            reference: { label: "2 x the lists' round-robin cycle", value: 2 * r.scheduleCycleMinutes, unit: 'min' },
            ratio: day.max / (2 * r.scheduleCycleMinutes),
            target: '<= 1',
          },
          { max: 1, on: 'ratio' },
        ),
      );
      const budget = r.publishedPerMinute * r.syncShare;
      rows.push(
        judged(
          {
            scenario: 13,
            figure: `${who}: polling requests as a share of the sync's budget`,
            value: day.pollingRequestsPerMinute / budget,
            unit: '',
            reference: { label: 'SYNC_POLLING_SHARE', value: r.pollingShare, unit: '' },
            ratio: day.pollingRequestsPerMinute / budget / r.pollingShare,
            target: '<= 1',
          },
          { max: 1, on: 'ratio' },
        ),
        info({
          scenario: 13,
          figure: `${who}: single-object reads the changes caused (webhook events' fetches), share of the sync's budget`,
          value: day.objectFetchesPerMinute / budget,
          unit: '',
        }),
      );
      if (day.webhookP99Seconds !== null) {
        rows.push(
          judged(
            { scenario: 13, figure: `${who}: webhook types, change -> read API p99`, value: day.webhookP99Seconds, unit: 's', target: '< 5 s' },
            { max: 4.999, on: 'value' },
          ),
          info({ scenario: 13, figure: `${who}: webhook types, change -> read API p50`, value: day.webhookP50Seconds ?? 0, unit: 's' }),
        );
      }
      notes.push(
        `[13] ${who}: ${day.changes} changes over ${fmt(r.dayMinutes / 60)} simulated hours (passes every ${r.passMinutes} min); staleness p50 ${min(day.p50)}, p95 ${min(day.p95)}, ` +
          `max ${min(day.max)}, mean ${min(day.mean)} against the optimum's ${min(day.optimumMean)} for ${fmt(day.visitsPerMinute)} visits a minute; ` +
          `${fmt(day.requestsPerMinute)} requests a minute of the sync's ${fmt(budget)} (polling ${fmt(day.pollingRequestsPerMinute)}, ` +
          `single-object reads of changed records ${fmt(day.objectFetchesPerMinute)})` +
          (day.webhookP99Seconds !== null
            ? `; ${day.webhookSeen} changes by webhook, p50 ${fmt(day.webhookP50Seconds ?? 0)} s, p99 ${fmt(day.webhookP99Seconds)} s`
            : '') +
          (day.unseen > 0 ? `; ${day.unseen} not seen by the day's end (counted to it)` : '') +
          (day.problems.length > 0 ? `; problems: ${day.problems.join('; ')}` : '') +
          '.',
      );
    }
  },
};
