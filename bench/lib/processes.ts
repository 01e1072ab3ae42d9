// Child processes of the benchmark (workers, the API, the baseline server): started with their output
// in a log file, stopped by pid (SIGTERM, then SIGKILL), and every one still alive is killed when the
// benchmark exits, however it exits. Also reads a process's peak resident memory (VmHWM), and where
// the machine's CPU went (`CpuMeter`).
import { spawn, type ChildProcess } from 'node:child_process';
import { closeSync, openSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { setTimeout as sleep } from 'node:timers/promises';

export const projectRoot = new URL('../../', import.meta.url).pathname;

export interface Child {
  name: string;
  pid: number;
  process: ChildProcess;
  logFile: string;
  /** Resolves with the exit code (or the signal's name) once the process has exited. */
  exited: Promise<number | string>;
  stop(): Promise<void>;
}

const live = new Set<Child>();
let exitHookInstalled = false;

function installExitHook(): void {
  if (exitHookInstalled) return;
  exitHookInstalled = true;
  // Last resort: whatever path the benchmark leaves by, no child outlives it.
  process.once('exit', () => {
    for (const c of live) {
      try {
        c.process.kill('SIGKILL');
      } catch {
        // already gone
      }
    }
  });
}

/** BENCH_NODE_ARGS (e.g. `--cpu-prof --cpu-prof-dir=/tmp/prof`): node arguments for every process measured, the mirror's and the baselines' alike, so their profiles compare. */
export function benchNodeArgs(): string[] {
  return (process.env.BENCH_NODE_ARGS ?? '').split(' ').filter(Boolean);
}

/** Starts `node <args>` in the project root with `env`; stdout and stderr go to `logFile`. */
export function spawnNode(name: string, args: string[], env: NodeJS.ProcessEnv, logFile: string): Child {
  installExitHook();
  const fd = openSync(logFile, 'a');
  const child = spawn(process.execPath, args, { cwd: projectRoot, env, stdio: ['ignore', fd, fd] });
  closeSync(fd);
  if (child.pid === undefined) throw new Error(`could not start ${name}`);
  const exited = new Promise<number | string>((resolve) => child.once('exit', (code, signal) => resolve(code ?? signal ?? 'unknown')));
  const handle: Child = {
    name,
    pid: child.pid,
    process: child,
    logFile,
    exited,
    async stop() {
      if (child.exitCode === null && child.signalCode === null) {
        child.kill('SIGTERM');
        const done = await Promise.race([exited.then(() => true), sleep(10_000).then(() => false)]);
        if (!done) {
          child.kill('SIGKILL');
          await exited;
        }
      }
      live.delete(handle);
    },
  };
  live.add(handle);
  void exited.then(() => live.delete(handle));
  return handle;
}

/** Stops every child still running (in parallel). */
export async function stopAllChildren(): Promise<void> {
  await Promise.allSettled([...live].map((c) => c.stop()));
}

function statusField(pid: number, field: string): number | undefined {
  try {
    const m = new RegExp(`^${field}:\\s+(\\d+) kB`, 'm').exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
    return m ? Number(m[1]) * 1024 : undefined;
  } catch {
    return undefined;
  }
}

/** Peak resident set size of a live process (Linux VmHWM), in bytes. */
export function peakRss(pid: number): number | undefined {
  return statusField(pid, 'VmHWM');
}

/** Current resident set size, in bytes. */
export function currentRss(pid: number): number | undefined {
  return statusField(pid, 'VmRSS');
}

/** Resets a process's peak RSS to its current RSS (Linux: `5` into clear_refs); false where not allowed. */
export function resetPeakRss(pid: number): boolean {
  try {
    writeFileSync(`/proc/${pid}/clear_refs`, '5');
    return true;
  } catch {
    return false;
  }
}

/** The last lines of a child's log, for an error message. */
export function logTail(file: string, lines = 15): string {
  try {
    return readFileSync(file, 'utf8').trimEnd().split('\n').slice(-lines).join('\n');
  } catch {
    return '(no log)';
  }
}

/** CPU seconds (user and system) a process has used, from /proc/<pid>/stat; undefined once it is gone. */
function cpuSeconds(pid: number): number | undefined {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    // The fields after the command name (which may hold spaces) in parentheses; utime and stime are 14 and 15.
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return (Number(fields[11]) + Number(fields[12])) / clockTicks;
  } catch {
    return undefined;
  }
}
/** USER_HZ: 100 on every Linux the benchmark runs on. */
const clockTicks = 100;

