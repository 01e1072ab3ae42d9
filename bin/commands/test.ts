// `mirror test`: the suite against a real Postgres and a real Temporal dev server.
import type { Command } from './shared.ts';

export const testCommand: Command = {
  summary: 'Run the test suite against a real Postgres and a real Temporal dev server',
  usage: 'mirror test [files...]',
  help: 'Starts one Temporal dev server for the run; every test file makes its own database. TEST_CONCURRENCY sets how many files run at once (default 3).',
  async run(_v, positionals) {
    const { runTests } = await import('../test-runner.ts');
    return runTests(positionals);
  },
};
