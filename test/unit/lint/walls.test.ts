// The walls between the folders (eslint.config.js): a snippet that crosses each wall, linted
// as if it were a file of that folder, is reported; one that keeps to its side is not. Runs ESLint's
// Node API on the repository's own config (type-aware rules off: the walls need no types, and the
// snippets are not files of the TypeScript project). Also: no import circle among the source files.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, relative, resolve } from 'node:path';
import { after, describe, it } from 'node:test';
import { ESLint } from 'eslint';
import tseslint from 'typescript-eslint';

const root = resolve(import.meta.dirname, '../../..');
// WALLS_ESLINT_CONFIG: another config file to hold to the same cases (to see this test fail on a config
// without a wall); by default the repository's own.
const eslint = new ESLint({
  cwd: root,
  ...(process.env.WALLS_ESLINT_CONFIG ? { overrideConfigFile: resolve(process.env.WALLS_ESLINT_CONFIG) } : {}),
  overrideConfig: [{ files: ['**/*.ts'], ...tseslint.configs.disableTypeChecked }],
});

const wallRules = new Set(['no-restricted-globals', '@typescript-eslint/no-restricted-imports', 'no-restricted-syntax', 'mirror/no-module-state']);

/** The wall rules' reports for `code` as the file `filePath` (relative to the repository). */
async function walls(filePath: string, code: string): Promise<string[]> {
  const [result] = await eslint.lintText(code, { filePath: join(root, filePath) });
  const fatal = result!.messages.filter((m) => m.fatal);
  assert.deepEqual(fatal, [], `${filePath} did not parse`);
  return result!.messages.filter((m) => m.ruleId !== null && wallRules.has(m.ruleId)).map((m) => `${m.ruleId}: ${m.message}`);
}

interface Case {
  file: string;
  code: string;
  /** Whether a wall rule must report it. */
  crosses: boolean;
}

