// Two saved bench runs side by side: the same figure of both meets even when its sizes differ, figures
// only one run has are shown as absent, and the change is the after run's ratio over the before run's.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { compareRuns, formatComparison } from '../../../bench/lib/compare.ts';
import { withLatestRun, type Report, type Row } from '../../../bench/lib/report.ts';

function run(startedAt: string, rows: Row[], only?: number[]): Report {
  return {
    startedAt,
    finishedAt: startedAt,
    wallSeconds: 60,
    mode: 'default',
    options: { only },
    machine: { cpus: 2, cpuModel: 'x', memoryGiB: 24, node: 'v20.0.0', platform: 'linux-x64' },
    rows,
    notes: [],
  };
}

describe('bench: two runs compared', () => {
  it('pairs every figure of the two runs, its sizes aside, and says how its ratio moved', () => {
    const before = run('2026-11-27T00:00:00Z', [
      { scenario: 2, figure: 'full sync of 200,000 customers', value: 40_000, unit: 'rows/s', ratio: 0.8, verdict: 'pass' },
      { scenario: 5, figure: 'p99', value: 10, unit: 'ms', verdict: 'info' },
      { scenario: 6, figure: 'rate without its baseline', value: 40, unit: 'req/s', ratio: 0.5, verdict: 'pass' },
      { scenario: 9, figure: 'gone since', value: 1, unit: '', verdict: 'info' },
    ]);
    const after = run('2026-11-29T00:00:00Z', [
      { scenario: 2, figure: 'full sync of 100,000 customers', value: 30_000, unit: 'rows/s', ratio: 0.6, verdict: 'FAIL' },
      { scenario: 5, figure: 'p99', value: 12, unit: 'ms', verdict: 'info' },
      { scenario: 6, figure: 'rate without its baseline', value: 50, unit: 'req/s', verdict: 'info' },
      { scenario: 13, figure: 'new figure', value: 3, unit: 'min', verdict: 'info' },
    ]);
    const rows = compareRuns(before, after);
    assert.deepEqual(
      rows.map((r) => [r.scenario, r.change === null ? null : Number(r.change.toFixed(2)), Boolean(r.before), Boolean(r.after)]),
      [
        [2, 0.75, true, true],
        [5, 1.2, true, true],
        [6, 1.25, true, true],
        [9, null, true, false],
        [13, null, false, true],
      ],
    );
    const text = formatComparison(rows, ['before', 'after']);
    assert.match(text, /0\.80x\) pass .*0\.60x\) FAIL .*0\.75x/);
    assert.match(text, /gone since .*absent/);
  });

  it("names a run of some scenarios as such in the benchmarks document's latest-run section", () => {
    const doc = [
      'before',
      '<!-- latest run: written by `npm run bench -- --save`; edits between these lines are replaced -->',
      'old',
      '<!-- latest run: end -->',
      'after',
    ].join('\n');
    const rows: Row[] = [{ scenario: 1, figure: 'f', value: 1, unit: '', verdict: 'info' }];
    assert.match(withLatestRun(doc, run('2026-11-29T00:00:00Z', rows, [1, 2, 11]), 'x.json'), /2026-11-29, scenarios 1, 2 and 11 \(`--only`\) \(`x.json`/);
    assert.match(withLatestRun(doc, run('2026-11-29T00:00:00Z', rows), 'x.json'), /2026-11-29 \(`x.json`/);
  });
});
