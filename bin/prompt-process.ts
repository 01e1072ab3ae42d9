// `mirror worker`'s second process: the prompt task queue (the change workflows and their event
// activities) polled by a process of its own, so a backfill that keeps the main process's event loop
// busy with its pages does not hold up an account's webhook changes. Bench [14] measured the hops of a
// change with both queues in one process whose loop a backfill saturated: each turn of the change
// workflow and its activity waited on that loop.
import { spawn, type ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';

interface PromptProcess {
  /** Resolves when the process has exited: with its code, or a signal's name. */
  exited: Promise<number | string>;
  /** Asks it to shut down (SIGTERM) and waits until it has exited. */
  stop(): Promise<void>;
}

/**
 * Starts `mirror worker --queues prompt` beside this process, with this process's Node flags and
 * environment (its own metrics port aside: the port is this process's). It ends with this process:
 * bin/mirror.js kills it when its channel to this one closes (this process killed with SIGKILL too).
 */
export function startPromptProcess(): PromptProcess {
  const env: NodeJS.ProcessEnv = { ...process.env, MIRROR_WORKER_RELAUNCHED: '1' };
  delete env.WORKER_METRICS_PORT;
  const entry = fileURLToPath(new URL('./mirror.js', import.meta.url));
  const child: ChildProcess = spawn(process.execPath, [...process.execArgv, entry, 'worker', '--queues', 'prompt'], {
    stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
    env,
    // A process group of its own: a terminal's Ctrl-C reaches it through this process, once.
    detached: true,
  });
  const exited = new Promise<number | string>((resolve) => {
    child.once('error', () => resolve('error'));
    child.once('exit', (code, signal) => resolve(code ?? signal ?? 'unknown'));
  });
  return {
    exited,
    async stop() {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGTERM');
      await exited;
    },
  };
}
