// One slice of a stream's pass (the `syncSlice` activity and the streams swept inside activities):
// up to `maxPages` pages taken in order from the fetcher (activities/page-fetcher.ts), each judged
// (paging rule, repeats, the page bound) and handed to the writer (activities/page-writer.ts), which
// commits each with its checkpoint in order. A retried or restarted slice resumes at the last
// committed page. A pass whose upstream pages loop (a page repeats any earlier page of the pass) or
// never end (past SYNC_MAX_PAGES_PER_PASS) fails, never retried, before it can finish: nothing is
// marked deleted.
import { Context } from '@temporalio/activity';
import { knownProfile, perPageFor, type SourceSystemProfile } from '../connectors/source-systems/index.ts';
import { pageFingerprint, pageVerdict, type PageVerdict } from '../connectors/pagination.ts';
import type { UpstreamClient } from '../connectors/upstream-client.ts';
import { RepeatedPageError, SamePageError, UpstreamError } from '../lib/errors.ts';
import type { ListPage } from '../lib/list-page.ts';
import type { Logger } from '../lib/logger.ts';
import { allProjectsScope } from '../lib/resources.ts';
import type { AccountStore } from '../mirror/control/accounts.ts';
import type { Pool } from '../mirror/db/pool.ts';
import { finishPass } from '../mirror/records/finish-pass.ts';
import { FirstLoadStatistics } from '../mirror/streams/first-load-statistics.ts';
import { BufferPool } from '../lib/buffer-pool.ts';
import { knownPages, stageKeptPage, type KnownPage } from '../mirror/records/kept-pages.ts';
import { appendedOrdinal } from '../mirror/records/object-writes.ts';
import { crossProjectKey, stagePage, type StagedPage } from '../mirror/records/page-write.ts';
import {
  beginOrResumePass,
  committedPageIds,
  saveCheckpoint,
  type Checkpoint,
  type PassMode,
  type StreamKey,
  type StreamPass,
} from '../mirror/streams/streams.ts';
import { PageFetcher } from './page-fetcher.ts';
import { PageHistory, storedFingerprint } from './page-history.ts';
import { PageWriter } from './page-writer.ts';

/** One stream to sync: enough to fetch it without looking anything up. */
interface StreamSpec {
  accountId: string;
  resource: string;
  /** Canonical scope (see lib/resources.ts). */
  scope: string;
  /** List path, e.g. `/projects` or `/ap-invoices/<id>/line-items`. */
  path: string;
  projectId?: string;
}

export interface SyncSliceInput extends StreamSpec {
  passKey: string;
  mode: PassMode;
  /**
   * Pages to fetch in this activity before returning to the workflow (default 200). Each return
   * drains the writes in flight and starts the next slice with one: bench [2] (200 pages) ran
   * 2-4% faster in one slice than in four of 50. A slice resumes from its last committed page, so
   * its size bounds no refetch, only the time between two workflow tasks.
   */
  maxPages?: number;
  includeSourceData?: boolean;
  /**
   * The caller waits for upstream async requests itself (a workflow, with durable timers): a page
   * still being produced ends the slice with `waitAsync`. Otherwise the slice polls in place.
   */
  asyncPages?: boolean;
  /**
   * An account's scheduled incremental pass (not a targeted one): a stream that is not due
   * (mirror/streams/polling.ts: webhook-covered, here) is left to a later pass, asking the upstream nothing.
   */
  adaptive?: boolean;
}

export interface SliceCounts {
  pages: number;
  records: number;
  inserted: number;
  updated: number;
  unchanged: number;
  deleted: number;
}

export interface SyncSliceResult extends SliceCounts {
  done: boolean;
  generation: number;
  /** The next page is an upstream async request still running: poll again after a timer. */
  waitAsync?: { id: string; expiresAt: number | null };
  /** The stream was not due (an adaptive pass), and why: nothing was asked. */
  notDue?: string;
  /** The stream is stalled, and why: nothing more is asked of it this pass (activities/stalls.ts). */
  stalled?: string;
}

/** Far past any real stream: 100 million records at 1000 a page. */
export const defaultMaxPagesPerPass = 100_000;