const sql = 'SELECT id FROM records WHERE account_id = $1';
const cases: Record<string, Case[]> = {
  'lib/ imports nothing from other project folders': [
    { file: 'lib/probe.ts', code: "import { createPool } from '../mirror/db/pool.ts';\nexport const x = createPool;", crosses: true },
    { file: 'lib/probe.ts', code: "import type { Pool } from '../mirror/db/pool.ts';\nexport type X = Pool;", crosses: true },
    { file: 'lib/probe.ts', code: "import { upstreamHeaders } from '../connectors/upstream-client.ts';\nexport const x = upstreamHeaders;", crosses: true },
    { file: 'lib/probe.ts', code: "import { buildApp } from '../api/app.ts';\nexport const x = buildApp;", crosses: true },
    { file: 'lib/probe.ts', code: "import { runs } from '../sandbox/server.ts';\nexport const x = runs;", crosses: true },
    { file: 'lib/probe.ts', code: "import { MirrorError } from './errors.ts';\nexport const x = MirrorError;", crosses: false },
  ],
  'sandbox/ imports only lib/': [
    { file: 'sandbox/webhooks/probe.ts', code: "import { listPage } from '../../connectors/operations.ts';\nexport const x = listPage;", crosses: true },
    { file: 'sandbox/webhooks/probe.ts', code: "import type { Pool } from '../../mirror/db/pool.ts';\nexport type X = Pool;", crosses: true },
    { file: 'sandbox/probe.ts', code: "import { buildApp } from '../api/app.ts';\nexport const x = buildApp;", crosses: true },
    {
      file: 'sandbox/webhooks/probe.ts',
      code: "import { MirrorError } from '../../lib/errors.ts';\nimport { Rng } from '../data/random.ts';\nexport const x = [MirrorError, Rng];",
      crosses: false,
    },
  ],
  'mirror/ knows nothing above it': [
    { file: 'mirror/probe.ts', code: "import { listPage } from '../connectors/operations.ts';\nexport const x = listPage;", crosses: true },
    {
      file: 'mirror/probe.ts',
      code: "import type { UpstreamObservation } from '../connectors/upstream-client.ts';\nexport type X = UpstreamObservation;",
      crosses: true,
    },
    { file: 'mirror/probe.ts', code: "import { buildApp } from '../api/app.ts';\nexport const x = buildApp;", crosses: true },
    { file: 'mirror/probe.ts', code: "import { createSyncActivities } from '../activities/sync.ts';\nexport const x = createSyncActivities;", crosses: true },
    { file: 'mirror/probe.ts', code: "import { rootMessage } from '../workflows/shared.ts';\nexport const x = rootMessage;", crosses: true },
    { file: 'mirror/probe.ts', code: "import { createServices } from '../bin/services.ts';\nexport const x = createServices;", crosses: true },
    { file: 'mirror/reads/probe.ts', code: "import { buildApp } from '../../api/app.ts';\nexport const x = buildApp;", crosses: true },
    { file: 'mirror/reads/probe.ts', code: "import { createPool } from '../db/pool.ts';\nexport const x = createPool;", crosses: false },
    {
      file: 'mirror/probe.ts',
      code: `import pg from 'pg';\nimport { PrismaPg } from '@prisma/adapter-pg';\nexport const q = \`${sql}\`;\nexport const x = [pg, PrismaPg] as const;`,
      crosses: false,
    },
  ],
  'connectors/ takes mirror/ as types only, and knows nothing above it': [
    { file: 'connectors/probe.ts', code: "import { createPool } from '../mirror/db/pool.ts';\nexport const x = createPool;", crosses: true },
    {
      file: 'connectors/governor/probe.ts',
      code: "import { PostgresRateBudgets } from '../../mirror/control/rate-budgets.ts';\nexport const x = PostgresRateBudgets;",
      crosses: true,
    },
    { file: 'connectors/probe.ts', code: "import { buildApp } from '../api/app.ts';\nexport const x = buildApp;", crosses: true },
    {
      file: 'connectors/probe.ts',
      code: "import { createSyncActivities } from '../activities/sync.ts';\nexport const x = createSyncActivities;",
      crosses: true,
    },
    { file: 'connectors/probe.ts', code: "import { rootMessage } from '../workflows/shared.ts';\nexport const x = rootMessage;", crosses: true },
    { file: 'connectors/probe.ts', code: "import { createServices } from '../bin/services.ts';\nexport const x = createServices;", crosses: true },
    { file: 'connectors/probe.ts', code: "import pg from 'pg';\nexport const x = pg;", crosses: true },
    { file: 'connectors/probe.ts', code: `export const q = '${sql}';`, crosses: true },
    {
      file: 'connectors/probe.ts',
      code: "import type { Pool } from '../mirror/db/pool.ts';\nimport { request } from 'undici';\nexport type X = Pool;\nexport const x = request;",
      crosses: false,
    },
  ],
  'activities/ reach neither api/ nor bin/': [
    { file: 'activities/probe.ts', code: "import { buildApp } from '../api/app.ts';\nexport const x = buildApp;", crosses: true },
    { file: 'activities/probe.ts', code: "import { createServices } from '../bin/services.ts';\nexport const x = createServices;", crosses: true },
    {
      file: 'activities/probe.ts',
      code: "import { listPage } from '../connectors/operations.ts';\nimport { liveRecordIds } from '../mirror/streams/known-ids.ts';\nexport const x = [listPage, liveRecordIds];",
      crosses: false,
    },
  ],
  'api/ reaches neither activities/ nor bin/': [
    {
      file: 'api/routes/probe.ts',
      code: "import { createSyncActivities } from '../../activities/sync.ts';\nexport const x = createSyncActivities;",
      crosses: true,
    },
    { file: 'api/probe.ts', code: "import { createServices } from '../bin/services.ts';\nexport const x = createServices;", crosses: true },
    {
      file: 'api/routes/probe.ts',
      code: "import { RecordReader } from '../../mirror/reads/records-read.ts';\nimport { header } from '../auth.ts';\nexport const x = [RecordReader, header];",
      crosses: false,
    },
  ],
  'bin/ imports neither test/ nor bench/': [
    { file: 'bin/commands/probe.ts', code: "import { runBench } from '../../bench/run.ts';\nexport const x = runBench;", crosses: true },
    { file: 'bin/probe.ts', code: "export async function f() {\n  return import('../bench/run.ts');\n}", crosses: true },
    { file: 'bin/probe.ts', code: "import { startHarness } from '../test/helpers/harness.ts';\nexport const x = startHarness;", crosses: true },
    { file: 'bin/probe.ts', code: "import type { Report } from '../bench/lib/report.ts';\nexport type X = Report;", crosses: true },
    { file: 'bin/probe.ts', code: "import { runDevEntry } from './dev-entry.ts';\nexport const x = () => runDevEntry('bench/main.ts', []);", crosses: false },
  ],
  'global fetch in connectors/ only': [
    { file: 'bin/commands/probe.ts', code: "export const f = () => fetch('http://127.0.0.1:4010/link/account');", crosses: true },
    // The doctor's upstream checks go through the upstream client like every other call.
    { file: 'bin/commands/doctor.ts', code: "export const f = () => fetch('http://127.0.0.1:4010/link/token/create');", crosses: true },
    { file: 'api/probe.ts', code: "export const f = () => fetch('http://127.0.0.1:4010/customers');", crosses: true },
    { file: 'mirror/reads/probe.ts', code: "export const f = () => globalThis.fetch('http://x');\nexport const g = () => fetch('http://x');", crosses: true },
    { file: 'connectors/probe.ts', code: "export const f = () => fetch('http://127.0.0.1:4010/customers');", crosses: false },
    { file: 'test/helpers/probe.ts', code: "export const f = () => fetch('http://127.0.0.1:4010/customers');", crosses: false },
    { file: 'bench/probe.ts', code: "export const f = () => fetch('http://127.0.0.1:4010/customers');", crosses: false },
    { file: 'sandbox/probe.ts', code: "export const f = () => fetch('http://127.0.0.1:4000/webhooks');", crosses: false },
  ],
  'SQL, Prisma and pg in mirror/ only': [
    { file: 'api/probe.ts', code: `export const q = '${sql}';`, crosses: true },
    { file: 'api/routes/probe.ts', code: 'export const q = (id: string) => `SELECT * FROM records WHERE id = ${id}`;', crosses: true },
    { file: 'activities/probe.ts', code: 'export const q = `\n  INSERT INTO inbox_events (id) VALUES ($1)`;', crosses: true },
    { file: 'activities/probe.ts', code: "export const q = 'UPDATE subscriptions SET failures = failures + 1';", crosses: true },
    { file: 'bin/commands/probe.ts', code: "export const q = 'DELETE FROM records WHERE account_id = $1';", crosses: true },
    { file: 'lib/probe.ts', code: 'export const q = `WITH cur AS (SELECT 1) SELECT * FROM cur`;', crosses: true },
    { file: 'workflows/probe.ts', code: `export const q = '${sql}';`, crosses: true },
    {
      file: 'api/probe.ts',
      code: 'export async function f(pool: { query(s: string): Promise<unknown> }) {\n  return pool.query(String(1));\n}',
      crosses: true,
    },
    {
      file: 'api/probe.ts',
      code: 'export async function f(deps: { pool: { query(s: string): Promise<unknown> } }) {\n  return deps.pool.query(String(1));\n}',
      crosses: true,
    },
    {
      file: 'api/probe.ts',
      code: 'export async function f(deps: { prisma: { subscription: { findMany(): Promise<unknown> } } }) {\n  return deps.prisma.subscription.findMany();\n}',
      crosses: true,
    },
    {
      file: 'bin/commands/probe.ts',
      code: 'export async function f(prisma: { apiClient: { findMany(): Promise<unknown> } }) {\n  return prisma.apiClient.findMany();\n}',
      crosses: true,
    },
    { file: 'activities/probe.ts', code: "import pg from 'pg';\nexport const x = pg;", crosses: true },
    { file: 'api/probe.ts', code: "import { PrismaPg } from '@prisma/adapter-pg';\nexport const x = PrismaPg;", crosses: true },
    { file: 'api/probe.ts', code: "import { createPrisma } from '../mirror/db/prisma.ts';\nexport const x = createPrisma;", crosses: true },
    { file: 'activities/probe.ts', code: "import { PrismaClient } from '../prisma/generated/client.ts';\nexport const x = PrismaClient;", crosses: true },
    { file: 'bin/commands/probe.ts', code: "import pg from 'pg';\nexport const x = pg;", crosses: true },
    // What stays allowed: types of mirror/ everywhere, bin/ wiring the client, words that are not SQL.
    {
      file: 'api/probe.ts',
      code: "import type { PrismaClient } from '../mirror/db/prisma.ts';\nimport { findSubscription } from '../mirror/control/subscriptions.ts';\nexport const f = (prisma: PrismaClient) => findSubscription(prisma, 'x');",
      crosses: false,
    },
    {
      file: 'bin/probe.ts',
      code: "import { createPrisma } from '../mirror/db/prisma.ts';\nexport async function f() {\n  const prisma = createPrisma('postgres://x');\n  await prisma.$disconnect();\n}",
      crosses: false,
    },
    {
      file: 'api/probe.ts',
      code: "export const events = ['CREATE', 'UPDATE', 'DELETE'];\nexport const route = 'DELETE /webhooks/:id';\nexport const prose = 'Select a project first.';",
      crosses: false,
    },
    { file: 'test/probe.test.ts', code: `import pg from 'pg';\nexport const q = '${sql}';\nexport const x = pg;`, crosses: false },
    { file: 'bench/probe.ts', code: `export const q = '${sql}';`, crosses: false },
  ],
  'mirror/ holds no state in its modules': [
    { file: 'mirror/reads/probe.ts', code: 'export let hits = 0;', crosses: true },
    { file: 'mirror/reads/probe.ts', code: 'var seen;\nexport const f = () => seen;', crosses: true },
    { file: 'mirror/reads/probe.ts', code: 'const cache = new WeakMap<object, string>();\nexport const f = (k: object) => cache.get(k);', crosses: true },
    { file: 'mirror/probe.ts', code: 'const names = new Map<string, string>();\nexport const f = (k: string) => names.get(k);', crosses: true },
    { file: 'mirror/records/probe.ts', code: 'const ids = new Set<string>();\nexport const f = (k: string) => ids.has(k);', crosses: true },
    { file: 'mirror/reads/probe.ts', code: 'export const paths = { first: 0, offset: 0 };', crosses: true },
    { file: 'mirror/reads/probe.ts', code: 'const queue: string[] = [];\nexport const f = (x: string) => queue.push(x);', crosses: true },
    { file: 'mirror/reads/probe.ts', code: 'const keys = Object.keys({ a: 1 });\nexport const f = () => keys;', crosses: true },
    {
      file: 'mirror/reads/probe.ts',
      code: 'const remember = (() => {\n  const m = new Map();\n  return (k: string) => m.get(k);\n})();\nexport const f = remember;',
      crosses: true,
    },
    { file: 'mirror/reads/probe.ts', code: 'export class Reader {\n  static reads = 0;\n}', crosses: true },
    { file: 'mirror/reads/probe.ts', code: 'export class Reader {\n  static readonly seen = new Set<string>();\n}', crosses: true },
    { file: 'mirror/reads/probe.ts', code: 'const pool = new BufferPool() as BufferPool;\nexport const f = () => pool;', crosses: true },
    // Constants, and state kept in objects whose signature shows it.
    {
      file: 'mirror/reads/probe.ts',
      code: [
        "export const operators = ['=', '!='] as const;",
        'const buckets: readonly number[] = [1, 5];',
        "const refusals: ReadonlySet<string> = new Set(['22P02']);",
        'export const defaults: Readonly<{ ms: number }> = { ms: 1 };',
        'export const frozen = Object.freeze({ a: 1 });',
        'export const ttlMs = 1000;',
        'const key = (a: string, b: string) => `${a}/${b}`;',
        'export class Reader {',
        '  static readonly chunk = 100;',
        '  readonly #cache = new Map<string, string>();',
        '  #hits = 0;',
        '  get(k: string) {',
        '    this.#hits++;',
        '    return this.#cache.get(key(k, String(this.#hits)));',
        '  }',
        '}',
        'export const f = () => [buckets, refusals];',
      ].join('\n'),
      crosses: false,
    },
    // Elsewhere the rule does not apply (the API's own objects are made by buildApp).
    { file: 'api/probe.ts', code: 'const cache = new Map<string, string>();\nexport const f = (k: string) => cache.get(k);', crosses: false },
  ],
  'upstream HTTP in connectors/ only': [
    { file: 'api/probe.ts', code: "import { request } from 'undici';\nexport const x = request;", crosses: true },
    { file: 'api/routes/probe.ts', code: "import { Agent } from 'undici';\nexport const x = Agent;", crosses: true },
    { file: 'activities/probe.ts', code: "import { request } from 'undici';\nexport const x = request;", crosses: true },
    { file: 'mirror/probe.ts', code: "import { request } from 'undici';\nexport const x = request;", crosses: true },
    { file: 'lib/probe.ts', code: "import { fetch } from 'undici';\nexport const x = fetch;", crosses: true },
    // Not upstream calls: the subscribers' callbacks, the processes' own local HTTP, test helpers.
    { file: 'activities/delivery.ts', code: "import { request } from 'undici';\nexport const x = request;", crosses: false },
    { file: 'bin/probe.ts', code: "import { request } from 'undici';\nexport const x = request;", crosses: false },
    { file: 'test/helpers/probe.ts', code: "import { request } from 'undici';\nexport const x = request;", crosses: false },
    { file: 'connectors/probe.ts', code: "import { request } from 'undici';\nexport const x = request;", crosses: false },
  ],
};

