// Runs test files with node's test runner in the order given (bin/test-runner.ts hands them slowest
// first). `node --test <files>` sorts its files by name before it starts them; the runner's API
// takes them as listed. Usage: node --import tsx test/helpers/run-in-order.ts <concurrency> <files...>
import type { Readable } from 'node:stream';
import { run } from 'node:test';
import { spec, tap } from 'node:test/reporters';

const [concurrency, ...files] = process.argv.slice(2);
// The test processes get this process's --import tsx, as those of `node --import tsx --test` do.
const stream = run({ files, concurrency: Number(concurrency) });
// As `node --test`: a failed test fails the run, a failed todo (a known defect) does not.
stream.on('test:fail', (data: { todo?: boolean | string }) => {
  if (data.todo === undefined || data.todo === false) process.exitCode = 1;
});
stream.compose<Readable>(process.stdout.isTTY ? new spec() : tap).pipe(process.stdout);