/** A pass that went past its page bound without the upstream saying it ended. Never retried. */
class PageBoundError extends UpstreamError {
  override readonly code = 'upstream_page_bound';
  override get retryable(): boolean {
    return false;
  }
}

/**
 * Fingerprints an incremental pass keeps in its checkpoint, to know its pages again after a resume
 * (a full pass finds them in stream_pages): 17 bytes a page, written with every page's checkpoint.
 * Beyond them, pages are compared with those seen since the slice began, and the page bound holds.
 */
const storedFingerprintsMax = 1000;

/** Page histories of passes between two slices, so a slice need not read them again (see `historyOf`). */
const historiesKept = 64;

const defaultSlicePages = 200;

interface SliceDeps {
  upstream: UpstreamClient;
  pool: Pool;
  accounts: AccountStore;
  logger: Logger;
  /** Most pages one pass of a stream may take. */
  pageBound: number;
}

const emptyCounts = () => ({ pages: 0, records: 0, inserted: 0, updated: 0, unchanged: 0, deleted: 0 });

/** Runs slices of passes; keeps each pass's page history from one slice to its next in this process. */
export class SliceRunner {
  /** Passes' page histories between their slices, by pass (most recently used last). */
  private readonly histories = new Map<string, PageHistory>();
  /** Buffers of the pages' encoded bodies, used again page after page (lib/buffer-pool.ts). */
  private readonly bodyBuffers = new BufferPool();
  /** The first statistics of the partitions this process loads (each resource's asked for once). */
  private readonly statistics: FirstLoadStatistics;

  constructor(private readonly deps: SliceDeps) {
    this.statistics = new FirstLoadStatistics(deps.pool);
  }

  /** One slice of the pass `input` names: begun or resumed at its checkpoint, then its pages in order. */
  async run(input: SyncSliceInput, key: StreamKey): Promise<SyncSliceResult> {
    const loop = await this.open(input, key);
    return loop instanceof SliceLoop ? loop.run() : loop;
  }

  /**
   * The pass `input` names, begun or resumed at its checkpoint: the loop of its next slice, to be run
   * (or stepped through page by page), or the result of a pass that was done already.
   */
  async open(input: SyncSliceInput, key: StreamKey): Promise<SliceLoop | SyncSliceResult> {
    const { pool, accounts } = this.deps;
    const ctx = activityContext();
    const account = await accounts.get(input.accountId);
    const profile: SourceSystemProfile | undefined = knownProfile(account.sourceSystem);
    const perPage = profile ? perPageFor(profile, input.resource) : 100;
    const pass = await beginOrResumePass(pool, key, { passKey: input.passKey, mode: input.mode, perPage });
    const checkpoint = pass.checkpoint;
    if (checkpoint.done) return { ...emptyCounts(), done: true, generation: pass.generation };
    const historyKey = `${pass.streamId}:${pass.generation}:${checkpoint.passKey}`;
    const history = await this.historyOf(pass, checkpoint, historyKey);
    return SliceLoop.open({
      deps: this.deps,
      statistics: this.statistics,
      bodyBuffers: this.bodyBuffers,
      ctx,
      input,
      key,
      pass,
      profile,
      history,
      token: await accounts.token(input.accountId),
      keepHistory: () => this.keepHistory(historyKey, history),
    });
  }

  /**
   * The pages a pass committed before its checkpoint's page: kept from its last slice in this
   * process, else from stream_pages (a full pass) or the checkpoint (an incremental one).
   */
  private async historyOf(pass: StreamPass, checkpoint: Checkpoint, key: string): Promise<PageHistory> {
    const kept = this.histories.get(key);
    // Taken: a second attempt of the slice running meanwhile builds its own.
    this.histories.delete(key);
    if (kept) {
      kept.forgetFrom(checkpoint.page);
      return kept;
    }
    if (checkpoint.page === 1) return new PageHistory();
    if (checkpoint.mode === 'incremental') return PageHistory.of(checkpoint.pageFingerprints ?? []);
    const history = new PageHistory();
    for (const row of await committedPageIds(this.deps.pool, pass, checkpoint.page)) history.see(pageFingerprint(row.ids), row.page);
    return history;
  }

