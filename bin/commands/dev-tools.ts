// The development tools' commands: the bench and the history recorder are entry points of their own
// (bench/main.ts, test/workflows/record-histories.ts), which these start as processes.
import { optionArgs, runDevEntry } from '../dev-entry.ts';
import type { Command } from './shared.ts';

export const benchCommand: Command = {
  summary: 'Run the benchmarks: one table of figures against limits, baselines and targets (also bench/results/latest.json)',
  usage:
    'mirror bench [--quick] [--records 200000] [--scale 50000,200000,1000000] [--only 1,2,3] [--rate-window-ms 2000] [--rate-limit 20] [--projects 500] [--invoices 5000] [--save] | mirror bench --compare <before.json> <after.json>',
  help:
    'Starts its own Temporal dev server, Postgres databases, sandbox, workers and API; exits 0 even when a target is missed (it reports, it does not judge). ' +
    '--compare prints two saved runs (bench/results/*.json) side by side, every figure and how its ratio moved, and runs nothing. See docs/benchmarks.md.',
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
    compare: { type: 'boolean' },
  },
  run: (v, positionals) => runDevEntry('bench/main.ts', [...optionArgs(v), ...positionals]),
};

export const recordHistoriesCommand: Command = {
  summary: 'Record the histories of representative workflows from the sandbox, for the replay test',
  usage: 'mirror record-histories --release <name> [--size 12] [--force]',
  help:
    'Runs full and incremental passes of a BuildPro and a GraphLedger account, a stream pass of several slices, ' +
    'a stream of async pages, the change workflow across a continue-as-new, a subscription delivery and an async ' +
    'request against the sandbox (its own Temporal dev server, a temporary database), and writes each history to ' +
    'test/workflows/histories/<release>/<workflow>-<case>.json.gz. Record the histories of every release: ' +
    '`npm test` replays them all against the current workflows. Example: npx mirror record-histories --release 2026-11-25',
  options: { release: { type: 'string' }, size: { type: 'string' }, force: { type: 'boolean' } },
  run: (v) => runDevEntry('test/workflows/record-histories.ts', optionArgs(v)),
};
