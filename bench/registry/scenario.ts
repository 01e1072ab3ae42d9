// What a scenario of `npm run bench` is: a named entry (its number, label, run function) in the
// registry (index.ts), run in the registry's order. A scenario of the main setup runs in the one
// set-up the others share (one list of customers, a worker, the read API); another starts its own.
import type { BenchShared, Linked, MirrorEnv, WorkerSet } from '../lib/mirror-env.ts';
import type { BenchOptions } from '../lib/options.ts';
import type { Row } from '../lib/report.ts';
import type { CeilingResult, SyncRun } from '../scenarios/ingest.ts';

/** What every scenario is given: the options, where its rows and notes go, and what earlier ones measured. */
export interface BenchContext {
  o: BenchOptions;
  shared: BenchShared;
  rows: Row[];
  notes: string[];
  /** A progress line on stderr. */
  say: (line: string) => void;
  /** Whether scenario `n` was asked for (`--only`). */
  wants: (n: number) => boolean;
  /** Postgres's `autovacuum` setting, for the notes. */
  autovacuum: string | undefined;
  /** What earlier scenarios measured that later ones use: [1]'s ceiling, [2]'s full sync. */
  results: { ceiling?: CeilingResult; first?: SyncRun };
}

/** The main setup: one list of customers synced by one worker, read through the read API. */
export interface MainSetup {
  env: MirrorEnv;
  workers: WorkerSet;
  account: Linked;
}

interface Entry {
  /** Its number in the table (`--only`); several entries may share one. */
  number: number;
  label: string;
}

export type Scenario =
  | (Entry & {
      setup: 'main';
      /** It reads through the read API (the main setup starts it when such a scenario runs). */
      api?: boolean;
      run(ctx: BenchContext, main: MainSetup): Promise<void>;
      /** Runs after it whether it ran or not, in the main setup, outside its error row. */
      after?(ctx: BenchContext, main: MainSetup): Promise<void>;
    })
  | (Entry & { setup: 'own'; run(ctx: BenchContext): Promise<void> });
