// Real mirror processes for the chaos suite: `node bin/mirror.js worker` and `node bin/mirror.js api`
// as separate OS processes (so they can be killed with SIGKILL mid-flight), their log lines captured
// line by line (the secrets scan reads them), and condition-based waits with deadlines.
import { spawn, type ChildProcess } from 'node:child_process';
import { appendFileSync, mkdirSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { setTimeout as sleep } from 'node:timers/promises';
import { projectRoot } from '../../bin/setup-steps.ts';

export interface LogLine {
  process: string;
  stream: 'stdout' | 'stderr';
  line: string;
}

/** Every line every process of a test file printed, for assertions and the secrets scan. */
export class LogCollector {
  readonly lines: LogLine[] = [];
  constructor(private readonly dir?: string) {
    if (dir) mkdirSync(dir, { recursive: true });
  }

  add(entry: LogLine): void {
    this.lines.push(entry);
    if (this.dir) appendFileSync(join(this.dir, `${entry.process}.log`), `${entry.stream === 'stderr' ? '! ' : ''}${entry.line}\n`);
  }

  /** Lines of one process name (any incarnation: `worker`, `worker#2`, ...). */
  of(name: string): LogLine[] {
    return this.lines.filter((l) => l.process === name || l.process.startsWith(`${name}#`));
  }
}

/** Polls `probe` until it returns a truthy value, or fails with `what` at the deadline. */
export async function waitFor<T>(
  what: string,
  probe: () => Promise<T | undefined | null | false> | T | undefined | null | false,
  options: { timeoutMs?: number; intervalMs?: number } = {},
): Promise<T> {
  const deadline = Date.now() + (options.timeoutMs ?? 60_000);
  let lastError: unknown;
  for (;;) {
    try {
      const v = await probe();
      if (v) return v;
    } catch (error) {
      lastError = error;
    }
    if (Date.now() > deadline) {
      const why = lastError instanceof Error ? ` (last error: ${lastError.message})` : '';
      throw new Error(`Timed out after ${options.timeoutMs ?? 60_000} ms waiting for ${what}${why}`);
    }
    await sleep(options.intervalMs ?? 100);
  }
}

export type MirrorCommand = 'worker' | 'api';

export interface MirrorProcessOptions {
  command: MirrorCommand;
  /** Environment on top of this process's (configuration: DATABASE_URL, TEMPORAL_ADDRESS, ...). */
  env: Record<string, string>;
  /** API port (the API restarts on the same port: webhook callbacks point at it). */
  port?: number;
  logs: LogCollector;
  name?: string;
  /** Start it again when it exits without being asked to, as a supervisor (systemd, Kubernetes) would. */
  restartOnCrash?: boolean;
  /** The checkout to run it from (another release's, for the upgrade drill); this project's by default. */
  root?: string;
}

/** One mirror process that can be started, killed with SIGKILL and started again. */
export class MirrorProcess {
  private child: ChildProcess | undefined;
  private exitPromise: Promise<{ code: number | null; signal: NodeJS.Signals | null }> | undefined;
  private incarnation = 0;
  readonly name: string;
  /** Exit records of earlier incarnations (signal `SIGKILL` for the ones the test killed). */
  readonly exits: { incarnation: number; code: number | null; signal: NodeJS.Signals | null; expected: boolean }[] = [];
  private expectingExit = false;
  private supervising = true;
  private restarting: Promise<void> | undefined;
  private inRestart = false;

  constructor(readonly options: MirrorProcessOptions) {
    this.name = options.name ?? options.command;
  }

  get pid(): number | undefined {
    return this.child?.pid;
  }

  get running(): boolean {
    return this.child !== undefined && this.child.exitCode === null && this.child.signalCode === null;
  }

  get url(): string {
    return `http://127.0.0.1:${this.options.port}`;
  }

  /** Exits nobody asked for (a crash): each with its code or signal. */
  get crashes(): { incarnation: number; code: number | null; signal: NodeJS.Signals | null }[] {
    return this.exits.filter((e) => !e.expected);
  }

  /** Starts the process and waits until it is ready (the worker polls its queue; the API answers /healthz). */
  async start(options: { timeoutMs?: number } = {}): Promise<void> {
    if (this.running) throw new Error(`${this.name} is already running`);
    this.supervising = true;
    this.incarnation++;
    const label = this.incarnation === 1 ? this.name : `${this.name}#${this.incarnation}`;
    const root = this.options.root ?? projectRoot;
    const args = [join(root, 'bin/mirror.js'), this.options.command];
    if (this.options.command === 'api') args.push('--port', String(this.options.port));
    const child = spawn(process.execPath, args, {
      cwd: root,
      env: { ...process.env, ...this.options.env },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    this.child = child;
    this.expectingExit = false;
    const incarnation = this.incarnation;
    this.exitPromise = new Promise((resolve) => {
      child.once('exit', (code, signal) => {
        this.exits.push({ incarnation, code, signal, expected: this.expectingExit });
        resolve({ code, signal });
        if (!this.expectingExit && this.options.restartOnCrash && this.supervising && !this.inRestart) this.restarting = this.superviseRestart();
      });
    });
    let ready = false;
    for (const stream of ['stdout', 'stderr'] as const) {
      createInterface({ input: child[stream] }).on('line', (line) => {
        this.options.logs.add({ process: label, stream, line });
        if (!ready && this.options.command === 'worker' && line.includes('worker running')) ready = true;
      });
    }
    const timeoutMs = options.timeoutMs ?? 120_000;
    await waitFor(
      `${label} to be ready`,
      async () => {
        if (!this.running)
          throw new Error(
            `${label} exited during start: ${JSON.stringify(this.exits.at(-1))}; last lines:\n${this.options.logs
              .of(this.name)
              .slice(-15)
              .map((l) => l.line)
              .join('\n')}`,
          );
        if (this.options.command === 'worker') return ready;
        const res = await fetch(`${this.url}/healthz`).catch(() => undefined);
        return res?.ok ?? false;
      },
      { timeoutMs, intervalMs: 100 },
    ).catch((error: unknown) => {
      // A process that never got ready is stopped, so nothing lingers after a failed test.
      if (this.running) child.kill('SIGKILL');
      throw error;
    });
  }

  /** kill -9: the process gets no chance to clean up. Resolves once it is gone. */
  async kill9(): Promise<void> {
    await this.restarting;
    if (!this.running) return;
    this.expectingExit = true;
    this.child!.kill('SIGKILL');
    await this.exitPromise;
  }

  /** A clean stop (SIGTERM), then SIGKILL after the deadline. */
  async stop(timeoutMs = 20_000): Promise<void> {
    this.supervising = false;
    await this.restarting;
    if (!this.running) return;
    this.expectingExit = true;
    this.child!.kill('SIGTERM');
    const timer = new AbortController();
    const exited = await Promise.race([this.exitPromise!.then(() => true), sleep(timeoutMs, false, { signal: timer.signal }).catch(() => false)]);
    timer.abort();
    if (!exited && this.running) {
      this.child!.kill('SIGKILL');
      await this.exitPromise;
    }
  }

  /** Starts a crashed process again, with a growing pause between attempts (its dependencies may be down). */
  private async superviseRestart(): Promise<void> {
    this.inRestart = true;
    try {
      for (let attempt = 1; this.supervising && !this.running; attempt++) {
        try {
          await this.start();
          return;
        } catch (error) {
          this.options.logs.add({
            process: this.name,
            stream: 'stderr',
            line: `supervisor: restart ${attempt} failed: ${(error as Error).message.split('\n')[0]}`,
          });
          if (attempt >= 60) return;
          await sleep(Math.min(5000, 250 * attempt));
        }
      }
    } finally {
      this.inRestart = false;
    }
  }

  /** Resolves when a restart after a crash (restartOnCrash) is done. */
  async restarted(): Promise<void> {
    await this.restarting;
  }

  /** Resolves when the current incarnation exits (for tests that expect a crash). */
  exited(): Promise<{ code: number | null; signal: NodeJS.Signals | null }> {
    return this.exitPromise ?? Promise.resolve({ code: null, signal: null });
  }
}

/** Live processes whose parent is `pid` (Linux /proc), with their command line and environment. */
export function childProcesses(pid: number): { pid: number; argv: string[]; env: Record<string, string> }[] {
  const found: { pid: number; argv: string[]; env: Record<string, string> }[] = [];
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      // The parent's pid is the 4th field of stat, after the command name in parentheses.
      const stat = readFileSync(`/proc/${entry}/stat`, 'utf8');
      if (Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]) !== pid) continue;
      const argv = readFileSync(`/proc/${entry}/cmdline`, 'utf8').split('\0').filter(Boolean);
      const env = Object.fromEntries(
        readFileSync(`/proc/${entry}/environ`, 'utf8')
          .split('\0')
          .filter(Boolean)
          .map((kv) => [kv.slice(0, kv.indexOf('=')), kv.slice(kv.indexOf('=') + 1)]),
      );
      found.push({ pid: Number(entry), argv, env });
    } catch {
      // Gone meanwhile.
    }
  }
  return found;
}

/** Whether a process is alive (signal 0 reaches it; a zombie counts as gone). */
export function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
  } catch {
    return false;
  }
  try {
    return !/\) Z /.test(readFileSync(`/proc/${pid}/stat`, 'utf8'));
  } catch {
    return false;
  }
}
