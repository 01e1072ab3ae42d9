// [9] Many projects: requests and workflow executions of full, idle and changed passes against their floors.
import { knownProfile } from '../../connectors/source-systems/index.ts';
import { configSchema } from '../../lib/config.ts';
import { defaultPollingPolicy } from '../../mirror/streams/polling.ts';
import { fmt, info, judged } from '../lib/report.ts';
import { benchPolling, manyProjects } from '../scenarios/many-projects.ts';
import type { Scenario } from './scenario.ts';

export const manyProjectsScenario: Scenario = {
  number: 9,
  label: 'many projects',
  setup: 'own',
  async run({ o, rows, notes, say, shared }) {
    const m = o.manyProjects;
    const pollingShare = configSchema.shape.SYNC_POLLING_SHARE.parse(process.env.SYNC_POLLING_SHARE);
    const syncShare = configSchema.shape.MIRROR_SYNC_BUDGET_SHARE.parse(process.env.MIRROR_SYNC_BUDGET_SHARE) ?? defaultPollingPolicy.syncShare!;
    say(`[9] ${m.projects} projects (${m.bigProjects} with ${m.big} records per list, the others ${m.small}) and ${m.invoices} AP invoices ...`);
    for (const a of await manyProjects(shared, m, say)) {
      const who = a.system;
      rows.push(
        judged(
          {
            scenario: 9,
            figure: `${who}: full pass requests`,
            value: a.full.requests,
            unit: 'req',
            reference: { label: 'floor', value: a.floor, unit: 'req' },
            ratio: a.full.requests / a.floor,
            target: '<= 1.2',
          },
          { max: 1.2, on: 'ratio' },
        ),
      );
      rows.push(info({ scenario: 9, figure: `${who}: full pass workflow executions`, value: a.full.workflows, unit: '' }));
      rows.push(info({ scenario: 9, figure: `${who}: full pass time`, value: a.full.seconds, unit: 's' }));
      // An incremental pass may spend the polling share of the sync's budget for its period (the
      // freshness scheduler spends it where changes are likely; right after a pass, little is due).
      const rpm = knownProfile(a.system)?.requestsPerMinute;
      const pollingBudget = rpm === undefined ? null : pollingShare * syncShare * rpm * benchPolling.incrementalMinutes;
      const budgetRef = pollingBudget === null ? 2 * a.resources : pollingBudget;
      const budgetLabel = pollingBudget === null ? '2 x resources' : `polling budget a pass (${pollingShare} x ${syncShare} x ${rpm}/min)`;
      rows.push(
        judged(
          {
            scenario: 9,
            figure: `${who}: idle incremental requests`,
            value: a.idle.requests,
            unit: 'req',
            reference: { label: budgetLabel, value: budgetRef, unit: 'req' },
            ratio: a.idle.requests / budgetRef,
            target: '<= 1',
          },
          { max: 1, on: 'ratio' },
        ),
      );
      rows.push(
        judged(
          {
            scenario: 9,
            figure: `${who}: idle incremental workflow executions`,
            value: a.idle.workflows,
            unit: '',
            reference: { label: 'resources + 5', value: a.resources + 5, unit: '' },
            ratio: a.idle.workflows / (a.resources + 5),
            target: '<= 1',
          },
          { max: 1, on: 'ratio' },
        ),
      );
      rows.push(
        judged({ scenario: 9, figure: `${who}: idle incremental time`, value: a.idle.seconds, unit: 's', target: '< 5 s' }, { max: 4.999, on: 'value' }),
      );
      rows.push(info({ scenario: 9, figure: `${who}: idle incremental streams not due`, value: a.idle.notDue, unit: '' }));
      const laterRequests = a.later.map((l) => l.requests);
      const laterMean = laterRequests.reduce((x, y) => x + y, 0) / Math.max(1, laterRequests.length);
      rows.push(
        judged(
          {
            scenario: 9,
            figure: `${who}: idle passes over ${a.later.length * benchPolling.incrementalMinutes} simulated min, mean requests`,
            value: laterMean,
            unit: 'req',
            reference: { label: budgetLabel, value: budgetRef, unit: 'req' },
            ratio: laterMean / budgetRef,
            target: '<= 1',
          },
          { max: 1, on: 'ratio' },
        ),
      );
      rows.push(
        info({
          scenario: 9,
          figure: `${who}: idle passes over ${a.later.length * benchPolling.incrementalMinutes} simulated min, most requests`,
          value: Math.max(...laterRequests),
          unit: 'req',
        }),
      );
      rows.push(info({ scenario: 9, figure: `${who}: 1% changed, incremental requests`, value: a.changed.requests, unit: 'req' }));
      rows.push(info({ scenario: 9, figure: `${who}: 1% changed, incremental time`, value: a.changed.seconds, unit: 's' }));
      rows.push(
        info({
          scenario: 9,
          figure: `${who}: 1% changed, visible at once through the read API`,
          value: a.changed.visible,
          unit: '',
          reference: { label: 'changed', value: a.changed.changes, unit: '' },
          ratio: a.changed.changes ? a.changed.visible / a.changed.changes : null,
        }),
      );
      rows.push(
        judged(
          {
            scenario: 9,
            figure: `${who}: 1% changed, visible within the full-pass period`,
            value: a.changed.visibleAfterBound,
            unit: '',
            reference: { label: 'changed', value: a.changed.changes, unit: '' },
            ratio: a.changed.changes ? a.changed.visibleAfterBound / a.changed.changes : null,
            target: '= 1',
          },
          { min: 1, on: 'ratio' },
        ),
      );
      const l = a.limited;
      rows.push(
        judged(
          {
            scenario: 9,
            figure: `${who}: full pass under the published rate x ${fmt(l.speedup)} (${l.limit} per ${fmt(l.windowMs / 1000)} s window), time`,
            value: l.seconds,
            unit: 's',
            reference: { label: `requests / the sync's allowed rate (${l.share} of the limit)`, value: l.floorSeconds, unit: 's' },
            ratio: l.seconds / l.floorSeconds,
            target: '<= 1.15',
          },
          { max: 1.15, on: 'ratio' },
        ),
      );
      rows.push(
        judged(
          {
            scenario: 9,
            figure: `${who}: full pass under the rate limit, 429s after the first window`,
            value: l.rejectedAfterFirst,
            unit: '',
            target: '= 0',
          },
          { max: 0, on: 'value' },
        ),
      );
      const passNote = (label: string, p: { requests: number; refused: number; workflows: number; seconds: number; streams: number; failed: number }) =>
        `${label} ${p.requests} requests (${p.refused} not 2xx), ${p.workflows} workflow executions, ${p.streams} streams (${p.failed} failed), ${fmt(p.seconds)} s`;
      notes.push(
        `[9] ${a.label}: ${a.records.toLocaleString('en-US')} records, ${a.resources} resources, floor ${a.floor} requests; ${passNote('full:', a.full)}; ${passNote('idle incremental:', a.idle)}, ${a.idle.notDue} streams not due ` +
          `(the freshness scheduler visits a project list once its interval, set by the change rate it learned, brings it round, within the polling budget of a pass: ${fmt(budgetRef)} requests); ` +
          `idle passes at simulated +${a.later.map((p) => `${p.atMinutes} min: ${p.requests} req/${p.notDue} not due`).join(', +')}; ` +
          `${passNote(`after ${a.changed.changes} changes:`, a.changed)}, ${a.changed.visible}/${a.changed.changes} visible at once${a.changed.problems.length ? ` (${a.changed.problems.join('; ')})` : ''}, ` +
          `${a.changed.visibleAfterBound}/${a.changed.changes} after a pass ${benchPolling.fullHours} h later${a.changed.problemsAfterBound.length ? ` (${a.changed.problemsAfterBound.join('; ')})` : ''}. ` +
          `Under the published rate sped up ${fmt(l.speedup)}x so that it binds (${l.limit} per ${fmt(l.windowMs / 1000)} s window): ${l.requests} requests, ${l.rejected} answered 429 (${l.rejectedAfterFirst} after the first window), ` +
          `${fmt(l.seconds)} s against ${fmt(l.floorSeconds)} s for requests / the sync's allowed rate (${l.share} of the limit: the rest of each window is the application's)${l.failed ? `, ${l.failed} streams failed` : ''}; ` +
          `2xx per window [${l.perWindow.join(', ')}] (the sync's share: ${Math.floor(l.share * l.limit)}), longest gap between requests ${fmt(l.longestGapMs)} ms, ${fmt(l.gapsMs / 1000)} s in gaps over two spacings. Rate limits otherwise off, one worker.`,
      );
    }
  },
};
