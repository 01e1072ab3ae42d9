// The production drill (`npm run drill`): the mirror deployed as its users deploy it, proven on one
// machine with processes. The release is built (`npm run build`) and installed into a clean
// directory with production dependencies only; a real Temporal server (go.temporal.io/server, built
// with `go install` into the per-user cache once) runs with PostgreSQL persistence, its schema set up
// by its own SQL tool; two workers and two API processes run from the release, configured by their
// environment alone. With two accounts linked and full passes running, it kills a worker with
// SIGKILL (the other finishes), kills an API process (the other keeps answering), restarts the
// Temporal server (the passes resume) and replaces the worker with one of another release directory
// mid-pass (a rolling upgrade). At the end the mirror holds exactly the sandbox's records: none
// lost, none duplicated, none half-written. It prints what happened with timings, and the start
// time and memory of the built API and worker against the ones run from the sources through tsx.
//
// Not part of `npm test` (it takes several minutes: docs/deploy.md). MIRROR_DRILL_FROM=<git ref>
// builds the first release from that commit (it must have `npm run build`), so the upgrade step
// replaces a worker of that release with one of today's. MIRROR_DRILL_KEEP=1 keeps its directory
// (releases, logs); MIRROR_DRILL_REUSE=<that directory> runs again on its releases without building.
import assert from 'node:assert/strict';
import { execFileSync, spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { cpSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { Connection } from '@temporalio/client';
import { msToTs } from '@temporalio/common';
import pg from 'pg';
import { projectRoot } from '../../bin/setup-steps.ts';
import { cacheDir, portOpen } from '../../bin/temporal-cli.ts';
import { freePort } from '../../bin/test-runner.ts';
import { workflowBundlePath } from '../../bin/workflow-bundle.ts';
import { childProcesses, LogCollector, MirrorProcess, waitFor } from '../helpers/processes.ts';
import { startChaosMirror, type ChaosMirror, type LinkedTestAccount } from './env.ts';
import { reportDir } from './report.ts';

export const temporalServerVersion = 'v1.29.1';
const adminUrl = process.env.TEST_DATABASE_URL ?? 'postgresql://postgres@127.0.0.1:5432/postgres';
const started = Date.now();
const seconds = (ms: number) => `${(ms / 1000).toFixed(1)} s`;
const events: { at: number; what: string }[] = [];

function say(what: string): void {
  const at = Date.now() - started;
  events.push({ at, what });
  console.log(`[${seconds(at).padStart(7)}] ${what}`);
}

function run(what: string, cmd: string, args: string[], options: { cwd?: string; env?: NodeJS.ProcessEnv } = {}): string {
  const r = spawnSync(cmd, args, { cwd: options.cwd ?? projectRoot, env: options.env ?? process.env, encoding: 'utf8', maxBuffer: 64 * 2 ** 20 });
  if (r.status !== 0) throw new Error(`${what} failed (exit ${r.status ?? r.signal}):\n${(r.stderr || r.stdout).slice(-2000)}`);
  return r.stdout;
}

// ---- The release ------------------------------------------------------------------------------

/** Builds the release of `source` (a checkout) and installs it into `dir` with production dependencies only. */
function buildRelease(source: string, dir: string): void {
  run(`npm run build in ${source}`, process.execPath, ['--import', 'tsx', join(source, 'scripts/build.ts')], { cwd: source });
  mkdirSync(dir, { recursive: true });
  cpSync(join(source, 'dist'), join(dir, 'dist'), { recursive: true });
  for (const f of ['package.json', 'package-lock.json']) cpSync(join(source, f), join(dir, f));
  run('npm ci --omit=dev --omit=optional', 'npm', ['ci', '--omit=dev', '--omit=optional', '--prefer-offline', '--no-audit', '--no-fund', '--loglevel=error'], {
    cwd: dir,
  });
  for (const tool of ['tsx', 'typescript', 'prisma'])
    assert.ok(!existsSync(join(dir, 'node_modules', tool)), `the release's node_modules hold no ${tool}: production dependencies only`);
}

/** A second installation of a release (another host's): its own directory, node_modules hard-linked. */
function copyRelease(from: string, to: string): void {
  mkdirSync(to, { recursive: true });
  cpSync(join(from, 'dist'), join(to, 'dist'), { recursive: true });
  for (const f of ['package.json', 'package-lock.json']) cpSync(join(from, f), join(to, f));
  execFileSync('cp', ['-al', join(from, 'node_modules'), join(to, 'node_modules')]);
}

// ---- The Temporal server ----------------------------------------------------------------------

/** The Temporal server and its SQL tool, built with `go install` into the per-user cache once; and its schema files. */
function ensureTemporalServer(): { server: string; sqlTool: string; schemaDir: string } {
  const dir = join(cacheDir(), `temporal-server-${temporalServerVersion}`);
  const server = join(dir, 'server');
  const sqlTool = join(dir, 'sql');
  const module = `go.temporal.io/server@${temporalServerVersion}`;
  if (!existsSync(server) || !existsSync(sqlTool)) {
    say(`building the Temporal server ${temporalServerVersion} and its SQL tool with Go into ${dir} (minutes, once)`);
    mkdirSync(dir, { recursive: true });
    run(
      'go install',
      'go',
      ['install', `go.temporal.io/server/cmd/server@${temporalServerVersion}`, `go.temporal.io/server/cmd/tools/sql@${temporalServerVersion}`],
      {
        env: { ...process.env, GOBIN: dir, CGO_ENABLED: '0' },
      },
    );
  }
  // The schema files are in the module's source (in Go's module cache after the build).
  const { Dir } = JSON.parse(run('go mod download', 'go', ['mod', 'download', '-json', module])) as { Dir: string };
  return { server, sqlTool, schemaDir: join(Dir, 'schema/postgresql/v12') };
}

interface TemporalServer {
  address: string;
  databases: string[];
  start(): Promise<void>;
  stop(): Promise<void>;
  /** Drops its two databases (after stop). */
  drop(): Promise<void>;
}

/** Temporal's two databases, set up by its SQL tool as an operator would, and a server on them. */
async function temporalServer(name: string, logs: LogCollector, root: string): Promise<TemporalServer> {
  const { server, sqlTool, schemaDir } = ensureTemporalServer();
  const db = new URL(adminUrl);
  const databases = [name, `${name}_visibility`];
  const drop = async () => {
    const admin = new pg.Client({ connectionString: adminUrl });
    await admin.connect();
    try {
      for (const d of databases) await admin.query(`DROP DATABASE IF EXISTS ${d} WITH (FORCE)`);
    } finally {
      await admin.end();
    }
  };
  await drop();
  const sql = (database: string, ...args: string[]) =>
    run(`temporal-sql-tool ${args[0]}`, sqlTool, [
      '--plugin',
      'postgres12',
      '--ep',
      db.hostname,
      '-p',
      db.port || '5432',
      '-u',
      decodeURIComponent(db.username || 'postgres'),
      ...(db.password ? ['--pw', decodeURIComponent(db.password)] : []),
      '--db',
      database,
      ...args,
    ]);
  for (const [database, kind] of [
    [databases[0]!, 'temporal'],
    [databases[1]!, 'visibility'],
  ] as const) {
    sql(database, 'create-database');
    sql(database, 'setup-schema', '-v', '0.0');
    sql(database, 'update-schema', '-d', join(schemaDir, kind, 'versioned'));
  }
  // Its configuration: the module's development-postgres12.yaml with this drill's databases and ports.
  mkdirSync(join(root, 'config'), { recursive: true });
  // Temporal keeps a membership port in a smallint column: every port below 32768, not from the ephemeral range.
  const p: number[] = [];
  while (p.length < 9) {
    const port = 20_000 + Math.floor(Math.random() * 12_000);
    if (!p.includes(port) && (await portFree(port))) p.push(port);
  }
  const store = (database: string, conns: number) => `
      sql:
        pluginName: postgres12
        databaseName: ${database}
        connectAddr: "${db.hostname}:${db.port || '5432'}"
        connectProtocol: tcp
        user: "${decodeURIComponent(db.username || 'postgres')}"
        password: "${decodeURIComponent(db.password)}"
        maxConns: ${conns}
        maxIdleConns: ${conns}
        maxConnLifetime: 1h`;
  writeFileSync(join(root, 'config', 'dynamic.yaml'), 'limit.maxIDLength:\n  - value: 255\n    constraints: {}\n');
  writeFileSync(
    join(root, 'config', 'drill.yaml'),
    `log:
  stdout: true
  level: warn
persistence:
  defaultStore: default
  visibilityStore: visibility
  numHistoryShards: 4
  datastores:
    default:${store(databases[0]!, 20)}
    visibility:${store(databases[1]!, 4)}
global:
  membership:
    maxJoinDuration: 30s
    broadcastAddress: "127.0.0.1"
services:
  frontend:
    rpc: { grpcPort: ${p[0]}, membershipPort: ${p[1]}, httpPort: ${p[2]}, bindOnLocalHost: true }
  matching:
    rpc: { grpcPort: ${p[3]}, membershipPort: ${p[4]}, bindOnLocalHost: true }
  history:
    rpc: { grpcPort: ${p[5]}, membershipPort: ${p[6]}, bindOnLocalHost: true }
  worker:
    rpc: { grpcPort: ${p[7]}, membershipPort: ${p[8]}, bindOnLocalHost: true }
clusterMetadata:
  enableGlobalNamespace: false
  failoverVersionIncrement: 10
  masterClusterName: active
  currentClusterName: active
  clusterInformation:
    active:
      enabled: true
      initialFailoverVersion: 1
      rpcName: frontend
      rpcAddress: "127.0.0.1:${p[0]}"
dcRedirectionPolicy:
  policy: noop
dynamicConfigClient:
  filepath: "${join(root, 'config', 'dynamic.yaml')}"
  pollInterval: 10s
`,
  );
  const address = `127.0.0.1:${p[0]}`;
  let child: ChildProcess | undefined;
  let incarnation = 0;
  return {
    address,
    databases,
    drop,
    async start() {
      incarnation++;
      const label = incarnation === 1 ? 'temporal' : `temporal#${incarnation}`;
      child = spawn(server, ['--root', root, '--config', 'config', '--env', 'drill', '--allow-no-auth', 'start'], { stdio: ['ignore', 'pipe', 'pipe'] });
      for (const stream of ['stdout', 'stderr'] as const)
        child[stream]!.on('data', (d: Buffer) => logs.add({ process: label, stream, line: d.toString().trimEnd() }));
      const c = child;
      await waitFor(
        'the Temporal server to answer',
        () => (c.exitCode !== null ? Promise.reject(new Error(`exited ${c.exitCode}`)) : portOpen('127.0.0.1', p[0]!)),
        {
          timeoutMs: 120_000,
          intervalMs: 200,
        },
      );
      // The mirror's namespace, made once; usable once the frontend's namespace cache knows it.
      const connection = await Connection.connect({ address });
      try {
        await waitFor(
          'the namespace `default`',
          async () => {
            try {
              await connection.workflowService.describeNamespace({ namespace: 'default' });
            } catch {
              await connection.workflowService
                .registerNamespace({ namespace: 'default', workflowExecutionRetentionPeriod: msToTs('1 day') })
                .catch(() => undefined);
              return false;
            }
            await connection.workflowService.listWorkflowExecutions({ namespace: 'default', pageSize: 1 });
            return true;
          },
          { timeoutMs: 120_000, intervalMs: 500 },
        );
      } finally {
        await connection.close();
      }
    },
    async stop() {
      const c = child;
      if (!c || c.exitCode !== null || c.signalCode !== null) return;
      const exited = new Promise((resolve) => c.once('exit', resolve));
      c.kill('SIGTERM');
      await Promise.race([exited, sleep(30_000)]);
      if (c.exitCode === null && c.signalCode === null) {
        c.kill('SIGKILL');
        await exited;
      }
    },
  };
}

function portFree(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const server = createServer();
    server.once('error', () => resolve(false));
    server.listen(port, '127.0.0.1', () => server.close(() => resolve(true)));
  });
}