/** Idle and total CPU seconds of the whole machine so far (/proc/stat's first line). */
function machineSeconds(): { idle: number; total: number } | undefined {
  try {
    const fields = readFileSync('/proc/stat', 'utf8').split('\n')[0]!.trim().split(/\s+/).slice(1).map(Number);
    return { idle: (fields[3]! + fields[4]!) / clockTicks, total: fields.reduce((a, b) => a + b, 0) / clockTicks };
  } catch {
    return undefined;
  }
}

export interface CpuUse {
  /** Every PostgreSQL process of the machine (backends, WAL writer, checkpointer): the database's share. */
  postgres: number;
  /** The worker processes given. */
  workers: number;
  /** This process: the sandbox (in process) and the benchmark's own polling. */
  bench: number;
  /** Share of the machine's CPU time left idle, 0 to 1. */
  idle: number;
}

/**
 * Where the machine's CPU went during a stretch of the benchmark, from /proc (Linux only: `sample`
 * finds nothing elsewhere and `use` is undefined). Processes are read at every `sample` and their last
 * reading kept, so a Postgres backend that ends before the stretch does still counts; the process list
 * is read afresh at most once a second, for backends started meanwhile.
 */
export class CpuMeter {
  private readonly first = new Map<number, number>();
  private readonly last = new Map<number, number>();
  private readonly postgres = new Set<number>();
  private listedAt = -Infinity;
  private readonly startMachine = machineSeconds();
  private readonly startSelf = process.cpuUsage();

  constructor(private readonly workerPids: readonly number[]) {
    this.sample();
  }

  sample(): void {
    if (!this.startMachine) return;
    if (performance.now() - this.listedAt >= 1000) this.listPostgres();
    for (const pid of [...this.workerPids, ...this.postgres]) {
      const cpu = cpuSeconds(pid);
      if (cpu === undefined) continue;
      if (!this.first.has(pid)) this.first.set(pid, cpu);
      this.last.set(pid, cpu);
    }
  }

  private listPostgres(): void {
    const initial = this.listedAt === -Infinity;
    this.listedAt = performance.now();
    let pids: string[];
    try {
      pids = readdirSync('/proc').filter((p) => /^\d+$/.test(p));
    } catch {
      return;
    }
    for (const p of pids) {
      const pid = Number(p);
      if (this.postgres.has(pid) || this.workerPids.includes(pid)) continue;
      try {
        if (!readFileSync(`/proc/${p}/cmdline`, 'utf8').startsWith('postgres')) continue;
      } catch {
        continue;
      }
      this.postgres.add(pid);
      // A backend found after the start began during the stretch: all its CPU counts.
      if (!initial) this.first.set(pid, 0);
    }
  }

  /** CPU seconds per side since the meter was made, as of the last `sample` (take one first). */
  use(): CpuUse | undefined {
    const end = machineSeconds();
    if (!this.startMachine || !end) return undefined;
    const spent = (pids: Iterable<number>) => {
      let s = 0;
      for (const pid of pids) s += (this.last.get(pid) ?? 0) - (this.first.get(pid) ?? 0);
      return s;
    };
    const self = process.cpuUsage(this.startSelf);
    const total = end.total - this.startMachine.total;
    return {
      postgres: spent(this.postgres),
      workers: spent(this.workerPids),
      bench: (self.user + self.system) / 1e6,
      idle: total > 0 ? (end.idle - this.startMachine.idle) / total : 0,
    };
  }
}

