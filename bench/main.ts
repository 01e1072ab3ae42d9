// The bench's entry point (`npm run bench`, `mirror bench` start it): `node --import tsx bench/main.ts
// [--quick] [--only 1,2] ...`. Its exit code is the bench's (see run.ts). `--compare before.json after.json`
// prints two saved runs side by side instead of running anything.
import { parseArgs } from 'node:util';
import { runBench } from './run.ts';

try {
  const { values, positionals } = parseArgs({
    allowPositionals: true,
    options: {
      compare: { type: 'boolean' },
      quick: { type: 'boolean' },
      records: { type: 'string' },
      scale: { type: 'string' },
      only: { type: 'string' },
      'rate-window-ms': { type: 'string' },
      'rate-limit': { type: 'string' },
      projects: { type: 'string' },
      invoices: { type: 'string' },
      save: { type: 'boolean' },
    },
  });
  if (values.compare) {
    if (positionals.length !== 2) throw new Error('--compare takes two saved runs: --compare bench/results/<before>.json bench/results/<after>.json');
    const { compareFiles } = await import('./lib/compare.ts');
    console.log(compareFiles(positionals[0]!, positionals[1]!));
  } else {
    if (positionals.length > 0) throw new Error(`unexpected argument "${positionals[0]}" (options start with --)`);
    process.exitCode = await runBench(values);
  }
} catch (error) {
  // Bad options and a set-up that cannot start: one line (MIRROR_DEBUG=1 adds the stack).
  console.error(`mirror bench: ${(error as Error).message}`);
  if (process.env.MIRROR_DEBUG) console.error(error);
  process.exitCode = 1;
}
