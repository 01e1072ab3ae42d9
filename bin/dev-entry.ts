// The development tools that live beside what they serve (the bench in bench/, the history recorder
// and the chaos summary in test/) are entry points of their own: bin/ starts each as a process and
// never imports it, so no process of a release carries them.
import { spawn } from 'node:child_process';
import { join } from 'node:path';
import { projectRoot } from './setup-steps.ts';

/** The command line of parsed options again (`--name value`, `--flag`), to hand to an entry point. */
export function optionArgs(values: Record<string, string | boolean | undefined>): string[] {
  return Object.entries(values).flatMap(([name, value]) =>
    value === undefined || value === false ? [] : value === true ? [`--${name}`] : [`--${name}`, value],
  );
}

/**
 * Runs the TypeScript entry point `file` (relative to the project) with `args` in a process of its
 * own and returns its exit code. Its own process group: Ctrl-C and SIGTERM reach it once, through
 * this process, so it stops what it started itself.
 */
export async function runDevEntry(file: string, args: readonly string[]): Promise<number> {
  const child = spawn(process.execPath, ['--import', 'tsx', join(projectRoot, file), ...args], { stdio: 'inherit', detached: true });
  const forward = (signal: NodeJS.Signals) => child.kill(signal);
  const signals = ['SIGINT', 'SIGTERM', 'SIGHUP'] as const;
  for (const signal of signals) process.on(signal, forward);
  try {
    return await new Promise<number>((resolve) => {
      child.once('error', (error) => {
        console.error(`mirror: could not start ${file}: ${error.message}`);
        resolve(1);
      });
      child.once('exit', (code, signal) => resolve(code ?? (signal ? 1 : 0)));
    });
  } finally {
    for (const signal of signals) process.off(signal, forward);
  }
}
