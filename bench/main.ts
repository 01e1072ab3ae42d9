// The bench's entry point (`npm run bench`, `mirror bench` start it): `node --import tsx bench/main.ts
// [--quick] [--only 1,2] ...`. Its exit code is the bench's (see run.ts).
import { parseArgs } from 'node:util';
import { runBench } from './run.ts';

try {
  const { values } = parseArgs({
    options: {
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
  process.exitCode = await runBench(values);
} catch (error) {
  // Bad options and a set-up that cannot start: one line (MIRROR_DEBUG=1 adds the stack).
  console.error(`mirror bench: ${(error as Error).message}`);
  if (process.env.MIRROR_DEBUG) console.error(error);
  process.exitCode = 1;
}
