// [10] A sync at the limit beside an application's own calls: the one budget shared by default (the
// application's reserve sized by its use), then with the hard cap MIRROR_SYNC_BUDGET_SHARE=0.5.
import { defaultReserveRule } from '../../connectors/governor/reserve.ts';
import { fmt, judged } from '../lib/report.ts';
import { sharedBudget } from '../scenarios/shared-budget.ts';
import type { Scenario } from './scenario.ts';

export const sharedBudgetScenario: Scenario = {
  number: 10,
  label: 'one budget: sync and application',
  setup: 'own',
  async run({ o, rows, notes, say, shared }) {
    for (const share of [undefined, 0.5]) {
      const tag = share === undefined ? 'default (reserve by use)' : `share ${share}`;
      say(
        `[10] a sync at the limit (windows of ${o.rateWindowMs} ms, ${o.rateLimit} allowed) and an application at 10% of it, ${share === undefined ? 'MIRROR_SYNC_BUDGET_SHARE unset' : `MIRROR_SYNC_BUDGET_SHARE=${share}`} ...`,
      );
      const r = await sharedBudget(shared, {
        windowMs: o.rateWindowMs,
        limit: o.rateLimit,
        windows: o.rateWindows,
        recordsPerResource: o.rateRecords,
        share,
        appShare: 0.1,
      });
      if (share !== undefined) {
        rows.push(
          judged(
            { scenario: 10, figure: `${tag}: the sync's use of each window`, value: r.syncShareOfWindow, unit: '', target: `${share} +- 0.05` },
            { min: share - 0.05, max: share + 0.05, on: 'value' },
          ),
        );
      } else {
        rows.push(
          judged(
            { scenario: 10, figure: `${tag}: application 429s after the first window`, value: r.appRejectedAfterFirst, unit: '', target: '= 0' },
            { max: 0, on: 'value' },
          ),
        );
        rows.push(
          judged(
            {
              scenario: 10,
              figure: `${tag}: application added wait p99`,
              value: r.appWaitP99,
              unit: 'ms',
              reference: { label: 'one spacing', value: r.spacingMs, unit: 'ms' },
              ratio: r.appWaitP99 === null ? null : r.appWaitP99 / r.spacingMs,
              target: '<= 1',
            },
            { max: 1, on: 'ratio' },
          ),
        );
        rows.push(
          judged({ scenario: 10, figure: `${tag}: total use of the window`, value: r.totalUse, unit: '', target: '>= 0.95' }, { min: 0.95, on: 'value' }),
        );
      }
      const rule = defaultReserveRule;
      notes.push(
        `[10] ${tag}: per window (sync+application, 429s): [${r.perWindow.map((w) => `${w.sync}+${w.app}${w.rejected ? `/${w.rejected}` : ''}`).join(', ')}]; ${r.appCalls} application calls, ${r.appRejectedAfterFirst} answered 429 after the first window (${r.appRejectedSteady} in the steady state); ` +
          `application added wait p99 ${fmt(r.appWaitP99)} ms (${fmt(r.appWaitP99Steady)} ms in the steady state), one spacing ${fmt(r.spacingMs)} ms; upstream 429s ${r.upstream429s}; ` +
          `steady state: sync ${fmt(r.syncShareOfWindow)} of the window, ${fmt(r.syncShareOfLeft)} of what the application left, total ${fmt(r.totalUse)}. ` +
          (share === undefined
            ? `By default the application's reserve is its mean use of the last ${rule.windows} windows plus ${rule.margin} of the window (at least ${rule.floor}): 0.1 + ${rule.margin} here, so the sync may spend ${fmt(1 - 0.1 - rule.margin)} x 0.98 (the governor's utilization) of a window.`
            : `The share caps background work at share x 0.98 (the governor's utilization) of a window, whatever the application leaves.`),
      );
    }
  },
};
