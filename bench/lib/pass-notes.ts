// The notes of a full pass ([2], [3], [8]): where the CPU went, and what a pass stuck finishing did.
import { fmt } from './report.ts';
import type { SyncRun } from '../scenarios/ingest.ts';

export const mb = (bytes: number | undefined) => (bytes === undefined ? null : bytes / 2 ** 20);

/** Where the machine's CPU went during a pass, per record page, for the notes. */
export function cpuNote(run: SyncRun, perPage: number): string {
  const c = run.cpu;
  if (!c) return '';
  const pages = run.records / perPage;
  const perPageMs = (seconds: number) => `${fmt(seconds)} s (${fmt((seconds * 1000) / pages)} ms a page)`;
  return (
    ` CPU from start to result: Postgres ${perPageMs(c.postgres)}, worker ${perPageMs(c.workers)}, this process (the sandbox) ${perPageMs(c.bench)};` +
    ` the machine idle ${fmt(c.idle * 100)}% of the time.` +
    (run.walBytes === undefined
      ? ''
      : ` WAL written: ${fmt(run.walBytes / 2 ** 20)} MB (${fmt(run.walBytes / 1024 / pages)} KB a page)${run.checkpointed ? ', from a CHECKPOINT' : ''}.`)
  );
}

/** What a pass that got stuck finishing (see timedFullSync) did, for the notes. */
export function stallNote(run: SyncRun): string {
  if (!run.stall) return '';
  return (
    ` STUCK: its last page was committed at ${fmt(run.pagesSeconds)} s, but finishing the pass had not ended ${fmt(run.stall.waitedSeconds)} s later` +
    ` (statement: ${run.stall.statement ?? 'none active'}); the bench ran ANALYZE and cancelled it, and the retry finished in ${fmt(run.stall.finishSecondsAfter)} s.` +
    ' Figures of this pass leave that wait out (as if the pass had finished as fast as it did once unstuck): without the intervention it takes much longer.' +
    (run.reported !== run.records ? ` The workflow's result counted ${run.reported} records (only the retried slice's).` : '')
  );
}
