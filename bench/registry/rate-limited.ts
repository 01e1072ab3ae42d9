// [4] A sync under the upstream's rate limit: how much of each window it uses, and no 429 after the first.
import { defaultReserveRule } from '../../connectors/governor/reserve.ts';
import { configSchema } from '../../lib/config.ts';
import { fmt, judged } from '../lib/report.ts';
import { rateLimited } from '../scenarios/rate-limited.ts';
import type { Scenario } from './scenario.ts';

export const rateLimitedScenario: Scenario = {
  number: 4,
  label: 'rate-limited sync',
  setup: 'own',
  async run({ o, rows, notes, say, shared }) {
    say(`[4] windows of ${o.rateWindowMs} ms, ${o.rateLimit} requests allowed per window; ${o.rateWindows} windows with 1 worker, then with 2 ...`);
    const runs = await rateLimited(shared, { windowMs: o.rateWindowMs, limit: o.rateLimit, windows: o.rateWindows, recordsPerResource: o.rateRecords });
    // The sync alone may spend MIRROR_SYNC_BUDGET_SHARE of each window, or by default all but the
    // application's reserve, at its floor with no application calls: its pacing is judged against that
    // allowance, not the whole window.
    const share = configSchema.shape.MIRROR_SYNC_BUDGET_SHARE.parse(process.env.MIRROR_SYNC_BUDGET_SHARE) ?? 1 - defaultReserveRule.floor;
    const syncAllowed = o.rateLimit * share;
    for (const r of runs) {
      const who = `${r.workers} worker${r.workers > 1 ? 's' : ''}`;
      const perWindow = r.utilization === null ? null : r.utilization * o.rateLimit;
      const ofAllowance = perWindow === null ? null : perWindow / syncAllowed;
      rows.push(
        judged(
          {
            scenario: 4,
            figure: `rate-limited, ${who}: requests per window (steady state)`,
            value: perWindow,
            unit: 'req',
            reference: { label: `sync's share (${share} of ${o.rateLimit})`, value: syncAllowed, unit: 'req' },
            ratio: ofAllowance,
            target: '>= 0.95',
          },
          { min: 0.95, on: 'ratio' },
        ),
      );
      rows.push(
        judged(
          { scenario: 4, figure: `rate-limited, ${who}: 429s after the first window`, value: r.rejectedAfterFirst, unit: '', target: '= 0' },
          { max: 0, on: 'value' },
        ),
      );
      notes.push(
        `[4] ${who}: ${r.requests} requests (${r.rejected} answered 429) over ${fmt(r.seconds)} s, ${r.finished ? 'sync finished' : 'stopped after the measured windows'}; accepted per window: [${r.perWindow.join(', ')}]; accepted rate after the first window / allowed rate: ${fmt(r.rateRatio)}. ` +
          `The governor's budgets afterwards (rate_budgets): ${r.budgets.map((b) => `${b.kind} total ${b.total ?? '-'} window ${b.windowMs} ms spacing ${fmt(b.spacingMs)} ms`).join('; ')}.`,
      );
    }
  },
};
