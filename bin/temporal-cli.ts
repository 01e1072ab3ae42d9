// Finding or building the Temporal CLI (its dev server runs Temporal and its UI on one machine), and
// starting that dev server.
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { existsSync, mkdirSync } from 'node:fs';
import { createConnection } from 'node:net';
import { homedir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { ConfigError } from '../lib/errors.ts';

const temporalCliVersion = 'v1.5.1';

export function cacheDir(): string {
  return join(process.env.XDG_CACHE_HOME || join(homedir(), '.cache'), 'construction-mirror');
}

function onPath(name: string): string | undefined {
  const r = spawnSync('sh', ['-c', `command -v ${name}`], { encoding: 'utf8' });
  const p = r.stdout.trim();
  return r.status === 0 && p ? p : undefined;
}

/** A `temporal` executable: TEMPORAL_CLI, on PATH, cached, or built with `go install` into the cache. */
export function ensureTemporalCli(log: (line: string) => void = (l) => console.error(l)): string {
  if (process.env.TEMPORAL_CLI && existsSync(process.env.TEMPORAL_CLI)) return process.env.TEMPORAL_CLI;
  const found = onPath('temporal');
  if (found) return found;
  const dir = join(cacheDir(), `temporal-${temporalCliVersion}`);
  const cached = join(dir, 'temporal');
  if (existsSync(cached)) return cached;
  const go = onPath('go');
  if (go) {
    mkdirSync(dir, { recursive: true });
    log(`mirror: building the Temporal CLI ${temporalCliVersion} with Go into ${dir} (a few minutes, once) ...`);
    const r = spawnSync(go, ['install', `github.com/temporalio/cli/cmd/temporal@${temporalCliVersion}`], {
      stdio: ['ignore', 'inherit', 'inherit'],
      env: { ...process.env, GOBIN: dir, CGO_ENABLED: '0' },
    });
    if (r.status === 0 && existsSync(cached)) return cached;
  }
  throw new ConfigError(
    'The Temporal CLI is needed (its dev server runs Temporal locally) and could not be found or built. ' +
      'Install it (https://docs.temporal.io/cli#install, e.g. `brew install temporal`) and put `temporal` on PATH, ' +
      `or install Go and run \`go install github.com/temporalio/cli/cmd/temporal@${temporalCliVersion}\`, ` +
      'or point TEMPORAL_ADDRESS at a running Temporal server.',
  );
}

export function portOpen(host: string, port: number, timeoutMs = 500): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = createConnection({ host, port });
    const done = (ok: boolean) => {
      socket.destroy();
      resolve(ok);
    };
    socket.setTimeout(timeoutMs, () => done(false));
    socket.once('connect', () => done(true));
    socket.once('error', () => done(false));
  });
}

export function splitAddress(address: string): { host: string; port: number } {
  const i = address.lastIndexOf(':');
  return { host: address.slice(0, i) || '127.0.0.1', port: Number(address.slice(i + 1)) };
}

export interface DevServer {
  address: string;
  uiUrl: string | undefined;
  process: ChildProcess;
  stop(): Promise<void>;
}

/**
 * What the dev server needs for the mirror's task-queue priorities and per-account fairness keys
 * (lib/work-priority.ts): the matcher that knows them, fairness on, and one partition per task queue
 * (a backlog spread over the default four partitions is ordered within each partition only).
 */
const fairnessDynamicConfig: Record<string, boolean | number> = {
  'matching.useNewMatcher': true,
  'matching.enableFairness': true,
  'matching.numTaskqueueReadPartitions': 1,
  'matching.numTaskqueueWritePartitions': 1,
};

/** Starts `temporal server start-dev` (with `fairnessDynamicConfig` under the settings given) and waits until its frontend answers. */
export async function startDevServer(options: {
  port: number;
  uiPort?: number;
  dbFile?: string;
  headless?: boolean;
  log?: (l: string) => void;
  /** Server settings, e.g. `limit.historyCount.suggestContinueAsNew`. */ dynamicConfig?: Record<string, number | string | boolean>;
}): Promise<DevServer> {
  const cli = ensureTemporalCli(options.log);
  const args = ['server', 'start-dev', '--ip', '127.0.0.1', '--port', String(options.port), '--log-level', 'error'];
  if (options.headless) args.push('--headless');
  else if (options.uiPort) args.push('--ui-port', String(options.uiPort));
  if (options.dbFile) args.push('--db-filename', options.dbFile);
  for (const [key, value] of Object.entries({ ...fairnessDynamicConfig, ...options.dynamicConfig }))
    args.push('--dynamic-config-value', `${key}=${JSON.stringify(value)}`);
  const child = spawn(cli, args, { stdio: ['ignore', 'ignore', 'pipe'], detached: false });
  let stderr = '';
  child.stderr?.on('data', (d: Buffer) => {
    stderr = (stderr + d.toString()).slice(-4000);
  });
  const deadline = Date.now() + 60_000;
  while (!(await portOpen('127.0.0.1', options.port))) {
    if (child.exitCode !== null) throw new ConfigError(`The Temporal dev server exited at start (code ${child.exitCode}): ${stderr.trim().slice(-800)}`);
    if (Date.now() > deadline) {
      child.kill('SIGKILL');
      throw new ConfigError(`The Temporal dev server did not answer on port ${options.port} within 60 s: ${stderr.trim().slice(-800)}`);
    }
    await sleep(100);
  }
  // The port opens a moment before the namespace is ready; the worker retries its connection anyway.
  await sleep(300);
  return {
    address: `127.0.0.1:${options.port}`,
    uiUrl: options.headless ? undefined : `http://127.0.0.1:${options.uiPort ?? options.port + 1000}`,
    process: child,
    async stop() {
      if (child.exitCode !== null) return;
      const exited = new Promise((r) => child.once('exit', r));
      child.kill('SIGTERM');
      await Promise.race([exited, sleep(5000)]);
      if (child.exitCode === null) child.kill('SIGKILL');
    },
  };
}
