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
import { crossProjectKey, stagePage } from '../mirror/records/page-write.ts';
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

  async run(input: SyncSliceInput, key: StreamKey): Promise<SyncSliceResult> {
    const { pool, accounts } = this.deps;
    const ctx = activityContext();
    const account = await accounts.get(input.accountId);
    const profile: SourceSystemProfile | undefined = knownProfile(account.sourceSystem);
    const perPage = profile ? perPageFor(profile, input.resource) : 100;
    const pass = await beginOrResumePass(pool, key, { passKey: input.passKey, mode: input.mode, perPage });
    let checkpoint = pass.checkpoint;
    const counts: SyncSliceResult = { ...emptyCounts(), done: false, generation: pass.generation };
    if (checkpoint.done) return { ...counts, done: true };
    const historyKey = `${pass.streamId}:${pass.generation}:${checkpoint.passKey}`;
    const history = await this.historyOf(pass, checkpoint, historyKey);
    const judge = new PageJudge(input, history, this.deps.pageBound, checkpoint.lastFingerprint);

    const token = await accounts.token(input.accountId);
    const support = profile?.resources[input.resource];
    // A full pass digests every page; a page byte for byte as an earlier pass committed it (and whose
    // records nobody changed since) is kept without parsing or writing it.
    const fullPass = checkpoint.mode === 'full';
    const maxPages = input.maxPages ?? defaultSlicePages;
    // A list across projects: its pages are read in the worker (each record's project is its scope) and
    // never kept unread (its records' scopes, not the stream's, say whether they changed since).
    const cross = input.scope === allProjectsScope;
    const known = fullPass && !cross ? await knownPages(pool, pass, { from: checkpoint.page, to: checkpoint.page + maxPages }) : new Map<number, KnownPage>();
    const reusable = (page: number): KnownPage | undefined => {
      const k = known.get(page);
      return k && k.perPage === checkpoint.perPage ? k : undefined;
    };
    // Pages are written a few at a time (Postgres, not the fetch, is the slower side of a big pass),
    // each committed with its checkpoint after the page before it.
    const writer = new PageWriter(checkpoint.counts, checkpoint.startedEmpty ?? false, counts, (page) => ctx?.heartbeat({ page: page + 1 }));
    const preferAsync = Boolean(input.asyncPages && profile?.preferAsync);
    const fetcher = new PageFetcher({
      upstream: this.deps.upstream,
      call: (page) => ({
        accountToken: token,
        accountId: input.accountId,
        sourceSystem: profile?.slug,
        page,
        what: `${input.resource}${input.scope ? ` (${input.scope})` : ''} page ${page}`,
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
      preferAsync,
      workflowPolls: Boolean(input.asyncPages),
      digests: fullPass && !cross,
      known: (page) => reusable(page)?.digest,
      crossProject: cross,
      pendingAsync: () => checkpoint.pendingAsync,
      onExpired: async () => {
        const expiries = (checkpoint.asyncExpiries ?? 0) + 1;
        await writer.drained();
        checkpoint = { ...withoutPending(checkpoint), asyncExpiries: expiries, counts: writer.committed };
        await saveCheckpoint(pool, pass, checkpoint, { pages: 0, records: 0 });
        return expiries;
      },
      signal: ctx?.cancellationSignal,
    });

    // Heartbeat on a timer too, so a slow upstream page is not taken for a dead worker.
    let position = { page: checkpoint.page };
    const beat = setInterval(() => ctx?.heartbeat(position), 5_000);
    try {
      fetcher.prefetch(checkpoint.page);
      for (let n = 0; n < maxPages && fetcher.has(checkpoint.page); n++) {
        const answer = await fetcher.take(checkpoint.page);
        if (answer.pending) {
          // Remember the request with the stream, so a restarted worker polls it instead of asking again.
          const { id, expiresAt } = answer.pending;
          await writer.drained();
          checkpoint = { ...checkpoint, counts: writer.committed, pendingAsync: { id, page: checkpoint.page, expiresAt } };
          await saveCheckpoint(pool, pass, checkpoint, { pages: 0, records: 0 });
          this.keepHistory(historyKey, history);
          return { ...counts, waitAsync: { id, expiresAt } };
        }
        // An unchanged page is judged by the ids and has_more it had when it was committed.
        const keep = answer.unchanged ? reusable(checkpoint.page) : undefined;
        const page: ListPage | undefined = answer.page;
        // Ids repeat across projects: a page across projects is known by its records' project and id.
        const ids =
          cross && page && 'items' in page.records ? page.records.items.map((item) => crossProjectKey(item, input.resource)) : page ? page.ids : keep!.ids;
        const hasMore = page ? page.hasMore : keep!.hasMore;
        const verdict = judge.verdict(checkpoint, ids, hasMore);
        if (verdict === 'end') {
          // The end is confirmed: nothing past the full last page (an upstream that ignores an
          // out-of-range page number serves the last page again, which ends the pass too).
          await writer.drained();
          counts.deleted = await finishPass(pool, key, pass, { ...withoutPending(checkpoint), counts: writer.committed, confirming: false }, this.statistics);
          return { ...counts, done: true };
        }
        if (verdict === 'confirm') {
          this.deps.logger.warn(
            { resource: input.resource, scope: input.scope, page: checkpoint.page },
            'has_more_results is false on a full page; fetching the next page to confirm the end',
          );
        }
        // Fetch the next page while this one is written.
        if (verdict !== 'stop' && n + 1 < maxPages) {
          fetcher.prefetch(checkpoint.page + 1);
          // One page further too where the last pass saw that page (so it is no request past the
          // end): with unchanged pages kept, fetching is all a pass waits for. Not for async pages,
          // whose pending requests are remembered one at a time.
          const further = checkpoint.page + 2;
          if (n + 2 < maxPages && !preferAsync && reusable(further)) fetcher.prefetch(further);
        }
        const fingerprint = pageFingerprint(ids);
        const nextCheckpoint: Checkpoint = {
          ...withoutPending(checkpoint),
          asyncExpiries: undefined,
          page: checkpoint.page + 1,
          lastFingerprint: fingerprint ?? checkpoint.lastFingerprint,
          done: false,
          confirming: verdict === 'confirm',
          ...(checkpoint.mode === 'incremental' ? { pageFingerprints: withFingerprint(checkpoint.pageFingerprints, checkpoint.page, fingerprint) } : {}),
        };
        const digest = page ? (page.digest ?? null) : answer.unchanged!.digest;
        const pageNo = checkpoint.page;
        const seen = fullPass ? { page: pageNo, perPage: checkpoint.perPage, digest, hasMore } : undefined;
        await writer.add({
          page: pageNo,
          ids,
          checkpoint: nextCheckpoint,
          stage: async (insertOnly) => {
            const kept = keep ? await stageKeptPage(pool, { key, pass, known: keep }) : null;
            if (kept) return kept;
            // Not kept (its records changed since, or it is new): written. A page that came back
            // unchanged but cannot be kept is asked for once more, to be read this time.
            return stagePage(pool, {
              key,
              pass,
              records: (page ?? (await fetcher.again(pageNo, digest!))).records,
              // A full pass reads the whole list: its pages give each record its place. An incremental
              // one reads only what changed: those keep their places, and new ones go after the rest.
              ...(fullPass ? { ordinalBase: (pageNo - 1) * checkpoint.perPage } : { ordinalBase: await appendedOrdinal(pool, key), keepOrdinal: true }),
              what: `${input.resource}${input.scope ? ` (${input.scope})` : ''} page ${pageNo}`,
              ...(seen ? { seen } : {}),
              insertOnly,
              buffers: this.bodyBuffers,
            });
          },
        });
        checkpoint = { ...nextCheckpoint, counts: writer.committed };
        position = { page: checkpoint.page };
        if (verdict === 'stop') {
          await writer.drained();
          counts.deleted = await finishPass(pool, key, pass, { ...checkpoint, counts: writer.committed }, this.statistics);
          return { ...counts, done: true };
        }
      }
      await writer.drained();
      this.keepHistory(historyKey, history);
      return counts;
    } finally {
      clearInterval(beat);
      // Leaving on an error: no write of this slice may still be running when its retry begins.
      await writer.settled();
    }
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
