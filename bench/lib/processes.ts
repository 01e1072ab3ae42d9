// Child processes of the benchmark (workers, the API, the baseline server): started with their output
// in a log file, stopped by pid (SIGTERM, then SIGKILL), and every one still alive is killed when the
// benchmark exits, however it exits. Also reads a process's peak resident memory (VmHWM).
import { spawn, type ChildProcess } from 'node:child_process';
import { closeSync, openSync, readFileSync, writeFileSync } from 'node:fs';
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
