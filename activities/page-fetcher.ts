// The fetching side of a slice (activities/sync-slice.ts): a stream's list pages asked for ahead of
// the one being written, through async requests where the source system prefers them, rate limits
// waited out in place. A page is asked for once: the slice takes what was fetched ahead for it.
import { setTimeout as sleep } from 'node:timers/promises';
import { pollListPage, startListPage, type AccountContext, type PageOrPending } from '../connectors/operations.ts';
import type { UpstreamClient } from '../connectors/upstream-client.ts';
import { asyncPollIntervalMs } from '../lib/async-requests.ts';
import { AsyncRequestExpiredError, MirrorError, UpstreamError, UpstreamRateLimitedError } from '../lib/errors.ts';
import type { ListPage } from '../lib/list-page.ts';
import { CrossProjectScopeError } from '../mirror/records/page-write.ts';

interface PageFetcherOptions {
  upstream: UpstreamClient;
  /** The account's credentials and what page `page` is, for each call. */
  call: (page: number) => AccountContext & { page: number; what: string; signal: AbortSignal | undefined };
  resource: string;
  path: string;
  perPage: number;
  projectId: string | undefined;
  includeSourceData: boolean;
  filters: { field: string; operator: string; value: unknown }[] | undefined;
  /** Ask through async requests (a slow source system), polled by the workflow or, without one, here. */
  preferAsync: boolean;
  /** A workflow waits for pending async requests: a pending page is handed back, not polled here. */
  workflowPolls: boolean;
  /** Digest each page; a page whose digest `known(page)` gives back comes back unchanged, unread. */
  digests: boolean;
  known: (page: number) => string | undefined;
  /** A list across projects: its records are read in the worker (each record's project is its scope). */
  crossProject: boolean;
  /** The async request the pass remembered for a page (a resumed slice polls it instead of asking again). */
  pendingAsync: () => { id: string; page: number } | undefined;
  /**
   * A remembered async request expired before it was read: the pass forgets it and says how many
   * expired in a row (a retry then asks anew, once).
   */
  onExpired: () => Promise<number>;
  signal: AbortSignal | undefined;
}

export class PageFetcher {
  private readonly ahead = new Map<number, Promise<PageOrPending>>();

  constructor(private readonly o: PageFetcherOptions) {}

  /** Asks for `page` now, to be taken later (nothing if it was asked for already). */
  prefetch(page: number): void {
    if (this.ahead.has(page)) return;
    const p = this.fetch(page);
    p.catch(() => undefined);
    this.ahead.set(page, p);
  }

  /** Whether `page` was asked for and not taken yet. */
  has(page: number): boolean {
    return this.ahead.has(page);
  }

  /** Page `page`: as fetched ahead, else fetched now. */
  take(page: number): Promise<PageOrPending> {
    const p = this.ahead.get(page) ?? this.fetch(page);
    this.ahead.delete(page);
    return p;
  }

  /**
   * A page that came back unchanged but could not be kept (its records changed since), read again
   * in full. Its body must still be the one judged: the ids, has_more and digest recorded with it.
   */
  async again(page: number, digest: string): Promise<ListPage> {
    const answer = await this.fetch(page, true);
    if (!answer.page || answer.page.digest !== digest) {
      // A retry of the slice starts this page over (a MirrorError of status 500 is retryable).
      throw new MirrorError(`Upstream's ${this.o.resource} page ${page} changed between two reads; the slice is retried`);
    }
    return answer.page;
  }

  private fetch(page: number, fresh = false): Promise<PageOrPending> {
    const o = this.o;
    return waitingOutRateLimits(async () => {
      const pending = o.pendingAsync();
      let result = pending?.page === page ? await this.poll(pending.id, page) : await this.start(page, fresh);
      // Without a workflow to wait in (children batches), wait here, heartbeating on the timer.
      while (result.pending && !o.workflowPolls) {
        await sleep(asyncPollIntervalMs, undefined, o.signal ? { signal: o.signal } : {});
        result = await this.poll(result.pending.id, page);
      }
      return result;
    }, o.signal).catch((error: unknown) => {
      // The first page of a list across projects answered 4xx: the upstream does not take `*` there.
      if (o.crossProject && page === 1 && error instanceof UpstreamError && [400, 404, 405, 409, 422].includes(error.upstreamStatus ?? 0)) {
        throw new CrossProjectScopeError(`the upstream answered ${error.upstreamStatus} to its first page: ${error.message}`, { cause: error });
      }
      throw error;
    });
  }

  private start(page: number, fresh: boolean): Promise<PageOrPending> {
    const o = this.o;
    return startListPage(o.upstream, {
      ...o.call(page),
      path: o.path,
      perPage: o.perPage,
      projectId: o.projectId,
      includeSourceData: o.includeSourceData,
      filters: o.filters,
      // Slow source systems answer through async requests, polled from the stream's workflow.
      preferAsync: o.preferAsync,
      ...(o.crossProject ? { parse: true } : {}),
      ...(o.digests ? { digest: fresh ? {} : { unless: o.known(page) } } : {}),
    });
  }

  private async poll(id: string, page: number): Promise<PageOrPending> {
    try {
      return await pollListPage(this.o.upstream, { ...this.o.call(page), id });
    } catch (error) {
      if (!(error instanceof AsyncRequestExpiredError)) throw error;
      // Expired results cannot be read again: forget the request so the retry asks anew, once.
      const expiries = await this.o.onExpired();
      if (expiries < 2) throw error;
      throw new AsyncRequestExpiredError(
        `${error.message}, twice in a row: the upstream keeps async results for less time than the mirror waits between polls (${asyncPollIntervalMs / 1000} s)`,
        { final: true, cause: error },
      );
    }
  }
}

/** How long one activity waits out 429s before handing the wait to Temporal's retry (with its delay). */
const rateLimitPatienceMs = 5 * 60_000;

/**
 * Runs `fn` again after each 429, once the upstream's window resets (the governor, told of the 429,
 * holds every other request of the budget until then too). A rate limit is not a failure: it must
 * not spend the activity's retry attempts, or a long throttle would fail the stream. The activity
 * heartbeats on its own timer meanwhile.
 */
async function waitingOutRateLimits<T>(fn: () => Promise<T>, signal?: AbortSignal): Promise<T> {
  const giveUpAt = Date.now() + rateLimitPatienceMs;
  for (;;) {
    try {
      return await fn();
    } catch (error) {
      if (!(error instanceof UpstreamRateLimitedError) || error.resetAt > giveUpAt) throw error;
      await sleep(Math.max(100, error.resetAt - Date.now()), undefined, signal ? { signal } : {});
    }
  }
}
