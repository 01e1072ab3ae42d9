// Sync activities: the side effects of a stream's pass. An activity fetches a bounded slice of
// pages, writes each with its checkpoint, heartbeats, and returns only counts: records never travel
// through workflow history. A retried or restarted activity resumes at the last committed page.
// A pass whose upstream pages loop (a page repeats any earlier page of the pass) or never end (past
// SYNC_MAX_PAGES_PER_PASS) fails, never retried, before it can finish: nothing is marked deleted.
import { Context } from '@temporalio/activity';
import { isMirrored, knownProfile, perPageFor, scopeKindIn, type SourceSystemProfile } from '../connectors/source-systems/index.ts';
import { listPage, pollListPage, startListPage, type Page, type PageOrPending } from '../connectors/operations.ts';
import { pageFingerprint, pageVerdict } from '../connectors/pagination.ts';
import type { UpstreamClient } from '../connectors/upstream-client.ts';
import pLimit from 'p-limit';
import { setTimeout as sleep } from 'node:timers/promises';
import { asyncPollIntervalMs } from '../lib/async-requests.ts';
import { AsyncRequestExpiredError, MirrorError, RepeatedPageError, UpstreamError, UpstreamNotFoundError, UpstreamRateLimitedError } from '../lib/errors.ts';
import type { Logger } from '../lib/logger.ts';
import { allProjectsScope, formatScope, listPath, parseScope, resourceDef, resources, type ScopeKind } from '../lib/resources.ts';
import type { AccountStore } from '../mirror/accounts.ts';
import { liveRecordIds } from '../mirror/known-ids.ts';
import type { Pool } from '../mirror/pool.ts';
import { crossProjectSupport, rememberCrossProject } from '../mirror/cross-project.ts';
import { CrossProjectScopeError, crossProjectKey, finishPass, keepUnchangedPage, knownPages, retireRemovedProjects, writePage, type KnownPage, type PageRecords } from '../mirror/records-store.ts';
import { beginOrResumePass, committedPageIds, markStreamFailed, parentsToRefresh, retireStream, saveCheckpoint, type Checkpoint, type PassMode, type StreamPass } from '../mirror/streams.ts';
import { defaultPollingPolicy, pollingDecision, pollingDecisions, recordPoll, webhookCoverage, type PollDecision, type PollingPolicy, type WebhookCoverage } from '../mirror/polling.ts';
import { asActivity } from './failures.ts';
import { withHeartbeat } from './heartbeat.ts';
import { PageHistory, storedFingerprint } from './page-history.ts';

export interface SyncDeps {
  upstream: UpstreamClient;
  pool: Pool;
  accounts: AccountStore;
  logger: Logger;
  /** Most pages one pass of a stream may take (SYNC_MAX_PAGES_PER_PASS); default {@link defaultMaxPagesPerPass}. */
  maxPagesPerPass?: number;
  /** The incremental and full passes' periods (SYNC_INCREMENTAL_MINUTES, SYNC_FULL_HOURS): adaptive polling's bounds. */
  polling?: PollingPolicy;
}

/** Far past any real stream: 100 million records at 1000 a page. */
export const defaultMaxPagesPerPass = 100_000;

/** A pass that went past its page bound without the upstream saying it ended. Never retried. */
export class PageBoundError extends UpstreamError {
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

/** Most parents a children plan names inline (about 40 bytes each in the workflow's history). */
const inlineTotalMax = 20_000;

/** Page histories of passes between two slices, so a slice need not read them again (see `historyOf`). */
const historiesKept = 64;

/** One stream to sync: enough to fetch it without looking anything up. */
export interface StreamSpec {
  accountId: string;
  resource: string;
  /** Canonical scope (see lib/resources.ts). */
  scope: string;
  /** List path, e.g. `/projects` or `/ap-invoices/<id>/line-items`. */
  path: string;
  projectId?: string;
}

const defaultSlicePages = 200;
/**
 * Pages of a stream written at once. Each commits only after the one before it, so with two a
 * connection that finished its page first sat idle until the other committed; with three it writes
 * the next meanwhile. Bench [2], runs side by side: 0.45-0.47x the ceiling with two, 0.49x with three.
 * A waiting page holds its connection: a worker's pool is sized for that (bin/worker.ts `workerPoolSize`).
 */
export const writeDepth = 3;

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
   * (mirror/polling.ts: webhook-covered, here) is left to a later pass, asking the upstream nothing.
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
}

