// The benchmark's one table: figure, value, limit or baseline, ratio, target, result. Printed as a
// Markdown table and written as JSON; a saved default run also writes its table into docs/benchmarks.md.
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { cpus, totalmem } from 'node:os';
import { basename, join } from 'node:path';
import { projectRoot } from './processes.ts';

export type Verdict = 'pass' | 'FAIL' | 'info' | 'error' | 'skipped';

export interface Row {
  scenario: number;
  figure: string;
  value: number | null;
  unit: string;
  /** The limit or baseline the value is compared with, when there is one. */
  reference?: { label: string; value: number | null; unit: string };
  ratio?: number | null;
  /** How the ratio (or value) is judged, as text: `>= 0.5`, `< 1000 ms`. */
  target?: string;
  verdict: Verdict;
  note?: string;
}

export interface Report {
  startedAt: string;
  finishedAt: string;
  wallSeconds: number;
  mode: 'default' | 'quick';
  options: Record<string, unknown>;
  machine: { cpus: number; cpuModel: string; memoryGiB: number; node: string; postgres?: string; platform: string };
  rows: Row[];
  notes: string[];
}

export function machineInfo(postgres?: string): Report['machine'] {
  return {
    cpus: cpus().length,
    cpuModel: cpus()[0]?.model ?? 'unknown',
    memoryGiB: Math.round(totalmem() / 2 ** 30),
    node: process.version,
    ...(postgres ? { postgres } : {}),
    platform: `${process.platform}-${process.arch}`,
  };
}

/** A judged figure: `higherIsBetter` says which way the ratio (or the value itself) must go. */
export function judged(base: Omit<Row, 'verdict' | 'ratio'> & { ratio?: number | null }, test: { min?: number; max?: number; on: 'ratio' | 'value' }): Row {
  const x = test.on === 'ratio' ? base.ratio : base.value;
  let verdict: Verdict = 'error';
  if (x !== null && x !== undefined && Number.isFinite(x)) {
    const ok = (test.min === undefined || x >= test.min) && (test.max === undefined || x <= test.max);
    verdict = ok ? 'pass' : 'FAIL';
  }
  return { ...base, verdict };
}

export function info(base: Omit<Row, 'verdict'>): Row {
  return { ...base, verdict: base.value === null ? 'error' : 'info' };
}

export function errorRow(scenario: number, figure: string, error: unknown): Row {
  return {
    scenario,
    figure,
    value: null,
    unit: '',
    verdict: 'error',
    note: (error instanceof Error ? error.message : String(error)).split('\n')[0]!.slice(0, 300),
  };
}

export function fmt(value: number | null | undefined, unit = ''): string {
  if (value === null || value === undefined || !Number.isFinite(value)) return '-';
  const abs = Math.abs(value);
  const digits = abs >= 100 ? 0 : abs >= 10 ? 1 : 2;
  const text = value.toLocaleString('en-US', { maximumFractionDigits: digits, minimumFractionDigits: 0 });
  return unit ? `${text} ${unit}` : text;
}

function ratioText(r: number | null | undefined): string {
  if (r === null || r === undefined || !Number.isFinite(r)) return '-';
  return `${r.toFixed(r >= 10 ? 1 : 2)}x`;
}

export function formatTable(rows: readonly Row[]): string {
  const header = ['#', 'figure', 'value', 'limit or baseline', 'ratio', 'target', 'result'];
  const lines = rows.map((r) => [
    String(r.scenario),
    r.figure,
    fmt(r.value, r.unit),
    r.reference ? `${r.reference.label} ${fmt(r.reference.value, r.reference.unit)}` : '-',
    ratioText(r.ratio),
    r.target ?? '-',
    r.verdict === 'info' ? '-' : r.verdict,
  ]);
  const all = [header, ...lines];
  const widths = header.map((_, i) => Math.max(...all.map((l) => l[i]!.length)));
  const row = (cells: string[]) => `| ${cells.map((c, i) => c.padEnd(widths[i]!)).join(' | ')} |`;
  return [row(header), `|${widths.map((w) => '-'.repeat(w + 2)).join('|')}|`, ...lines.map(row)].join('\n');
}

export function writeReport(report: Report, options: { save: boolean }): string[] {
  const dir = join(projectRoot, 'bench', 'results');
  mkdirSync(dir, { recursive: true });
  const text = `${JSON.stringify(report, null, 2)}\n`;
  const written = [join(dir, 'latest.json')];
  writeFileSync(written[0]!, text);
  if (options.save) {
    // A run of some scenarios (`--only`) is saved under a name that says which, beside the whole runs.
    const only = Array.isArray(report.options.only) ? `-only-${(report.options.only as number[]).join('-')}` : '';
    const dated = join(dir, `${report.startedAt.slice(0, 10)}${report.mode === 'quick' ? '-quick' : ''}${only}.json`);
    writeFileSync(dated, text);
    written.push(dated);
    if (report.mode === 'default') {
      const doc = join(projectRoot, 'docs', 'benchmarks.md');
      writeFileSync(doc, withLatestRun(readFileSync(doc, 'utf8'), report, `bench/results/${basename(dated)}`));
      written.push(doc);
    }
  }
  return written;
}

const latestStart = '<!-- latest run: written by `npm run bench -- --save`; edits between these lines are replaced -->';
const latestEnd = '<!-- latest run: end -->';

/** `, scenarios 1, 2 and 5 (--only)` for a run of some scenarios; nothing for a whole run. */
function scenariosRun(report: Report): string {
  const only = report.options.only;
  if (!Array.isArray(only) || only.length === 0) return '';
  const n = only as number[];
  return `, scenarios ${n.length === 1 ? n[0] : `${n.slice(0, -1).join(', ')} and ${n[n.length - 1]}`} (\`--only\`)`;
}

/** The benchmarks document with its latest-run section (between its two marker lines) replaced by this run's table. */
export function withLatestRun(doc: string, report: Report, saved: string): string {
  const from = doc.indexOf(latestStart);
  const to = doc.indexOf(latestEnd);
  if (from < 0 || to < from) throw new Error(`docs/benchmarks.md: the latest run goes between the lines '${latestStart}' and '${latestEnd}'`);
  const m = report.machine;
  const section = [
    latestStart,
    '',
    `The latest saved default run: ${report.startedAt.slice(0, 10)}${scenariosRun(report)} (\`${saved}\`; ${m.cpus} cores, Node ${m.node.replace(/^v/, '')}, ` +
      `PostgreSQL ${m.postgres ?? 'unknown'}; ${fmt(report.wallSeconds)} s wall time). Compare the ratios, measured side by side in the ` +
      'same run; the absolute figures and the latency rows judged against fixed limits move between runs.',
    '',
    formatTable(report.rows),
    '',
    latestEnd,
  ].join('\n');
  return doc.slice(0, from) + section + doc.slice(to + latestEnd.length);
}

/** Percentile (0..100) of unsorted samples, nearest rank. */
export function percentile(samples: readonly number[], p: number): number | null {
  if (samples.length === 0) return null;
  const sorted = [...samples].sort((a, b) => a - b);
  const rank = Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1));
  return sorted[rank]!;
}
