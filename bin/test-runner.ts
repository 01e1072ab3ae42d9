// `npm test`: makes sure Postgres answers and the Temporal CLI exists, starts one Temporal dev server
// (headless, in memory) for the whole run, then runs every test file with node's test runner. Each
// test file makes its own database and task queue, so files run in parallel, the slowest first.
import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join, relative } from 'node:path';
import { ensureDatabase } from '../mirror/db/database.ts';
import { migratedTemplate } from '../mirror/db/migrate.ts';
import { runDevEntry } from './dev-entry.ts';
import { projectRoot } from './setup-steps.ts';
import { startDevServer } from './temporal-cli.ts';
import { workflowBundlePath } from './workflow-bundle.ts';

function testFiles(dir: string): string[] {
  return readdirSync(dir).flatMap((name) => {
    const p = join(dir, name);
    if (statSync(p).isDirectory()) return name === 'helpers' ? [] : testFiles(p);
    return name.endsWith('.test.ts') ? [p] : [];
  });
}

/** The committed list of the slowest test files (test/slow-files.txt), slowest first: one path per line, `#` comments. */
export function readSlowFiles(file = join(projectRoot, 'test', 'slow-files.txt')): string[] {
  if (!existsSync(file)) return [];
  return readFileSync(file, 'utf8')
    .split('\n')
    .map((line) => line.replace(/#.*/, '').trim().split(/\s+/)[0] ?? '')
    .filter((p) => p.length > 0);
}

/**
 * The files in the order to start them: those of the slow list first, in its order, then the others
 * as given. With the long ones first the short ones fill the cores at the end instead of one long
 * file running alone.
 */
export function slowestFirst(files: string[], slow: string[]): string[] {
  const rank = new Map(slow.map((p, i) => [p, i]));
  const known = files.filter((f) => rank.has(f)).sort((a, b) => rank.get(a)! - rank.get(b)!);
  return [...known, ...files.filter((f) => !rank.has(f))];
}

export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as { port: number };
      server.close(() => resolve(port));
    });
  });
}

export async function runTests(only: string[]): Promise<number> {
  const serverUrl = process.env.TEST_DATABASE_URL ?? 'postgresql://postgres@127.0.0.1:5432/postgres';
  await ensureDatabase(serverUrl);
  // Every test file's migrated database is a copy of this one (test/helpers/database.ts).
  const template = await migratedTemplate(serverUrl, 'mirror_test_template');
  const port = await freePort();
  // The workflow bundle is built once here, so the files that start workers (several at once) find
  // it cached instead of each building it (webpack) for itself.
  await workflowBundlePath();
  const temporal = await startDevServer({ port, headless: true });
  // A directory given on the command line runs the test files under it (`mirror test test/chaos`).
  const given = (
    only.length > 0
      ? only.flatMap((f) => (existsSync(f) && statSync(f).isDirectory() ? testFiles(f).sort() : [f]))
      : testFiles(join(projectRoot, 'test')).sort()
  ).map((f) => (f.startsWith('/') ? relative(projectRoot, f) : f));
  const files = slowestFirst(given, readSlowFiles());
  // The chaos suite's files record their scenarios here; the summary table is printed at the end.
  const chaosDir = mkdtempSync(join(tmpdir(), 'mirror-chaos-'));
  console.error(`mirror: Temporal dev server at ${temporal.address}; running ${files.length} test files`);
  const concurrency = process.env.TEST_CONCURRENCY ?? '3';
  // Not `node --test`: it sorts the files by name; this helper starts them in the order given.
  // Each file's process records its CPU time (test/helpers/file-cpu.js) for the run's summary of times.
  const child = spawn(
    process.execPath,
    [
      '--import',
      'tsx',
      '--import',
      join(projectRoot, 'test', 'helpers', 'file-cpu.js'),
      join(projectRoot, 'test', 'helpers', 'run-in-order.ts'),
      concurrency,
      ...files,
    ],
    {
      cwd: projectRoot,
      stdio: 'inherit',
      env: {
        ...process.env,
        TEMPORAL_TEST_ADDRESS: temporal.address,
        TEST_DATABASE_URL: serverUrl,
        LOG_LEVEL: process.env.LOG_LEVEL ?? 'silent',
        CHAOS_REPORT_DIR: chaosDir,
        TEST_TEMPLATE_DATABASE: template,
      },
    },
  );
  const code = await new Promise<number>((resolve) => child.once('exit', (c, signal) => resolve(c ?? (signal ? 1 : 0))));
  await temporal.stop();
  // The chaos suite's summary: printed by the suite's own entry point (test/chaos/summary.ts).
  await runDevEntry('test/chaos/summary.ts', [chaosDir]);
  return code;
}