  private keepHistory(key: string, history: PageHistory): void {
    this.histories.set(key, history);
    if (this.histories.size > historiesKept) this.histories.delete(this.histories.keys().next().value!);
  }
}

/** What a slice's loop works with: the pass begun or resumed, and the runner's shared parts. */
interface SliceLoopSetup {
  deps: SliceDeps;
  statistics: FirstLoadStatistics;
  bodyBuffers: BufferPool;
  ctx: Context | undefined;
  input: SyncSliceInput;
  key: StreamKey;
  pass: StreamPass;
  profile: SourceSystemProfile | undefined;
  /** The pages the pass committed before its checkpoint's page. */
  history: PageHistory;
  token: string;
  /** Keeps the page history for the pass's next slice in this process. */
  keepHistory: () => void;
}

/** What a step does with the page it took: the fetcher's answer, as the writer needs it. */
interface TakenPage {
  page: ListPage | undefined;
  /** A page unchanged since an earlier pass committed it, kept without being read. */
  keep: KnownPage | undefined;
  digest: string | null;
  hasMore: boolean | null;
}

/**
 * One slice's loop over its pages, from the pass's checkpoint: each `step` takes the next page from
 * the fetcher, judges it (PageJudge), asks for the pages after it and hands it to the writer, which
 * commits it with the checkpoint that follows it; a step that ends the slice (the end of the stream,
 * a page still produced upstream) gives the slice's result. `run` steps up to the slice's page
 * limit, beating on a timer, and leaves no write of the slice running behind it.
 */
class SliceLoop {
  private checkpoint: Checkpoint;
  /** Where the slice is, for the heartbeat on a timer. */
  private position: { page: number };
  private readonly counts: SyncSliceResult;
  private readonly judge: PageJudge;
  private readonly writer: PageWriter;
  private readonly fetcher: PageFetcher;
  private readonly maxPages: number;
  /** A full pass digests every page; a page byte for byte as an earlier pass committed it (and whose records nobody changed since) is kept without parsing or writing it. */
  private readonly fullPass: boolean;
  /**
   * A list across projects: its pages are read in the worker (each record's project is its scope) and
   * never kept unread (its records' scopes, not the stream's, say whether they changed since).
   */
  private readonly cross: boolean;
  private readonly preferAsync: boolean;

  /** The loop of a slice of this pass, with the pages an earlier pass committed that it may keep. */
  static async open(setup: SliceLoopSetup): Promise<SliceLoop> {
    const { pass, input } = setup;
    const checkpoint = pass.checkpoint;
    const maxPages = input.maxPages ?? defaultSlicePages;
    const keeps = checkpoint.mode === 'full' && input.scope !== allProjectsScope;
    const known = keeps ? await knownPages(setup.deps.pool, pass, { from: checkpoint.page, to: checkpoint.page + maxPages }) : new Map<number, KnownPage>();
    return new SliceLoop(setup, known, maxPages);
  }

  private constructor(
    private readonly setup: SliceLoopSetup,
    private readonly known: Map<number, KnownPage>,
    maxPages: number,
  ) {
    const { input, pass, profile, ctx } = setup;
    this.checkpoint = pass.checkpoint;
    this.position = { page: this.checkpoint.page };
    this.counts = { ...emptyCounts(), done: false, generation: pass.generation };
    this.judge = new PageJudge(input, setup.history, setup.deps.pageBound, this.checkpoint.lastFingerprint);
    this.maxPages = maxPages;
    this.fullPass = this.checkpoint.mode === 'full';
    this.cross = input.scope === allProjectsScope;
    this.preferAsync = Boolean(input.asyncPages && profile?.preferAsync);
    // Pages are written a few at a time (Postgres, not the fetch, is the slower side of a big pass),
    // each committed with its checkpoint after the page before it.
    this.writer = new PageWriter(this.checkpoint.counts, this.checkpoint.startedEmpty ?? false, this.counts, (page) => ctx?.heartbeat({ page: page + 1 }));
    this.fetcher = this.fetcherOf();
  }

