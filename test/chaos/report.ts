// The chaos suite's summary: every scenario records what it tried (fault or bad input), how many
// times, and the outcome. Rows go to CHAOS_REPORT_DIR (set by `mirror test`, which prints the table
// after the run); a file run alone prints its own rows when it ends.
import { appendFileSync, mkdirSync, readdirSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { basename, join } from 'node:path';

/** `small` inside `npm test`; `full` for `npm run test:chaos` (CHAOS_SCALE=full). */
export const chaosScale: 'small' | 'full' = process.env.CHAOS_SCALE === 'full' ? 'full' : 'small';

/** The value for this scale. */
export function scaled<T>(small: T, full: T): T {
  return chaosScale === 'full' ? full : small;
}

export interface ChaosRow {
  group: string;
  scenario: string;
  /** How many times the fault or bad input was applied (requests faulted, kills, events, inputs). */
  tries: number;
  outcome: string;
  passed: boolean;
  /** A known defect: the scenario runs as a `todo` test (the reason names the defect). */
  todo?: string;
  file?: string;
  ms?: number;
}

export const reportDir = process.env.CHAOS_REPORT_DIR ?? join(tmpdir(), `mirror-chaos-${process.pid}`);
const own: ChaosRow[] = [];

export function record(row: ChaosRow): void {
  own.push(row);
  mkdirSync(reportDir, { recursive: true });
  appendFileSync(join(reportDir, `${process.pid}.jsonl`), `${JSON.stringify(row)}\n`);
}

/**
 * Runs one scenario and records it: `fn` returns the number of tries and the outcome in words; a
 * thrown error is recorded as a failure (with its message) and rethrown, so the test fails too.
 */
export async function scenario(
  group: string,
  name: string,
  fn: () => Promise<{ tries: number; outcome: string }>,
  file?: string,
  options: { todo?: string } = {},
): Promise<void> {
  const started = Date.now();
  const where = { file: file && basename(file) };
  try {
    const r = await fn();
    record({ group, scenario: name, tries: r.tries, outcome: r.outcome, passed: true, ...where, ms: Date.now() - started });
  } catch (error) {
    const message = (error as Error).message.split('\n')[0]!.slice(0, 300);
    const tries = (error as { tries?: number }).tries ?? 0;
    if (options.todo)
      record({
        group,
        scenario: name,
        tries,
        outcome: `KNOWN DEFECT: ${options.todo} (${message})`,
        passed: false,
        todo: options.todo,
        ...where,
        ms: Date.now() - started,
      });
    else record({ group, scenario: name, tries, outcome: `FAILED: ${message}`, passed: false, ...where, ms: Date.now() - started });
    throw error;
  }
}

export function readRows(dir = reportDir): ChaosRow[] {
  let names: string[];
  try {
    names = readdirSync(dir).filter((n) => n.endsWith('.jsonl'));
  } catch {
    return [];
  }
  return names.flatMap((n) =>
    readFileSync(join(dir, n), 'utf8')
      .split('\n')
      .filter(Boolean)
      .map((l) => JSON.parse(l) as ChaosRow),
  );
}

/** The summary as a Markdown table, grouped and in a stable order. */
export function formatTable(rows: readonly ChaosRow[]): string {
  const sorted = [...rows].sort((a, b) => a.group.localeCompare(b.group) || a.scenario.localeCompare(b.scenario));
  const cell = (s: string) => s.replace(/\|/g, '\\|').replace(/\n/g, ' ');
  const lines = ['| group | fault or bad input | tries | outcome | result |', '| --- | --- | ---: | --- | --- |'];
  for (const r of sorted)
    lines.push(`| ${cell(r.group)} | ${cell(r.scenario)} | ${r.tries} | ${cell(r.outcome)} | ${r.passed ? 'pass' : r.todo ? 'todo' : 'FAIL'} |`);
  const failed = rows.filter((r) => !r.passed && !r.todo).length;
  const todo = rows.filter((r) => r.todo).length;
  const passed = rows.length - failed - todo;
  lines.push('', `${rows.length} scenarios: ${passed} passed, ${failed} failed, ${todo} known defects left as todo (scale: ${chaosScale}).`);
  return lines.join('\n');
}

/** For a file run alone (no CHAOS_REPORT_DIR): its own rows, printed at the end. */
export function printOwnRows(): void {
  if (process.env.CHAOS_REPORT_DIR || own.length === 0) return;
  console.log(`\nChaos summary (this file; logs of the mirror processes in ${join(reportDir, 'logs')}):\n${formatTable(own)}`);
}