// ---- Start time and memory, built against tsx -------------------------------------------------

function rssMb(pid: number): number {
  const m = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
  return m ? Number(m[1]) / 1024 : 0;
}

interface StartFigure {
  command: 'api' | 'worker';
  from: 'release (node)' | 'sources (tsx)';
  ms: number;
  /** The process that serves (the child bin/mirror.js starts with its settings). */
  rss: number;
  /** It and the small parent that started it. */
  total: number;
}

async function measureStart(command: 'api' | 'worker', root: string, env: Record<string, string>, logs: LogCollector): Promise<StartFigure> {
  const port = await freePort();
  const proc = new MirrorProcess({
    command,
    env: { ...env, TEMPORAL_TASK_QUEUE: 'drill-start-time', LOG_LEVEL: 'info' },
    logs,
    port,
    root,
    name: `measure-${command}`,
  });
  const t0 = performance.now();
  await proc.start();
  const ms = performance.now() - t0;
  // RSS once the process has settled after its start.
  await sleep(2000);
  const parent = proc.pid!;
  const children = childProcesses(parent).map((c) => c.pid);
  const rss = children.length ? rssMb(children[0]!) : rssMb(parent);
  const total = rssMb(parent) + children.reduce((s, pid) => s + rssMb(pid), 0);
  await proc.stop();
  return { command, from: root === projectRoot ? 'sources (tsx)' : 'release (node)', ms, rss, total };
}

