// The chaos suite's summary after a run (`mirror test` starts it): `node --import tsx
// test/chaos/summary.ts <dir>`, the folder the suite's files recorded their scenarios in.
import { rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { formatTable, readRows } from './report.ts';

/** The chaos suite's summary: printed, and kept in CHAOS_SUMMARY_FILE if set. */
function printChaosSummary(dir: string): void {
  const rows = readRows(dir);
  // The logs are kept for a look at a failure (known defects left as todo do not count).
  const failed = rows.some((r) => !r.passed && !r.todo);
  if (rows.length > 0) {
    const table = formatTable(rows);
    const logs = failed || process.env.CHAOS_KEEP_LOGS ? ` (logs of the mirror processes: ${join(dir, 'logs')})` : '';
    console.error(`\nChaos suite summary${logs}:\n\n${table}\n`);
    if (process.env.CHAOS_SUMMARY_FILE) writeFileSync(process.env.CHAOS_SUMMARY_FILE, `${table}\n`);
  }
  if (!failed && !process.env.CHAOS_KEEP_LOGS) rmSync(dir, { recursive: true, force: true });
}

const dir = process.argv[2];
if (dir) printChaosSummary(dir);