export interface PlannedResource {
  name: string;
  /** Where it lives in this account's source system. */
  scope: ScopeKind;
  /**
   * Project-scoped resources: false where the source system is known not to list it across projects
   * (`Project-Id: *`: its profile says so, or it refused before); otherwise the pass tries it.
   */
  crossProject?: boolean;
}

export interface SyncChildrenInput {
  accountId: string;
  /** The child resource, e.g. `ap-invoice-line-items`. */
  resource: string;
  parentResource: string;
  /** Scope of the parents (`''` or `project=<id>`). */
  parentScope: string;
  parentIds: string[];
  projectId?: string;
  passKey: string;
  mode: PassMode;
  concurrency?: number;
}

export interface AccountPlan {
  sourceSystem: string;
  /** Resources this account's source system serves, in dependency order. */
  resources: PlannedResource[];
}

export interface ParentScopesInput {
  accountId: string;
  /** The parent resource whose live records give the child streams' scopes. */
  parentResource: string;
  parentScope: string;
  /** Only parents whose children of this resource are due again (an incremental pass; see `parentsToRefresh`). */
  changedFor?: string;
  /** With `changedFor`: the pass asking (parents it already visited stay in the list). */
  passKey?: string;
}

/** One small stream of a sweep: a project's list, or a parent's children. */
export interface SweepItem {
  resource: string;
  scope: string;
  path: string;
  projectId?: string;
}

export interface SweepInput {
  accountId: string;
  passKey: string;
  mode: PassMode;
  items: SweepItem[];
  /** Streams synced at once (default 4). */
  concurrency?: number;
  /**
   * An account's scheduled incremental pass: streams not due (mirror/polling.ts) are skipped, asking
   * the upstream nothing. Targeted passes list what they name.
   */
  adaptive?: boolean;
}

export interface SweepResult extends SliceCounts {
  streams: number;
  /** Of them, streams skipped as not due (an adaptive pass). */
  notDue: number;
  /** Streams that failed for good (the others went on). */
  failed: { resource: string; scope: string; error: string }[];
}

/** The children streams of a parent resource in some parent scopes, as a pass plans them. */
export interface ChildrenPlanInput {
  accountId: string;
  parentResource: string;
  parentScopes: string[];
  childResource: string;
  /** Only parents whose children are due again (an incremental pass); else every live parent. */
  changedOnly: boolean;
  /** A scope with more parents than this is left to a workflow of its own (it only names it). */
  inlineMax: number;
}

export interface ChildrenPlan {
  /** Per parent scope, the parents whose children to list. */
  inline: Record<string, string[]>;
  /** Parent scopes with more than `inlineMax` such parents. */
  big: string[];
}

const countKeys = ['pages', 'records', 'inserted', 'updated', 'unchanged', 'deleted'] as const;
const emptyCounts = (): SliceCounts => ({ pages: 0, records: 0, inserted: 0, updated: 0, unchanged: 0, deleted: 0 });

/** Dependency order: account-level resources, then project-scoped ones, then children. */
const scopeOrder: Record<ScopeKind, number> = { account: 0, project: 1, child: 2 };

