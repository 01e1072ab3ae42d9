// The `mirror` command line: the table of commands and the one place that turns a command's outcome
// into an exit code and a one-line error.
import { parseArgs } from 'node:util';
import { accountsCommand } from './accounts.ts';
import { apiCommand } from './api.ts';
import { demoCommand } from './demo.ts';
import { doctorCommand } from './doctor.ts';
import { linkCommand } from './link.ts';
import { migrateCommand } from './migrate.ts';
import { purgeCommand } from './purge.ts';
import { sandboxCommand } from './sandbox.ts';
import { setupCommand } from './setup.ts';
import { describeFailure, exitCode, type Command } from './shared.ts';
import { statusCommand } from './status.ts';
import { rekeyCommand } from './rekey.ts';
import { benchCommand, recordHistoriesCommand } from './dev-tools.ts';
import { resyncCommand, syncCommand } from './sync.ts';
import { testCommand } from './test.ts';
import { unlinkCommand } from './unlink.ts';
import { webhooksCommand } from './webhooks.ts';
import { workerCommand } from './worker.ts';

export const commands: Record<string, Command> = {
  setup: setupCommand,
  migrate: migrateCommand,
  doctor: doctorCommand,
  sandbox: sandboxCommand,
  worker: workerCommand,
  api: apiCommand,
  demo: demoCommand,
  link: linkCommand,
  accounts: accountsCommand,
  sync: syncCommand,
  resync: resyncCommand,
  status: statusCommand,
  webhooks: webhooksCommand,
  unlink: unlinkCommand,
  purge: purgeCommand,
  rekey: rekeyCommand,
  test: testCommand,
  'record-histories': recordHistoriesCommand,
  bench: benchCommand,
};

function help(): string {
  const width = Math.max(...Object.keys(commands).map((c) => c.length));
  return [
    'Usage: mirror <command> [options]   (npx mirror <command> --help for one command)',
    '',
    'Commands:',
    ...Object.entries(commands).map(([n, c]) => `  ${n.padEnd(width)}  ${c.summary}`),
    '',
    'Exit codes: 0 ok, 1 something failed (a stream, a check), 2 wrong usage, 3 set-up problem (configuration, Postgres, Temporal, upstream), 4 not found.',
  ].join('\n');
}

function commandHelp(name: string, command: Command): string {
  return [command.summary, '', `Usage: ${command.usage}`, ...(command.help ? ['', command.help] : [])].join('\n');
}

/** Runs one command line; returns the exit code. Errors end up as one line on stderr. */
export async function main(argv: string[]): Promise<number> {
  const [name, ...rest] = argv;
  if (!name || name === '--help' || name === '-h' || name === 'help') {
    console.log(help());
    return name ? exitCode.ok : exitCode.usage;
  }
  const command = commands[name];
  if (!command) {
    console.error(`mirror: unknown command "${name}".\n\n${help()}`);
    return exitCode.usage;
  }
  if (rest.includes('--help') || rest.includes('-h')) {
    console.log(commandHelp(name, command));
    return exitCode.ok;
  }
  let parsed;
  try {
    parsed = parseArgs({ args: rest, options: command.options ?? {}, allowPositionals: true, strict: true });
  } catch (error) {
    console.error(`mirror ${name}: ${(error as Error).message}\nUsage: ${command.usage}`);
    return exitCode.usage;
  }
  try {
    const code = await command.run(parsed.values as Record<string, string | boolean | undefined>, parsed.positionals);
    return typeof code === 'number' ? code : exitCode.ok;
  } catch (error) {
    const failure = describeFailure(error, { DATABASE_URL: process.env.DATABASE_URL });
    console.error(`mirror ${name}: ${failure.message}`);
    if (failure.code === exitCode.usage) console.error(`Usage: ${command.usage}`);
    if (process.env.MIRROR_DEBUG) console.error(error);
    return failure.code;
  }
}