describe('lint walls between folders', () => {
  for (const [wall, list] of Object.entries(cases)) {
    it(wall, async () => {
      for (const c of list) {
        const reports = await walls(c.file, c.code);
        if (c.crosses) assert.ok(reports.length > 0, `expected a report for ${c.file}:\n${c.code}`);
        else assert.deepEqual(reports, [], `expected no report for ${c.file}:\n${c.code}`);
      }
    });
  }
});

// Import circles: every relative import (`import type` too, since a type-only circle still ties the
// modules together for a reader) of the source folders, and a depth-first search for a back edge.
const sourceFolders = ['lib', 'sandbox', 'mirror', 'connectors', 'activities', 'api', 'workflows', 'bin'];

function sourceFiles(dir: string): string[] {
  return readdirSync(join(root, dir), { withFileTypes: true }).flatMap((e) =>
    e.isDirectory()
      ? e.name === 'generated'
        ? []
        : sourceFiles(join(dir, e.name))
      : e.name.endsWith('.ts') && !e.name.endsWith('.d.ts')
        ? [join(dir, e.name)]
        : [],
  );
}

function importGraph(files: readonly string[]): Map<string, string[]> {
  const known = new Set(files);
  const graph = new Map<string, string[]>();
  for (const file of files) {
    const text = readFileSync(join(root, file), 'utf8');
    const targets = [...text.matchAll(/^\s*(?:import|export)\b[^'"]*?\bfrom\s+['"](\.{1,2}\/[^'"]+)['"]/gm)]
      .map((m) => relative(root, resolve(root, dirname(file), m[1]!)))
      .filter((t) => known.has(t));
    graph.set(file, targets);
  }
  return graph;
}

function findCircle(graph: Map<string, string[]>): string[] | undefined {
  const state = new Map<string, 'open' | 'done'>();
  const path: string[] = [];
  const visit = (node: string): string[] | undefined => {
    state.set(node, 'open');
    path.push(node);
    for (const next of graph.get(node) ?? []) {
      if (state.get(next) === 'open') return [...path.slice(path.indexOf(next)), next];
      if (!state.has(next)) {
        const found = visit(next);
        if (found) return found;
      }
    }
    path.pop();
    state.set(node, 'done');
    return undefined;
  };
  for (const node of graph.keys()) {
    if (!state.has(node)) {
      const found = visit(node);
      if (found) return found;
    }
  }
  return undefined;
}

describe('import circles', () => {
  it('the circle finder finds one', () => {
    const graph = new Map([
      ['a.ts', ['b.ts']],
      ['b.ts', ['c.ts']],
      ['c.ts', ['a.ts']],
    ]);
    assert.deepEqual(findCircle(graph), ['a.ts', 'b.ts', 'c.ts', 'a.ts']);
    assert.equal(
      findCircle(
        new Map([
          ['a.ts', ['b.ts']],
          ['b.ts', []],
        ]),
      ),
      undefined,
    );
  });

  it('sandbox/ has none (type imports included)', () => {
    const circle = findCircle(importGraph(sourceFiles('sandbox')));
    assert.equal(circle, undefined, `import circle: ${circle?.join(' -> ')}`);
  });

  it('the source folders have none (type imports included)', () => {
    const circle = findCircle(importGraph(sourceFolders.flatMap(sourceFiles)));
    assert.equal(circle, undefined, `import circle: ${circle?.join(' -> ')}`);
  });
});

// Exports nothing imports: `npm run lint` runs scripts/unused-exports.ts, which exits non-zero and names
// each one (its own test, unused-exports.test.ts, covers what counts as a use).
describe('unused exports fail lint', () => {
  const tree = mkdtempSync(join(tmpdir(), 'walls-unused-'));
  after(() => rmSync(tree, { recursive: true, force: true }));
  const check = (files: Record<string, string>) => {
    rmSync(tree, { recursive: true, force: true });
    for (const [path, text] of Object.entries(files)) {
      mkdirSync(dirname(join(tree, path)), { recursive: true });
      writeFileSync(join(tree, path), text);
    }
    return spawnSync(process.execPath, ['--import', 'tsx', join(root, 'scripts/unused-exports.ts'), tree], { cwd: root, encoding: 'utf8' });
  };

  it('npm run lint runs the check', () => {
    const { scripts } = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')) as { scripts: Record<string, string> };
    assert.match(scripts.lint!, /node --import tsx scripts\/unused-exports\.ts/);
  });

  it('an export nothing imports fails it; one that something imports does not', () => {
    const probe = 'export const used = 1;\nexport const forgotten = 2;\n';
    const failed = check({ 'mirror/reads/probe.ts': probe, 'api/probe.ts': "import { used } from '../mirror/reads/probe.ts';\nvoid used;\n" });
    assert.equal(failed.status, 1, failed.stderr);
    assert.match(failed.stderr, /mirror\/reads\/probe\.ts: forgotten/);
    assert.doesNotMatch(failed.stderr, /: used/);
    const passed = check({
      'mirror/reads/probe.ts': probe,
      'api/probe.ts': "import { used, forgotten } from '../mirror/reads/probe.ts';\nvoid [used, forgotten];\n",
    });
    assert.equal(passed.status, 0, passed.stderr);
  });
});
