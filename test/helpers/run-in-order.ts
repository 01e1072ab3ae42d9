// Runs test files with node's test runner in the order given (bin/test-runner.ts hands them slowest
// first). `node --test <files>` sorts its files by name before it starts them; the runner's API
// takes them as listed. Usage: node --import tsx test/helpers/run-in-order.ts <concurrency> <files...>
// At the end it prints each file's wall time and CPU time, slowest first (all of them to the file
// TEST_TIMES_FILE names, if set), to keep test/slow-files.txt and the suite's time honest.
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, relative, resolve } from 'node:path';
import type { Readable } from 'node:stream';
import { run } from 'node:test';
import { spec, tap } from 'node:test/reporters';

const [concurrency, ...files] = process.argv.slice(2);
const started = Date.now();
// Every test file's process records its CPU time here (test/helpers/file-cpu.js, loaded by --import).
const cpuDir = mkdtempSync(join(tmpdir(), 'mirror-test-cpu-'));
process.env.TEST_FILE_CPU_DIR = cpuDir;
/** Each file's wall time in ms: its top-level test point, which spans the file's whole process. */
const wallMs = new Map<string, number>();

// The test processes get this process's --import flags (tsx), as those of `node --import tsx --test` do.
const stream = run({ files, concurrency: Number(concurrency) });
// As `node --test`: a failed test fails the run, a failed todo (a known defect) does not.
stream.on('test:fail', (data: { todo?: boolean | string }) => {
  if (data.todo === undefined || data.todo === false) process.exitCode = 1;
});
stream.on('test:complete', (data: { nesting: number; file?: string; details: { duration_ms: number } }) => {
  if (data.nesting !== 0 || !data.file) return;
  wallMs.set(data.file, Math.max(wallMs.get(data.file) ?? 0, data.details.duration_ms));
});
stream.compose<Readable>(process.stdout.isTTY ? new spec() : tap).pipe(process.stdout);

/** The CPU seconds each file's process recorded, by absolute path. */
function cpuSeconds(): Map<string, number> {
  const cpu = new Map<string, number>();
  for (const name of readdirSync(cpuDir)) {
    cpu.set(Buffer.from(name.replace(/\.cpu$/, ''), 'base64url').toString(), Number(readFileSync(join(cpuDir, name), 'utf8')));
  }
  return cpu;
}

process.on('exit', () => {
  const cpu = cpuSeconds();
  rmSync(cpuDir, { recursive: true, force: true });
  const rows = files.map((f) => ({ file: f, wall: (wallMs.get(resolve(f)) ?? 0) / 1000, cpu: cpu.get(resolve(f)) })).sort((a, b) => b.wall - a.wall);
  const line = (r: (typeof rows)[number]) =>
    `${r.wall.toFixed(1).padStart(7)} ${(r.cpu?.toFixed(1) ?? '-').padStart(7)}  ${relative(process.cwd(), resolve(r.file))}`;
  const totalCpu = rows.reduce((sum, r) => sum + (r.cpu ?? 0), 0);
  const totalWall = rows.reduce((sum, r) => sum + r.wall, 0);
  const head = `test files: ${rows.length}, run ${((Date.now() - started) / 1000).toFixed(0)} s; summed per file: wall ${totalWall.toFixed(0)} s, CPU ${totalCpu.toFixed(0)} s`;
  const table = ['  wall s   cpu s  file (slowest first)', ...rows.map(line)];
  if (process.env.TEST_TIMES_FILE) writeFileSync(process.env.TEST_TIMES_FILE, `${head}\n${table.join('\n')}\n`);
  if (rows.length > 1) process.stderr.write(`\n${head}\n${table.slice(0, 26).join('\n')}\n`);
});