  /** The fetcher of the slice's pages, from the checkpoint's page on. */
  private fetcherOf(): PageFetcher {
    const { input, profile, ctx, token } = this.setup;
    const support = profile?.resources[input.resource];
    const checkpoint = this.checkpoint;
    return new PageFetcher({
      upstream: this.setup.deps.upstream,
      call: (page) => ({
        accountToken: token,
        accountId: input.accountId,
        sourceSystem: profile?.slug,
        page,
        what: this.what(page),
        signal: ctx?.cancellationSignal,
      }),
      resource: input.resource,
      path: input.path,
      perPage: checkpoint.perPage,
      projectId: input.projectId,
      includeSourceData: input.includeSourceData ?? true,
      filters:
        checkpoint.mode === 'incremental' && checkpoint.since && support?.updateTimeFilter
          ? [{ field: 'source_update_time', operator: '>=', value: checkpoint.since }]
          : undefined,
      preferAsync: this.preferAsync,
      workflowPolls: Boolean(input.asyncPages),
      digests: this.fullPass && !this.cross,
      known: (page) => this.reusable(page)?.digest,
      crossProject: this.cross,
      pendingAsync: () => this.checkpoint.pendingAsync,
      onExpired: () => this.forgetExpired(),
      signal: ctx?.cancellationSignal,
    });
  }

  /** Steps through the slice's pages up to its limit; the slice's result. */
  async run(): Promise<SyncSliceResult> {
    // Heartbeat on a timer too, so a slow upstream page is not taken for a dead worker.
    const beat = setInterval(() => this.setup.ctx?.heartbeat(this.position), 5_000);
    try {
      this.fetcher.prefetch(this.checkpoint.page);
      for (let n = 0; n < this.maxPages && this.fetcher.has(this.checkpoint.page); n++) {
        const ended = await this.step(n);
        if (ended) return ended;
      }
      await this.writer.drained();
      this.setup.keepHistory();
      return this.counts;
    } finally {
      clearInterval(beat);
      // Leaving on an error: no write of this slice may still be running when its retry begins.
      await this.writer.settled();
    }
  }

  /**
   * The checkpoint's page, the slice's `n`th: taken, judged, the next ones asked for, handed to the
   * writer, the checkpoint moved past it. The slice's result when the page ends the slice.
   */
  async step(n: number): Promise<SyncSliceResult | undefined> {
    const answer = await this.fetcher.take(this.checkpoint.page);
    if (answer.pending) return this.awaitAsync(answer.pending);
    // An unchanged page is judged by the ids and has_more it had when it was committed.
    const keep = answer.unchanged ? this.reusable(this.checkpoint.page) : undefined;
    const page: ListPage | undefined = answer.page;
    // Ids repeat across projects: a page across projects is known by its records' project and id.
    const ids =
      this.cross && page && 'items' in page.records
        ? page.records.items.map((item) => crossProjectKey(item, this.setup.input.resource))
        : page
          ? page.ids
          : keep!.ids;
    const hasMore = page ? page.hasMore : keep!.hasMore;
    const verdict = this.judge.verdict(this.checkpoint, ids, hasMore);
    if (verdict === 'end') {
      // The end is confirmed: nothing past the full last page (an upstream that ignores an
      // out-of-range page number serves the last page again, which ends the pass too).
      return this.finish({ ...withoutPending(this.checkpoint), confirming: false });
    }
    if (verdict === 'confirm') {
      this.setup.deps.logger.warn(
        { resource: this.setup.input.resource, scope: this.setup.input.scope, page: this.checkpoint.page },
        'has_more_results is false on a full page; fetching the next page to confirm the end',
      );
    }
    // Fetch the next page while this one is written.
    if (verdict !== 'stop' && n + 1 < this.maxPages) this.prefetchAfter(n);
    const next = this.nextCheckpoint(verdict, pageFingerprint(ids));
    const digest = page ? (page.digest ?? null) : answer.unchanged!.digest;
    await this.write(ids, next, { page, keep, digest, hasMore });
    this.checkpoint = { ...next, counts: this.writer.committed };
    this.position = { page: this.checkpoint.page };
    if (verdict === 'stop') return this.finish(this.checkpoint);
    return undefined;
  }

