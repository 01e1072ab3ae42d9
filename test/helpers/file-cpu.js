// Loaded into every test file's process by test/helpers/run-in-order.ts (`--import`): when the file's
// process exits it records the CPU time it used, its own and that of the child processes it waited
// for (the mirror's processes a file starts), so the run's summary can show what each file costs
// even when the machine is shared and wall time misleads. Plain JavaScript: worker threads (the
// workflow workers') load it too, before any TypeScript loader is ready; there it does nothing.
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { isMainThread } from 'node:worker_threads';

const dir = process.env.TEST_FILE_CPU_DIR;
const file = process.argv[1];

/** The CPU seconds of this process and its waited-for children, from /proc (undefined elsewhere). */
function cpuSeconds() {
  try {
    // Fields after the command name: state is the 3rd; utime, stime, cutime, cstime the 14th to 17th.
    const stat = readFileSync('/proc/self/stat', 'utf8');
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    const ticks = fields.slice(11, 15).reduce((sum, f) => sum + Number(f), 0);
    return ticks / 100;
  } catch {
    return undefined;
  }
}

if (isMainThread && dir && file?.endsWith('.test.ts')) {
  process.on('exit', () => {
    const cpu = cpuSeconds();
    if (cpu !== undefined) writeFileSync(join(dir, `${Buffer.from(file).toString('base64url')}.cpu`), String(cpu));
  });
}
