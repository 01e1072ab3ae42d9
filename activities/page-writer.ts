// The writing side of a slice (activities/sync-slice.ts): pages of a stream written a few at a time,
// each committed with its checkpoint only after the page before it committed, so the checkpoint
// never skips a page. A page is staged (its records written, its transaction open: mirror/records/page-write.ts)
// as soon as there is room, and committed in order here.
import type { StagedPage, WriteCounts } from '../mirror/records/page-write.ts';
import type { Checkpoint } from '../mirror/streams/streams.ts';

/**
 * Pages of a stream written at once. Each commits only after the one before it, so with two a
 * connection that finished its page first sat idle until the other committed; with three it writes
 * the next meanwhile. Bench [2], runs side by side: 0.45-0.47x the ceiling with two, 0.49x with three.
 * A waiting page holds its connection: a worker's pool is sized for that (bin/temporal-worker.ts `workerPoolSize`).
 */
export const writeDepth = 3;

/** A page to write, as the slice hands it over. */
interface PageToWrite {
  page: number;
  /** The keys of its records (a page sharing one with a page in flight waits for it). */
  ids: readonly string[];
  /**
   * Stages the page (`insertOnly`: the stream still looks as it did when the pass began on it
   * empty; see `PageStage.insertOnly`).
   */
  stage: (insertOnly: boolean) => Promise<StagedPage>;
  /** The checkpoint that holds once the page is committed, but for its counts (the writer's). */
  checkpoint: Checkpoint;
}

/** What the pages committed so far in this slice add up to. */
export interface WrittenCounts extends WriteCounts {
  pages: number;
  records: number;
}

export class PageWriter {
  private inFlight: { write: Promise<void>; ids: Set<string> }[] = [];
  /** The pass's counts through the last committed page (the checkpoint's). */
  committed: Checkpoint['counts'];
  private insertOnly: boolean;

  /**
   * @param committed the counts of the checkpoint the slice resumed from
   * @param insertOnly the pass began on a stream without a live record: its pages are inserted
   *   rather than upserted, until a record turns out to be there after all (mirror/records/page-write.ts)
   * @param written this slice's counts, added to as pages commit
   * @param onCommitted told of each page committed (the activity's heartbeat)
   */
  constructor(
    committed: Checkpoint['counts'],
    insertOnly: boolean,
    private readonly written: WrittenCounts,
    private readonly onCommitted: (page: number) => void,
  ) {
    this.committed = committed;
    this.insertOnly = insertOnly;
  }

  /**
   * Starts writing a page once there is room: at most `writeDepth` pages in flight, and none that
   * shares a record with it (both would lock the row, and the later one must not hold locks while
   * it waits).
   */
  async add(page: PageToWrite): Promise<void> {
    const prior = this.inFlight.at(-1)?.write;
    if (this.inFlight.length >= writeDepth) await this.inFlight[this.inFlight.length - writeDepth]!.write;
    for (const w of this.inFlight) if (page.ids.some((id) => w.ids.has(id))) await w.write;
    const write = this.write(page, prior);
    write.catch(() => undefined);
    this.inFlight = [...this.inFlight.slice(-(writeDepth - 1)), { write, ids: new Set(page.ids) }];
  }

  /** Every page handed over is committed (or the first failure among them is thrown). */
  async drained(): Promise<void> {
    for (const w of this.inFlight) await w.write;
  }

  /** Every page handed over has ended, committed or not (leaving on an error: no write may outlive its slice). */
  async settled(): Promise<void> {
    await Promise.allSettled(this.inFlight.map((w) => w.write));
  }

  private async write(page: PageToWrite, prior: Promise<void> | undefined): Promise<void> {
    const staged = await page.stage(this.insertOnly);
    if (staged.conflicted) this.insertOnly = false;
    // In order: the page before this one committed first (and a failed one fails this one too).
    try {
      await prior;
    } catch (error) {
      await staged.abandon();
      throw error;
    }
    const c = this.committed;
    const committed = {
      inserted: c.inserted + staged.counts.inserted,
      updated: c.updated + staged.counts.updated,
      unchanged: c.unchanged + staged.counts.unchanged,
      deleted: c.deleted,
    };
    await staged.commit({ ...page.checkpoint, counts: committed });
    this.committed = committed;
    const w = this.written;
    w.pages += 1;
    w.records += page.ids.length;
    w.inserted += staged.counts.inserted;
    w.updated += staged.counts.updated;
    w.unchanged += staged.counts.unchanged;
    this.onCommitted(page.page);
  }
}