  /** The next page is an upstream async request still running: remembered with the stream, so a restarted worker polls it instead of asking again. */
  private async awaitAsync(pending: { id: string; expiresAt: number | null }): Promise<SyncSliceResult> {
    const { id, expiresAt } = pending;
    await this.writer.drained();
    this.checkpoint = { ...this.checkpoint, counts: this.writer.committed, pendingAsync: { id, page: this.checkpoint.page, expiresAt } };
    await saveCheckpoint(this.setup.deps.pool, this.setup.pass, this.checkpoint, { pages: 0, records: 0 });
    this.setup.keepHistory();
    return { ...this.counts, waitAsync: { id, expiresAt } };
  }

  /** A remembered async request expired before it was read: forgotten, and how many expired in a row. */
  private async forgetExpired(): Promise<number> {
    const expiries = (this.checkpoint.asyncExpiries ?? 0) + 1;
    await this.writer.drained();
    this.checkpoint = { ...withoutPending(this.checkpoint), asyncExpiries: expiries, counts: this.writer.committed };
    await saveCheckpoint(this.setup.deps.pool, this.setup.pass, this.checkpoint, { pages: 0, records: 0 });
    return expiries;
  }

  /** The pass ends at `checkpoint` once every page is committed: what it no longer found is marked deleted. */
  private async finish(checkpoint: Checkpoint): Promise<SyncSliceResult> {
    await this.writer.drained();
    const { deps, key, pass, statistics } = this.setup;
    this.counts.deleted = await finishPass(deps.pool, key, pass, { ...checkpoint, counts: this.writer.committed }, statistics);
    return { ...this.counts, done: true };
  }

  /** Asks for the page after the checkpoint's, and the one after that where the last pass saw it. */
  private prefetchAfter(n: number): void {
    this.fetcher.prefetch(this.checkpoint.page + 1);
    // One page further too where the last pass saw that page (so it is no request past the
    // end): with unchanged pages kept, fetching is all a pass waits for. Not for async pages,
    // whose pending requests are remembered one at a time.
    const further = this.checkpoint.page + 2;
    if (n + 2 < this.maxPages && !this.preferAsync && this.reusable(further)) this.fetcher.prefetch(further);
  }

  /** The checkpoint that holds once the checkpoint's page is committed (but for its counts). */
  private nextCheckpoint(verdict: PageVerdict, fingerprint: string | null): Checkpoint {
    const checkpoint = this.checkpoint;
    return {
      ...withoutPending(checkpoint),
      asyncExpiries: undefined,
      page: checkpoint.page + 1,
      lastFingerprint: fingerprint ?? checkpoint.lastFingerprint,
      done: false,
      confirming: verdict === 'confirm',
      ...(checkpoint.mode === 'incremental' ? { pageFingerprints: withFingerprint(checkpoint.pageFingerprints, checkpoint.page, fingerprint) } : {}),
    };
  }

  /** Hands the checkpoint's page to the writer, staged when its turn comes and committed with `next`. */
  private write(ids: readonly string[], next: Checkpoint, taken: TakenPage): Promise<void> {
    const pageNo = this.checkpoint.page;
    const seen = this.fullPass ? { page: pageNo, perPage: this.checkpoint.perPage, digest: taken.digest, hasMore: taken.hasMore } : undefined;
    return this.writer.add({ page: pageNo, ids, checkpoint: next, stage: (insertOnly) => this.stage(pageNo, taken, seen, insertOnly) });
  }

