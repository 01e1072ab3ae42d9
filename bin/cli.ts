// The `mirror` command line (bin/mirror.js runs it through tsx). Each command lives in bin/commands/;
// `npx mirror <command> --help` explains it.
import { main } from './commands/index.ts';

// `mirror status | head`: a reader that went away is not an error.
for (const stream of [process.stdout, process.stderr]) {
  stream.on('error', (error: NodeJS.ErrnoException) => {
    if (error.code === 'EPIPE') process.exit(process.exitCode ?? 0);
    throw error;
  });
}

process.exitCode = await main(process.argv.slice(2));