// ---- The drill --------------------------------------------------------------------------------

interface Step {
  step: string;
  ms: number;
  outcome: string;
}

/** Slows each page of an account's customers, so the disruptions land mid-pass. */
async function slowCustomers(m: ChaosMirror, perPage: number, pages: number, delayMs: number): Promise<void> {
  for (let p = 1; p <= pages + 1; p++)
    await m.fault({ kind: 'slow', delay_ms: delayMs, match: { path: `^/customers\\?page=${p}&per_page=${perPage}$`, source_system: 'crmcloud' } });
}

async function midPass(m: ChaosMirror, account: LinkedTestAccount, page: number): Promise<void> {
  await waitFor(
    `customers to commit page ${page}`,
    async () => {
      const s = await m.stream(account.accountId, 'customers');
      return s?.checkpoint && !s.checkpoint.done && s.checkpoint.page > page;
    },
    { timeoutMs: 180_000, intervalMs: 50 },
  );
}

async function main(): Promise<number> {
  const work = mkdtempSync(join(tmpdir(), 'mirror-drill-'));
  const logs = new LogCollector(join(work, 'logs'));
  const steps: Step[] = [];
  const step = async (name: string, fn: () => Promise<string>) => {
    const t0 = Date.now();
    say(`${name} ...`);
    const outcome = await fn();
    steps.push({ step: name, ms: Date.now() - t0, outcome });
    say(`${name}: ${outcome} (${seconds(Date.now() - t0)})`);
  };
  const closers: (() => Promise<void>)[] = [];
  let failed = false;
  const starts: StartFigure[] = [];
  try {
    // 1. The releases.
    const head = execFileSync('git', ['rev-parse', 'HEAD'], { cwd: projectRoot, encoding: 'utf8' }).trim();
    const from = process.env.MIRROR_DRILL_FROM;
    const releaseA = join(work, 'release-a');
    const releaseB = join(work, 'release-b');
    // Each process reports its release's commit (as an image's MIRROR_COMMIT does).
    const fromCommit = from ? execFileSync('git', ['rev-parse', '--verify', `${from}^{commit}`], { cwd: projectRoot, encoding: 'utf8' }).trim() : undefined;
    const commits = { a: fromCommit ?? head, b: head };
    await step('build the release, install it with production dependencies only', async () => {
      const kept = process.env.MIRROR_DRILL_REUSE;
      if (kept) {
        // The releases of a drill kept with MIRROR_DRILL_KEEP, built and installed before.
        copyRelease(join(kept, 'release-a'), releaseA);
        copyRelease(join(kept, 'release-b'), releaseB);
        return `the releases of ${kept}, built before`;
      }
      if (from) {
        const commit = commits.a;
        const checkout = join(work, 'previous');
        run('git worktree add', 'git', ['worktree', 'add', '--detach', checkout, commit]);
        closers.push(async () => void spawnSync('git', ['worktree', 'remove', '--force', checkout], { cwd: projectRoot }));
        execFileSync('cp', ['-al', join(projectRoot, 'node_modules'), join(checkout, 'node_modules')]);
        cpSync(join(projectRoot, 'prisma/generated'), join(checkout, 'prisma/generated'), { recursive: true });
        buildRelease(checkout, releaseA);
        buildRelease(projectRoot, releaseB);
        return `release A from ${from} (${commit.slice(0, 12)}), release B from ${head.slice(0, 12)}, each in its own directory`;
      }
      buildRelease(projectRoot, releaseA);
      copyRelease(releaseA, releaseB);
      return `${releaseA} (dist/ and production node_modules: no tsx, typescript or prisma); a second installation for the upgrade step`;
    });

    // 2. Temporal with PostgreSQL persistence.
    let temporal!: TemporalServer;
    await step(`Temporal server ${temporalServerVersion} on PostgreSQL (schema by temporal-sql-tool)`, async () => {
      temporal = await temporalServer('temporal_drill', logs, join(work, 'temporal'));
      closers.push(async () => {
        await temporal.stop();
        await temporal.drop();
      });
      await temporal.start();
      return `serving at ${temporal.address}; databases ${temporal.databases.join(', ')}`;
    });

    // 3. The mirror: the sandbox upstream (the oracle) in this process; worker and API processes from release A.
    const size = Number(process.env.MIRROR_DRILL_SIZE ?? 1600);
    const m = await startChaosMirror({
      name: 'production-drill',
      temporalAddress: temporal.address,
      sandbox: { size },
      root: join(releaseA, 'dist'),
      env: { LOG_LEVEL: 'info', MIRROR_COMMIT: commits.a },
    });
    closers.push(() => m.close());
    const worker1 = m.worker;
    const api1 = m.api;
    const worker2 = new MirrorProcess({ command: 'worker', env: m.env, logs: m.logs, root: join(releaseA, 'dist'), name: 'worker-2' });
    const api2 = new MirrorProcess({ command: 'api', env: m.env, logs: m.logs, root: join(releaseA, 'dist'), name: 'api-2', port: await freePort() });
    closers.push(
      () => worker2.stop(),
      () => api2.stop(),
    );
    await Promise.all([worker2.start(), api2.start()]);
    say(`two workers (pids ${worker1.pid}, ${worker2.pid}) and two API processes (${api1.url}, ${api2.url}) from ${releaseA}`);

    // Start time and memory: the same commands from the release and from the sources, one after the other.
    await workflowBundlePath();
    await step('start time and RSS, release against sources', async () => {
      for (const command of ['api', 'worker'] as const)
        for (const root of [join(releaseA, 'dist'), projectRoot]) starts.push(await measureStart(command, root, m.env, logs));
      return starts.map((s) => `${s.command} ${s.from} ${Math.round(s.ms)} ms ${Math.round(s.rss)} MB`).join('; ');
    });

    const crm = await m.link('crmcloud');
    const field = await m.link('fieldops');
    const { data } = await m.admin<{ data: { slug: string; max_per_page: number }[] }>('GET', '/_admin/source-systems');
    const perPage = data.find((p) => p.slug === 'crmcloud')!.max_per_page;
    const pages = Math.ceil(size / perPage);
    await slowCustomers(m, perPage, pages, 400);
    say(`accounts linked: crmcloud (${size} customers, ${pages} pages of ${perPage}, each page slowed to 400 ms) and fieldops`);
    const passBoth = async () => [
      await m.sync.start({ accountId: crm.accountId, mode: 'full' }),
      await m.sync.start({ accountId: field.accountId, mode: 'full' }),
    ];
    const finish = async (runs: { workflowId: string }[]) => {
      for (const r of runs) {
        const result = await m.resultWithin(r.workflowId, 300_000);
        assert.deepEqual(result.failed, [], `no stream of ${r.workflowId} failed`);
      }
    };

    // 4. kill -9 of a worker mid-pass: the other finishes the pass.
    await step('kill -9 a worker mid-pass', async () => {
      const runs = await passBoth();
      await midPass(m, crm, 2);
      const t0 = Date.now();
      await worker1.kill9();
      await finish(runs);
      return `worker 1 killed at customers page 2+; worker 2 finished both passes ${seconds(Date.now() - t0)} later`;
    });

    // 5. kill -9 of an API process: the other keeps answering, during the outage and after.
    await step('kill -9 an API process while the other answers', async () => {
      const runs = await passBoth();
      await midPass(m, crm, 2);
      await api1.kill9();
      let answered = 0;
      const t0 = Date.now();
      while (Date.now() - t0 < 3000) {
        const res = await fetch(`${api2.url}/customers?page=1&per_page=50`, { headers: { ...m.clientHeaders, 'account-token': crm.accountToken } });
        const body = await res.text();
        assert.equal(res.status, 200, `API 2 answers while API 1 is down: ${res.status} ${body.slice(0, 200)}`);
        answered++;
      }
      await finish(runs);
      await api1.start();
      return `${answered} reads answered 200 by API 2 in the 3 s after API 1 died; API 1 started again`;
    });

    // 6. The Temporal server stops and starts again mid-pass: the passes resume.
    await step('restart the Temporal server mid-pass', async () => {
      const runs = await passBoth();
      await midPass(m, crm, 2);
      const t0 = Date.now();
      await temporal.stop();
      const down = Date.now();
      await sleep(2000);
      await temporal.start();
      const up = Date.now() - down;
      await finish(runs);
      return `stopped after ${seconds(down - t0)}, serving again ${seconds(up)} later; both passes completed ${seconds(Date.now() - down)} after the stop`;
    });

    // 7. A rolling upgrade mid-pass: a worker of release B starts, the old worker stops cleanly.
    const metricsPort = await freePort();
    const worker3 = new MirrorProcess({
      command: 'worker',
      env: { ...m.env, MIRROR_COMMIT: commits.b, WORKER_METRICS_PORT: String(metricsPort) },
      logs: m.logs,
      root: join(releaseB, 'dist'),
      name: 'worker-b',
    });
    closers.push(() => worker3.stop());
    await step('upgrade: a worker of the newer release starts mid-pass, the old one stops', async () => {
      const runs = await passBoth();
      await midPass(m, crm, 2);
      await worker3.start();
      const t0 = Date.now();
      await worker2.stop(60_000);
      const stopped = Date.now() - t0;
      await finish(runs);
      return `old worker stopped (SIGTERM) in ${seconds(stopped)}; the new one finished both passes`;
    });

    // The image's health check (today's dist/bin/healthcheck.js): the API's /healthz, a worker's on its metrics port.
    const healthcheck = (env: Record<string, string>, ...args: string[]) =>
      spawnSync(process.execPath, [join(releaseB, 'dist/bin/healthcheck.js'), ...args], { env: { ...process.env, ...env }, encoding: 'utf8' }).status;
    await step('health checks of the image, from the release', async () => {
      assert.equal(healthcheck({ API_PORT: new URL(api2.url).port }), 0, "the API's health check passes");
      assert.equal(healthcheck({ MIRROR_HEALTHCHECK_URL: `http://127.0.0.1:${metricsPort}/healthz` }), 0, "the worker's health check passes");
      assert.equal(healthcheck({}, `http://127.0.0.1:${await freePort()}/healthz`), 1, 'a process that does not answer fails it');
      return `API (${api2.url}/healthz) and worker (:${metricsPort}/healthz) pass; nothing listening fails`;
    });

    // 8. The mirror equals the sandbox.
    await step('the mirror against the sandbox', async () => {
      await m.clearFaults();
      const exact = [await m.assertExact(crm), await m.assertExact(field)];
      for (const a of [crm, field]) {
        const streams = await m.streams(a.accountId);
        const notSynced = streams.filter((s) => s.state !== 'synced' || (s.checkpoint && !s.checkpoint.done));
        assert.deepEqual(notSynced, [], `every stream of ${a.sourceSystem} synced, none left half-written`);
      }
      const { rows } = await m.services.pool.query<{ n: number }>(
        `SELECT count(*)::int AS n FROM (SELECT 1 FROM records WHERE account_id = ANY($1) GROUP BY account_id, resource, scope, id HAVING count(*) > 1) d`,
        [[crm.accountId, field.accountId]],
      );
      assert.equal(rows[0]!.n, 0, 'no record twice');
      const records = exact.reduce((s, e) => s + e.records, 0);
      const streams = exact.reduce((s, e) => s + e.streams, 0);
      return `${records} records in ${streams} streams equal the sandbox's: none lost, none duplicated, none half-written`;
    });
    const crashes = [api2, worker3, api1].flatMap((p) => p.crashes.map((c) => `${p.name} ${JSON.stringify(c)}`));
    assert.deepEqual(crashes, [], 'no process crashed but the ones the drill killed');
  } catch (error) {
    failed = true;
    say(`FAILED: ${(error as Error).stack ?? String(error)}`);
  } finally {
    for (const c of closers.reverse()) await c().catch(() => undefined);
  }

  console.log('\nProduction drill');
  console.log(steps.map((s) => `  ${s.step.padEnd(76)} ${seconds(s.ms).padStart(8)}  ${s.outcome}`).join('\n'));
  if (starts.length) {
    console.log('\nStart (spawn to ready: /healthz answers, or the worker polls) and RSS after 2 s, built against tsx');
    console.log('  command  from              start      RSS (server)   RSS (with its parent)');
    for (const s of starts)
      console.log(
        `  ${s.command.padEnd(8)} ${s.from.padEnd(17)} ${`${Math.round(s.ms)} ms`.padStart(8)}   ${`${Math.round(s.rss)} MB`.padStart(8)}       ${`${Math.round(s.total)} MB`.padStart(8)}`,
      );
    for (const command of ['api', 'worker'] as const) {
      const built = starts.find((s) => s.command === command && s.from === 'release (node)');
      const tsx = starts.find((s) => s.command === command && s.from === 'sources (tsx)');
      if (built && tsx)
        console.log(`  ${command}: start ${(built.ms / tsx.ms).toFixed(2)}x, RSS ${(built.rss / tsx.rss).toFixed(2)}x of the sources' (built / tsx)`);
    }
  }
  console.log(
    `\n${failed ? 'FAILED' : 'PASSED'} in ${seconds(Date.now() - started)}; logs in ${join(work, 'logs')} (Temporal) and ${join(reportDir, 'logs')} (the mirror)`,
  );
  if (!failed && !process.env.MIRROR_DRILL_KEEP) {
    rmSync(work, { recursive: true, force: true });
    if (!process.env.CHAOS_REPORT_DIR) rmSync(reportDir, { recursive: true, force: true });
  }
  return failed ? 1 : 0;
}

process.exitCode = await main();