  /** Stages page `pageNo`: kept as an earlier pass committed it where it can be, else written. */
  private async stage(pageNo: number, taken: TakenPage, seen: Parameters<typeof stagePage>[1]['seen'], insertOnly: boolean): Promise<StagedPage> {
    const { deps, key, pass } = this.setup;
    const kept = taken.keep ? await stageKeptPage(deps.pool, { key, pass, known: taken.keep }) : null;
    if (kept) return kept;
    // Not kept (its records changed since, or it is new): written. A page that came back
    // unchanged but cannot be kept is asked for once more, to be read this time.
    return stagePage(deps.pool, {
      key,
      pass,
      records: (taken.page ?? (await this.fetcher.again(pageNo, taken.digest!))).records,
      // A full pass reads the whole list: its pages give each record its place. An incremental
      // one reads only what changed: those keep their places, and new ones go after the rest.
      ...(this.fullPass ? { ordinalBase: (pageNo - 1) * this.checkpoint.perPage } : { ordinalBase: await appendedOrdinal(deps.pool, key), keepOrdinal: true }),
      what: this.what(pageNo),
      ...(seen ? { seen } : {}),
      insertOnly,
      buffers: this.setup.bodyBuffers,
    });
  }

  /** The page an earlier pass committed as `page`, if it may be kept (same page size). */
  private reusable(page: number): KnownPage | undefined {
    const k = this.known.get(page);
    return k && k.perPage === this.checkpoint.perPage ? k : undefined;
  }

  private what(page: number): string {
    return `${this.setup.input.resource}${this.setup.input.scope ? ` (${this.setup.input.scope})` : ''} page ${page}`;
  }
}

/**
 * Judges each page of a slice by its ids and has_more: the paging rule (connectors/pagination.ts),
 * a page that repeats the one before it or any earlier one of the pass, and the pass's page bound.
 */
class PageJudge {
  private readonly stream: string;

  constructor(
    private readonly input: SyncSliceInput,
    private readonly history: PageHistory,
    private readonly pageBound: number,
    private lastFingerprint: string | null,
  ) {
    this.stream = `${input.resource}${input.scope ? ` in ${input.scope}` : ''}`;
  }

  /** What to do after page `checkpoint.page`; `end`: the page confirms the end the page before announced. */
  verdict(checkpoint: Checkpoint, ids: readonly string[], hasMore: boolean | null): PageVerdict | 'end' {
    const fingerprint = pageFingerprint(ids);
    if (checkpoint.confirming && (fingerprint === null || fingerprint === this.lastFingerprint)) return 'end';
    if (fingerprint !== null && fingerprint === this.lastFingerprint) {
      throw new SamePageError(
        `Upstream served the same page twice for ${this.input.resource}${this.input.scope ? ` in ${this.input.scope}` : ''} (page ${checkpoint.page}); stopping instead of looping.`,
      );
    }
    const repeated = this.history.see(fingerprint, checkpoint.page);
    if (repeated !== undefined) {
      throw new RepeatedPageError(
        `Upstream's ${this.stream} page ${checkpoint.page} repeats page ${repeated} of the same pass (the same records in the same order): its paging loops; the pass stops instead of looping.`,
      );
    }
    if (checkpoint.page > this.pageBound) {
      throw new PageBoundError(
        `Upstream's ${this.stream} went on past ${this.pageBound} pages in one pass without saying it ended (page ${checkpoint.page}, has_more_results ${String(hasMore)}); ` +
          'the pass stops there. If the stream really is that long, raise SYNC_MAX_PAGES_PER_PASS.',
      );
    }
    this.lastFingerprint = fingerprint ?? this.lastFingerprint;
    return pageVerdict({ hasMore, received: ids.length, perPage: checkpoint.perPage });
  }
}

/** An incremental pass's stored fingerprints with page `page`'s (up to {@link storedFingerprintsMax}). */
function withFingerprint(stored: string[] | undefined, page: number, fingerprint: string | null): string[] | undefined {
  const list = stored ?? [];
  // A list that does not end at the page before (a pass begun before there were lists) is left as it is.
  if (list.length !== page - 1 || list.length >= storedFingerprintsMax) return stored;
  return [...list, storedFingerprint(fingerprint)];
}

/** The checkpoint without the async request of its next page (read, or given up). */
function withoutPending(checkpoint: Checkpoint): Checkpoint {
  const { pendingAsync: _read, ...rest } = checkpoint;
  return rest;
}

export function activityContext(): Context | undefined {
  try {
    return Context.current();
  } catch {
    return undefined;
  }
}