export function createSyncActivities(deps: SyncDeps) {
  const { upstream, pool, accounts, logger: log } = deps;
  const pageBound = deps.maxPagesPerPass ?? defaultMaxPagesPerPass;
  const polling = deps.polling ?? defaultPollingPolicy;
  /** Passes' page histories between their slices, by pass (most recently used last). */
  const histories = new Map<string, PageHistory>();

  /**
   * The pages a pass committed before its checkpoint's page: kept from its last slice in this
   * process, else from stream_pages (a full pass) or the checkpoint (an incremental one).
   */
  async function historyOf(pass: StreamPass, checkpoint: Checkpoint, key: string): Promise<PageHistory> {
    const kept = histories.get(key);
    // Taken: a second attempt of the slice running meanwhile builds its own.
    histories.delete(key);
    if (kept) {
      kept.forgetFrom(checkpoint.page);
      return kept;
    }
    if (checkpoint.page === 1) return new PageHistory();
    if (checkpoint.mode === 'incremental') return PageHistory.of(checkpoint.pageFingerprints ?? []);
    const history = new PageHistory();
    for (const row of await committedPageIds(pool, pass, checkpoint.page)) history.see(pageFingerprint(row.ids), row.page);
    return history;
  }

  function keepHistory(key: string, history: PageHistory): void {
    histories.set(key, history);
    if (histories.size > historiesKept) histories.delete(histories.keys().next().value!);
  }

  async function profileFor(accountId: string): Promise<SourceSystemProfile | undefined> {
    const account = await accounts.get(accountId);
    return knownProfile(account.sourceSystem);
  }

  return {
    /** Which resources to mirror for an account: from its source system's profile, else by probing. */
    async planAccount(input: { accountId: string }): Promise<AccountPlan> {
      // Beats on a timer (activities/heartbeat.ts), as the other plan activities: probing an unknown
      // source system's lists can take a while, and a dead worker's plan is retried within 20 s.
      return withHeartbeat(() => asActivity(async () => {
        const account = await accounts.get(input.accountId);
        const profile = knownProfile(account.sourceSystem);
        let supported: string[];
        if (profile) {
          supported = resources.filter((r) => r.name in profile.resources).map((r) => r.name);
        } else {
          // Unknown source system: probe each top-level list once.
          const token = await accounts.token(input.accountId);
          supported = [];
          for (const r of resources.filter((d) => d.scope === 'account' && isMirrored(d.name))) {
            try {
              await listPage(upstream, { accountToken: token, accountId: input.accountId, path: r.path, page: 1, perPage: 1 });
              supported.push(r.name);
            } catch (error) {
              if (!(error instanceof UpstreamNotFoundError)) throw error;
            }
          }
        }
        const learned = await crossProjectSupport(pool, account.sourceSystem);
        const planned: PlannedResource[] = supported.map((name) => {
          const scope = scopeKindIn(profile, name, resourceDef(name)!.scope);
          if (scope !== 'project') return { name, scope };
          return { name, scope, crossProject: profile?.resources[name]?.crossProject ?? learned.get(name) ?? true };
        });
        planned.sort((a, b) => scopeOrder[a.scope] - scopeOrder[b.scope]);
        return { sourceSystem: account.sourceSystem, resources: planned };
      }));
    },

    /** Ids of the live records of a parent stream: the scopes of its children (projects, invoices, ...). */
    async listParentIds(input: ParentScopesInput): Promise<string[]> {
      if (input.changedFor !== undefined) {
        const due = await withHeartbeat(() => asActivity(() => parentsToRefresh(pool, { accountId: input.accountId, parentResource: input.parentResource, parentScopes: [input.parentScope], childResource: input.changedFor!, ...(input.passKey ? { passKey: input.passKey } : {}) })));
        return due.get(input.parentScope) ?? [];
      }
      return withHeartbeat(() => asActivity(() => liveRecordIds(pool, { accountId: input.accountId, resource: input.parentResource, scope: input.parentScope })));
    },

    /**
     * The children streams of a parent resource across parent scopes: the parents of each small scope
     * (swept by `sweepScopes`), and the big scopes (left to a children workflow of their own).
     */
    async planChildren(input: ChildrenPlanInput): Promise<ChildrenPlan> {
      return withHeartbeat(() => asActivity(async () => {
        const parents = await parentsToRefresh(pool, { ...input, every: !input.changedOnly });
        const plan: ChildrenPlan = { inline: {}, big: [] };
        // Ids travel through the workflow's history: past `inlineTotalMax` of them, scopes get their own workflow.
        let inline = 0;
        for (const [scope, ids] of parents) {
          if (ids.length > input.inlineMax || inline + ids.length > inlineTotalMax) plan.big.push(scope);
          else {
            plan.inline[scope] = ids;
            inline += ids.length;
          }
        }
        return plan;
      }));
    },

    /**
     * Many small streams in one activity (a project's list each, or a parent's children), a few at a
     * time, instead of a workflow each. Each stream's pass keeps its own checkpoint in Postgres, written
     * with every page: a retried sweep (a killed worker, a lost heartbeat) finds the streams it finished
     * done and asks the upstream nothing for them, and resumes the others at their last committed page.
     * A stream that fails for good is reported and the others go on; transient trouble fails the sweep
     * so that Temporal retries it.
     */
    async sweepScopes(input: SweepInput): Promise<SweepResult> {
      const totals: SweepResult = { ...emptyCounts(), streams: 0, notDue: 0, failed: [] };
      const ctx = activityContext();
      const limit = pLimit(input.concurrency ?? 4);
      let done = 0;
      const beat = setInterval(() => ctx?.heartbeat({ done }), 5_000);
      try {
        const coverage = await webhookCoverage(pool, input.accountId);
        // Which streams an adaptive pass lists (a retried sweep decides again: the streams it finished
        // are this pass's, so due and done), within the pass's poll budget (mirror/polling.ts): by
        // default as many project lists due only by their clock as the source system serves resources.
        const adaptive = input.adaptive && input.mode === 'incremental';
        const profile = adaptive ? await profileFor(input.accountId) : undefined;
        const budget = profile ? { resources: resources.filter((r) => r.name in profile.resources).length } : {};
        const decisions = adaptive
          ? await pollingDecisions(pool, { accountId: input.accountId, passKey: input.passKey, streams: input.items, policy: polling, coverage, budget })
          : new Map<string, PollDecision>();
        // Every stream ends (or fails) before the sweep does: a retry must not race a stream still running.
        const settled = await Promise.allSettled(
          input.items.map((item) =>
            limit(async () => {
              const decision = pollingDecision(decisions, item.resource, item.scope);
              if (!decision.due) {
                totals.notDue++;
                totals.streams++;
                ctx?.heartbeat({ done: ++done });
                return;
              }
              const spec: SyncSliceInput = { accountId: input.accountId, ...item, passKey: input.passKey, mode: input.mode };
              const key = { accountId: input.accountId, resource: item.resource, scope: item.scope };
              const failed = await streamToEnd(spec, key, totals, { coverage, ...(decision.event ? { event: true } : {}) });
              if (failed !== undefined) totals.failed.push({ resource: item.resource, scope: item.scope, error: failed });
              totals.streams++;
              ctx?.heartbeat({ done: ++done });
            }),
          ),
        );
        const failure = settled.find((r): r is PromiseRejectedResult => r.status === 'rejected');
        if (failure) throw failure.reason;
      } catch (error) {
        return asActivity(() => Promise.reject(error instanceof Error ? error : new Error(String(error))));
      } finally {
        clearInterval(beat);
      }
      return totals;
    },

    /**
     * After a full pass whose projects' stream completed: the records of projects it no longer found
     * are marked deleted (mirror/records-store.ts `retireRemovedProjects`). Returns how many.
     */
    async retireRemovedProjects(input: { accountId: string; passKey: string }): Promise<number> {
      return withHeartbeat(() => asActivity(() => retireRemovedProjects(pool, input.accountId, input.passKey)));
    },

    /** Fetches and writes up to `maxPages` pages of a stream's pass; finishes the pass at its end. */
    async syncSlice(input: SyncSliceInput): Promise<SyncSliceResult> {
      const key = { accountId: input.accountId, resource: input.resource, scope: input.scope };
      try {
        let coverage: WebhookCoverage | undefined;
        if (input.adaptive && input.mode === 'incremental') {
          coverage = await webhookCoverage(pool, input.accountId);
          const decisions = await pollingDecisions(pool, { accountId: input.accountId, passKey: input.passKey, streams: [key], policy: polling, coverage });
          const decision = pollingDecision(decisions, key.resource, key.scope);
          if (!decision.due) return { ...emptyCounts(), done: true, generation: 0, notDue: decision.reason ?? 'not due' };
        }
        const result = await syncSlice(input, key);
        if (result.done && input.scope === allProjectsScope) {
          await rememberCrossProject(pool, (await accounts.get(input.accountId)).sourceSystem, input.resource, true);
        }
        if (result.done) await notePoll(key, { coverage: coverage ?? (await webhookCoverage(pool, input.accountId)) });
        return result;
      } catch (caught) {
        let error = caught;
        const refusal = input.scope === allProjectsScope ? crossProjectRefusal(caught) : undefined;
        if (refusal !== undefined) {
          // Remembered: later passes list this resource project by project without asking again.
          const system = (await accounts.get(input.accountId)).sourceSystem;
          await rememberCrossProject(pool, system, input.resource, false, refusal).catch(() => undefined);
          error = new CrossProjectScopeError(`${input.resource} of ${system} cannot be listed across projects (${refusal}); it is listed project by project instead`, { cause: caught });
          // Not a failure of the account's sync: the stream across projects is gone, and the
          // per-project streams the pass starts instead are what the status page shows.
          await retireStream(pool, key).catch(() => undefined);
        } else {
          await markStreamFailed(pool, key, error instanceof Error ? error.message : String(error)).catch(() => undefined);
        }
        return asActivity(() => Promise.reject(error instanceof Error ? error : new Error(String(error))));
      }
    },

    /**
     * Children listed through their parents (line items, file and drawing versions): one stream per
     * parent, usually a single page each, synced here a batch of parents at a time so that a
     * thousand invoices do not cost a thousand workflows.
     */
    async syncChildren(input: SyncChildrenInput): Promise<SliceCounts & { failed: { scope: string; error: string }[] }> {
      const totals = { ...emptyCounts(), failed: [] as { scope: string; error: string }[] };
      const ctx = activityContext();
      const limit = pLimit(input.concurrency ?? 4);
      let done = 0;
      await Promise.all(
        input.parentIds.map((parentId) =>
          limit(async () => {
            const scope = formatScope([...parseScope(input.parentScope), [input.parentResource, parentId]]);
            const spec: SyncSliceInput = {
              accountId: input.accountId,
              resource: input.resource,
              scope,
              path: listPath(input.resource, parentId),
              ...(input.projectId ? { projectId: input.projectId } : {}),
              passKey: input.passKey,
              mode: input.mode,
            };
            const key = { accountId: input.accountId, resource: input.resource, scope };
            // Transient trouble fails the batch so Temporal retries it (finished parents are skipped
            // then: their pass is done); a permanent one is reported and the others go on.
            const failed = await streamToEnd(spec, key, totals);
            if (failed !== undefined) totals.failed.push({ scope, error: failed });
            ctx?.heartbeat({ done: ++done });
          }),
        ),
      ).catch((error: unknown) => asActivity(() => Promise.reject(error instanceof Error ? error : new Error(String(error)))));
      return totals;
    },
  };

  /**
   * Runs one stream's pass to its end, slice after slice, adding its counts to `totals`. A failure is
   * recorded on the stream; a permanent one is returned (its message), a transient one thrown, so the
   * activity fails and Temporal retries it.
   */
  async function streamToEnd(
    spec: SyncSliceInput,
    key: { accountId: string; resource: string; scope: string },
    totals: Record<(typeof countKeys)[number], number>,
    poll: { coverage?: WebhookCoverage; event?: boolean } = {},
  ): Promise<string | undefined> {
    try {
      for (;;) {
        const r = await syncSlice(spec, key);
        for (const k of countKeys) totals[k] += r[k];
        if (r.done) {
          await notePoll(key, poll);
          return undefined;
        }
      }
    } catch (error) {
      const message = error instanceof Error ? error.message : String(error);
      await markStreamFailed(pool, key, message).catch(() => undefined);
      if (error instanceof MirrorError && !error.retryable) return message;
      throw error;
    }
  }

  /**
   * Counts a completed pass as a poll of its stream and writes when it is due next (mirror/polling.ts).
   * The pass is done whatever happens here: a failure only leaves the stream due at the next pass.
   */
  async function notePoll(key: { accountId: string; resource: string; scope: string }, o: { coverage?: WebhookCoverage; event?: boolean }): Promise<void> {
    try {
      await recordPoll(pool, key, { policy: polling, covered: o.coverage?.covers(key.resource, key.scope) ?? false, ...(o.event ? { event: true } : {}) });
    } catch (error) {
      log.warn({ resource: key.resource, scope: key.scope, err: error }, 'could not record the poll of a stream; it is due at the next pass');
    }
  }

  async function syncSlice(input: SyncSliceInput, key: { accountId: string; resource: string; scope: string }): Promise<SyncSliceResult> {
    const ctx = activityContext();
    const profile = await profileFor(input.accountId);
    const perPage = profile ? perPageFor(profile, input.resource) : 100;
    const pass = await beginOrResumePass(pool, key, { passKey: input.passKey, mode: input.mode, perPage });
    let checkpoint = pass.checkpoint;
    const counts = emptyCounts();
    if (checkpoint.done) return { ...counts, done: true, generation: pass.generation };
    const stream = `${input.resource}${input.scope ? ` in ${input.scope}` : ''}`;
    const historyKey = `${pass.streamId}:${pass.generation}:${checkpoint.passKey}`;
    const history = await historyOf(pass, checkpoint, historyKey);

    const token = await accounts.token(input.accountId);
    const support = profile?.resources[input.resource];
    const filters =
      checkpoint.mode === 'incremental' && checkpoint.since && support?.updateTimeFilter
        ? [{ field: 'source_update_time', operator: '>=', value: checkpoint.since }]
        : undefined;
    const listInput = (page: number) => ({
      accountToken: token,
      accountId: input.accountId,
      sourceSystem: profile?.slug,
      page,
      what: `${input.resource}${input.scope ? ` (${input.scope})` : ''} page ${page}`,
      signal: ctx?.cancellationSignal,
    });
    // A full pass digests every page; a page byte for byte as an earlier pass committed it (and whose
    // records nobody changed since) is kept without parsing or writing it.
    const fullPass = checkpoint.mode === 'full';
    // Pages are written `writeDepth` at a time (Postgres, not the fetch, is the slower side of a big pass);
    // each commits its checkpoint only after the page before it did, so the checkpoint never skips
    // a page. `committed` holds the counts through the last committed page.
    let committed = checkpoint.counts;
    let inFlight: { write: Promise<void>; ids: Set<string> }[] = [];
    const writesDone = async (): Promise<void> => {
      for (const w of inFlight) await w.write;
    };
    // A pass that began on a stream without a live record inserts its pages rather than upserting
    // them, until a record turns out to be there after all (mirror/records-store.ts).
    const fresh = checkpoint.startedEmpty ? { likely: true } : undefined;
    const maxPages = input.maxPages ?? defaultSlicePages;
    // A list across projects: its pages are read in the worker (each record's project is its scope) and
    // never kept unread (its records' scopes, not the stream's, say whether they changed since).
    const cross = input.scope === allProjectsScope;
    const known = fullPass && !cross ? await knownPages(pool, pass, { from: checkpoint.page, to: checkpoint.page + maxPages }) : new Map<number, KnownPage>();
    const reusable = (page: number): KnownPage | undefined => {
      const k = known.get(page);
      return k && k.perPage === checkpoint.perPage ? k : undefined;
    };
    const asyncPreferred = Boolean(input.asyncPages && profile?.preferAsync);
    const startPage = (page: number, fresh = false): Promise<PageOrPending> =>
      startListPage(upstream, {
        ...listInput(page),
        path: input.path,
        perPage: checkpoint.perPage,
        projectId: input.projectId,
        includeSourceData: input.includeSourceData ?? true,
        filters,
        // Slow source systems answer through async requests, polled from the stream's workflow.
        preferAsync: asyncPreferred,
        ...(fullPass && !cross ? { digest: fresh ? {} : { unless: reusable(page)?.digest } } : {}),
      });
    const pollPage = async (id: string, page: number): Promise<PageOrPending> => {
      try {
        return await pollListPage(upstream, { ...listInput(page), id });
      } catch (error) {
        if (!(error instanceof AsyncRequestExpiredError)) throw error;
        // Expired results cannot be read again: forget the request so the retry asks anew, once.
        const expiries = (checkpoint.asyncExpiries ?? 0) + 1;
        await writesDone();
        checkpoint = { ...withoutPending(checkpoint), asyncExpiries: expiries, counts: committed };
        await saveCheckpoint(pool, pass, checkpoint, { pages: 0, records: 0 });
        if (expiries < 2) throw error;
        throw new AsyncRequestExpiredError(
          `${error.message}, twice in a row: the upstream keeps async results for less time than the mirror waits between polls (${asyncPollIntervalMs / 1000} s)`,
          { final: true, cause: error },
        );
      }
    };
    const fetchPage = (page: number, fresh = false): Promise<PageOrPending> =>
      waitingOutRateLimits(async () => {
        const pending = checkpoint.pendingAsync;
        let result = pending?.page === page ? await pollPage(pending.id, page) : await startPage(page, fresh);
        // Without a workflow to wait in (children batches), wait here, heartbeating on the timer.
        while (result.pending && !input.asyncPages) {
          await sleep(asyncPollIntervalMs, undefined, ctx?.cancellationSignal ? { signal: ctx.cancellationSignal } : {});
          result = await pollPage(result.pending.id, page);
        }
        return result;
      }, ctx?.cancellationSignal).catch((error: unknown) => {
        // The first page of a list across projects answered 4xx: the upstream does not take `*` there.
        if (cross && page === 1 && error instanceof UpstreamError && [400, 404, 405, 409, 422].includes(error.upstreamStatus ?? 0)) {
          throw new CrossProjectScopeError(`the upstream answered ${error.upstreamStatus} to its first page: ${error.message}`, { cause: error });
        }
        throw error;
      });

    /**
     * A page that came back unchanged but could not be kept (its records changed since), read again
     * in full. Its body must still be the one judged: the ids, has_more and digest recorded with it.
     */
    const fetchFresh = async (page: number, digest: string): Promise<Page> => {
      const again = await fetchPage(page, true);
      if (!again.page || again.page.digest !== digest) {
        // A retry of the slice starts this page over (a MirrorError of status 500 is retryable).
        throw new MirrorError(`Upstream's ${input.resource} page ${page} changed between two reads; the slice is retried`);
      }
      return again.page;
    };
    // Heartbeat on a timer too, so a slow upstream page is not taken for a dead worker.
    let position = { page: checkpoint.page };
    const beat = setInterval(() => ctx?.heartbeat(position), 5_000);
    try {
      let next: Promise<PageOrPending> | undefined = fetchPage(checkpoint.page);
      const ahead = new Map<number, Promise<PageOrPending>>();
      let lastFingerprint = checkpoint.lastFingerprint;
      for (let n = 0; n < maxPages && next; n++) {
        const answer = await next;
        next = undefined;
        if (answer.pending) {
          // Remember the request with the stream, so a restarted worker polls it instead of asking again.
          const { id, expiresAt } = answer.pending;
          await writesDone();
          checkpoint = { ...checkpoint, counts: committed, pendingAsync: { id, page: checkpoint.page, expiresAt } };
          await saveCheckpoint(pool, pass, checkpoint, { pages: 0, records: 0 });
          keepHistory(historyKey, history);
          return { ...counts, done: false, generation: pass.generation, waitAsync: { id, expiresAt } };
        }
        // An unchanged page is judged by the ids and has_more it had when it was committed.
        const keep = answer.unchanged ? reusable(checkpoint.page) : undefined;
        const page: Page | undefined = answer.page;
        // Ids repeat across projects: a page across projects is known by its records' project and id.
        const crossItems = cross && page ? (page.body ? page.body.parse() : (page.items ?? [])) : undefined;
        const ids = crossItems ? crossItems.map((item) => crossProjectKey(item, input.resource)) : page ? page.ids : keep!.ids;
        const hasMore = page ? page.hasMore : keep!.hasMore;
        const fingerprint = pageFingerprint(ids);
        if (checkpoint.confirming && (fingerprint === null || fingerprint === lastFingerprint)) {
          // The end is confirmed: nothing past the full last page (an upstream that ignores an
          // out-of-range page number serves the last page again, which ends the pass too).
          await writesDone();
          counts.deleted = await finishPass(pool, key, pass, { ...withoutPending(checkpoint), counts: committed, confirming: false });
          return { ...counts, done: true, generation: pass.generation };
        }
        if (fingerprint !== null && fingerprint === lastFingerprint) {
          throw new RepeatedPageError(
            `Upstream served the same page twice for ${input.resource}${input.scope ? ` in ${input.scope}` : ''} (page ${checkpoint.page}); stopping instead of looping.`,
          );
        }
        const repeated = history.see(fingerprint, checkpoint.page);
        if (repeated !== undefined) {
          throw new RepeatedPageError(
            `Upstream's ${stream} page ${checkpoint.page} repeats page ${repeated} of the same pass (the same records in the same order): its paging loops; the pass stops instead of looping.`,
          );
        }
        if (checkpoint.page > pageBound) {
          throw new PageBoundError(
            `Upstream's ${stream} went on past ${pageBound} pages in one pass without saying it ended (page ${checkpoint.page}, has_more_results ${String(hasMore)}); ` +
              'the pass stops there. If the stream really is that long, raise SYNC_MAX_PAGES_PER_PASS.',
          );
        }
        const verdict = pageVerdict({ hasMore, received: ids.length, perPage: checkpoint.perPage });
        if (verdict === 'confirm') {
          log.warn({ resource: input.resource, scope: input.scope, page: checkpoint.page }, 'has_more_results is false on a full page; fetching the next page to confirm the end');
        }
        // Fetch the next page while this one is written.
        if (verdict !== 'stop' && n + 1 < maxPages) {
          next = ahead.get(checkpoint.page + 1) ?? fetchPage(checkpoint.page + 1);
          ahead.delete(checkpoint.page + 1);
          next.catch(() => undefined);
          // One page further too where the last pass saw that page (so it is no request past the
          // end): with unchanged pages kept, fetching is all a pass waits for. Not for async pages,
          // whose pending requests are remembered one at a time.
          const further = checkpoint.page + 2;
          if (n + 2 < maxPages && !asyncPreferred && reusable(further) && !ahead.has(further)) {
            const p = fetchPage(further);
            p.catch(() => undefined);
            ahead.set(further, p);
          }
        }
        const nextCheckpoint: Checkpoint = {
          ...withoutPending(checkpoint),
          asyncExpiries: undefined,
          page: checkpoint.page + 1,
          lastFingerprint: fingerprint ?? lastFingerprint,
          done: false,
          confirming: verdict === 'confirm',
          ...(checkpoint.mode === 'incremental' ? { pageFingerprints: withFingerprint(checkpoint.pageFingerprints, checkpoint.page, fingerprint) } : {}),
        };
        const digest = page ? (page.digest ?? null) : answer.unchanged!.digest;
        const pageNo = checkpoint.page;
        const seen = fullPass ? { page: pageNo, perPage: checkpoint.perPage, digest, hasMore } : undefined;
        const prior = inFlight.at(-1)?.write;
        // At most `writeDepth` pages in flight; and a page sharing a record with one in flight waits for
        // it (both would lock the row, and the later one must not hold locks while it waits).
        if (inFlight.length >= writeDepth) await inFlight[inFlight.length - writeDepth]!.write;
        for (const w of inFlight) if (ids.some((id) => w.ids.has(id))) await w.write;
        const pageCheckpoint = (): Promise<Checkpoint> => (prior ?? Promise.resolve()).then(() => ({ ...nextCheckpoint, counts: committed }));
        const write = (async () => {
          let written = keep ? await keepUnchangedPage(pool, { key, pass, known: keep, checkpoint: pageCheckpoint }) : null;
          if (!written) {
            // Not kept (its records changed since, or it is new): parse and write it. A page that came
            // back unchanged but cannot be kept is asked for once more, to be read this time.
            written = await writePage(pool, {
              key,
              pass,
              records: crossItems ? { items: crossItems } : recordsOf(page ?? (await fetchFresh(pageNo, digest!))),
              ordinalBase: (pageNo - 1) * checkpoint.perPage,
              ...(seen ? { seen } : {}),
              ...(fresh ? { fresh } : {}),
              checkpoint: pageCheckpoint,
            });
          }
          committed = {
            inserted: committed.inserted + written.inserted,
            updated: committed.updated + written.updated,
            unchanged: committed.unchanged + written.unchanged,
            deleted: committed.deleted,
          };
          counts.pages += 1;
          counts.records += ids.length;
          counts.inserted += written.inserted;
          counts.updated += written.updated;
          counts.unchanged += written.unchanged;
          ctx?.heartbeat({ page: pageNo + 1 });
        })();
        write.catch(() => undefined);
        inFlight = [...inFlight.slice(-(writeDepth - 1)), { write, ids: new Set(ids) }];
        checkpoint = { ...nextCheckpoint, counts: committed };
        lastFingerprint = checkpoint.lastFingerprint;
        position = { page: checkpoint.page };
        if (verdict === 'stop') {
          await writesDone();
          counts.deleted = await finishPass(pool, key, pass, { ...checkpoint, counts: committed });
          return { ...counts, done: true, generation: pass.generation };
        }
      }
      await writesDone();
      keepHistory(historyKey, history);
      return { ...counts, done: false, generation: pass.generation };
    } finally {
      clearInterval(beat);
      // Leaving on an error: no write of this slice may still be running when its retry begins.
      await Promise.allSettled(inFlight.map((w) => w.write));
    }
  }
}

/**
 * Why the upstream will not list a resource across projects, when `error` says so: it refused
 * `Project-Id: *` (a 4xx other than auth and rate limits to the list's first page), or its records
 * carry no project_id.
 */
function crossProjectRefusal(error: unknown): string | undefined {
  return error instanceof CrossProjectScopeError ? error.message : undefined;
}

/** A page's records for the write: its body as received where it was scanned, else its objects. */
function recordsOf(page: Page): PageRecords {
  const body = page.body;
  return body ? { ...body, ids: page.ids } : { items: page.items ?? [] };
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

function activityContext(): Context | undefined {
  try {
    return Context.current();
  } catch {
    return undefined;
  }
}

export type SyncActivities = ReturnType<typeof createSyncActivities>;