/** A process and every process below it (a launcher's child does the work): from /proc's parent ids. */
export function processTree(pid: number): number[] {
  const children = new Map<number, number[]>();
  try {
    for (const p of readdirSync('/proc').filter((x) => /^\d+$/.test(x))) {
      try {
        const stat = readFileSync(`/proc/${p}/stat`, 'utf8');
        const ppid = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
        children.set(ppid, [...(children.get(ppid) ?? []), Number(p)]);
      } catch {
        // gone meanwhile
      }
    }
  } catch {
    return [pid];
  }
  const out: number[] = [];
  const walk = (p: number) => {
    out.push(p);
    for (const c of children.get(p) ?? []) walk(c);
  };
  walk(pid);
  return out;
}

/** CPU a request cost on each side of a load (microseconds): the server's processes, Postgres, the load generator (this process). */
export interface RequestCpu {
  server: number;
  postgres: number;
  client: number;
}

/** Runs `work` (a load of `requests()` requests) with a meter on the server `pid`'s process tree and Postgres. */
export async function withRequestCpu<T>(pid: number | undefined, work: () => Promise<T>, requests: (r: T) => number): Promise<{ result: T; cpu?: RequestCpu }> {
  const meter = pid === undefined ? undefined : new CpuMeter(processTree(pid));
  const result = await work();
  meter?.sample();
  const use = meter?.use();
  const n = requests(result);
  if (!use || n <= 0) return { result };
  const us = (s: number) => (s / n) * 1e6;
  return { result, cpu: { server: us(use.workers), postgres: us(use.postgres), client: us(use.bench) } };
}

/**
 * Waits until no other session of the bench's database runs a statement (at most `timeoutMs`) and
 * says how long that took, in ms. A load's round ends when its time is up, not its statements: the
 * OFFSET pages and aggregates of a baseline (seconds each) went on running into the next round, took
 * the cores from it and counted in its Postgres CPU, so a round that came after one of those (the
 * mirror's random pages, in every other round) was measured against less of the machine.
 */
export async function untilPostgresIdle(pool: { query: (text: string) => Promise<{ rows: unknown[] }> }, timeoutMs = 60_000): Promise<number> {
  const t0 = Date.now();
  for (;;) {
    const { rows } = await pool.query(
      `SELECT count(*)::int AS n FROM pg_stat_activity
        WHERE datname = current_database() AND state = 'active' AND backend_type = 'client backend' AND pid <> pg_backend_pid()`,
    );
    if ((rows[0] as { n: number }).n === 0 || Date.now() - t0 >= timeoutMs) return Date.now() - t0;
    await sleep(50);
  }
}

/** What the waits of untilPostgresIdle before a scenario's rounds came to, for the notes. */
export function settledText(waitsMs: readonly number[]): string {
  const s = (ms: number) => `${(ms / 1000).toFixed(1)} s`;
  const most = Math.max(0, ...waitsMs);
  return `each measured round began with no statement of the round before still running in Postgres: waited ${s(waitsMs.reduce((a, b) => a + b, 0))} in all over ${waitsMs.length} rounds, at most ${s(most)} before one.`;
}

/**
 * A side's figures over its measured rounds so far, with `round` added: the best round's rate, and
 * the lowest p99 of the rounds (each the side's least disturbed by the rest of the machine; the p99 of
 * the best-rate round let one disturbed round's tail on one side decide the ratio). Bench [5] and [11].
 */
export function keptRound<T extends { rps: number; p99: number }>(seen: T | undefined, round: T): T {
  return seen === undefined ? round : { ...(round.rps > seen.rps ? round : seen), p99: Math.min(round.p99, seen.p99) };
}

/** `server + postgres + client` µs a request, for the notes. */
export function formatRequestCpu(cpu: RequestCpu | undefined): string {
  if (!cpu) return 'CPU not measured';
  const r = (x: number) => Math.round(x).toLocaleString('en-US');
  return `CPU a request ${r(cpu.server)} server + ${r(cpu.postgres)} Postgres + ${r(cpu.client)} load generator µs`;
}
