// Two saved runs side by side (`npm run bench -- --compare before.json after.json`): every figure the two
// have in common, with its value and ratio in each and how the ratio moved, and the figures only one of
// them has. The judged ratios are what to compare between runs; absolute figures move with the machine.
import { readFileSync } from 'node:fs';
import { fmt, type Report, type Row } from './report.ts';

export interface ComparedRow {
  scenario: number;
  figure: string;
  before?: Row;
  after?: Row;
  /** The after run's ratio over the before run's (their values', where either has no ratio). */
  change: number | null;
}

/** A row's figure with its sizes left out (`of 200,000 customers`), so the same figure of two runs meets. */
function key(r: Row): string {
  return `${r.scenario}|${r.figure.replace(/[0-9][0-9,.]*/g, '#')}`;
}

function finite(x: number | null | undefined): number | null {
  return x === null || x === undefined || !Number.isFinite(x) ? null : x;
}

export function compareRuns(before: Report, after: Report): ComparedRow[] {
  const out = new Map<string, ComparedRow>();
  const seen = new Map<string, number>();
  // Figures that share a key within a run (rounds, repeated rows) pair up in order.
  const keyed = (r: Row) => {
    const k = key(r);
    return `${k}|${seen.get(k) ?? 0}`;
  };
  for (const [which, report] of [
    ['before', before],
    ['after', after],
  ] as const) {
    seen.clear();
    for (const r of report.rows) {
      const k = keyed(r);
      seen.set(key(r), (seen.get(key(r)) ?? 0) + 1);
      const row = out.get(k) ?? { scenario: r.scenario, figure: r.figure, change: null };
      row[which] = r;
      out.set(k, row);
    }
  }
  for (const row of out.values()) {
    // Ratios where both runs have one (a ratio missing in one, its baseline did not run: values then).
    const both = finite(row.before?.ratio) !== null && finite(row.after?.ratio) !== null;
    const b = finite(both ? row.before?.ratio : row.before?.value);
    const a = finite(both ? row.after?.ratio : row.after?.value);
    row.change = a !== null && b !== null && b !== 0 ? a / b : null;
  }
  return [...out.values()].sort((x, y) => x.scenario - y.scenario);
}

function cell(r: Row | undefined): string {
  if (!r) return 'absent';
  const ratio = r.ratio !== undefined && r.ratio !== null && Number.isFinite(r.ratio) ? ` (${r.ratio.toFixed(2)}x)` : '';
  return `${fmt(r.value, r.unit)}${ratio} ${r.verdict}`;
}

export function formatComparison(rows: readonly ComparedRow[], names: [string, string]): string {
  const header = ['#', 'figure', names[0], names[1], 'after / before'];
  const lines = rows.map((r) => [String(r.scenario), r.figure, cell(r.before), cell(r.after), r.change === null ? '-' : `${r.change.toFixed(2)}x`]);
  const all = [header, ...lines];
  const widths = header.map((_, i) => Math.max(...all.map((l) => l[i]!.length)));
  const row = (cells: string[]) => `| ${cells.map((c, i) => c.padEnd(widths[i]!)).join(' | ')} |`;
  return [row(header), `|${widths.map((w) => '-'.repeat(w + 2)).join('|')}|`, ...lines.map(row)].join('\n');
}

export function compareFiles(beforePath: string, afterPath: string): string {
  const read = (p: string) => JSON.parse(readFileSync(p, 'utf8')) as Report;
  const before = read(beforePath);
  const after = read(afterPath);
  return formatComparison(compareRuns(before, after), [`${before.startedAt.slice(0, 10)} (before)`, `${after.startedAt.slice(0, 10)} (after)`]);
}
