// Sync activities: the side effects of a stream's pass. An activity fetches a bounded slice of
// pages, writes each with its checkpoint, heartbeats, and returns only counts: records never travel
// through workflow history. A slice's pages go through three stages, each in a file of its own:
// fetched ahead (page-fetcher.ts), judged in the slice loop (sync-slice.ts), written and committed
// in order (page-writer.ts). A retried or restarted activity resumes at the last committed page.
import { isMirrored, knownProfile, scopeKindIn, type SourceSystemProfile } from '../connectors/source-systems/index.ts';
import { listPage } from '../connectors/operations.ts';
import pLimit from 'p-limit';
import { CredentialsRefusedError, MirrorError, UpstreamAuthError, UpstreamNotFoundError } from '../lib/errors.ts';
import type { AccountCredentials } from '../connectors/credentials.ts';
import type { Logger } from '../lib/logger.ts';
import { allProjectsScope, formatScope, listPath, parseScope, resourceDef, resources, type ScopeKind } from '../lib/resources.ts';
import type { AccountStore } from '../mirror/control/accounts.ts';
import { liveRecordIds } from '../mirror/streams/known-ids.ts';
import type { Pool } from '../mirror/db/pool.ts';
import { crossProjectSupport, rememberCrossProject } from '../mirror/streams/cross-project.ts';
import { retireRemovedProjects } from '../mirror/records/finish-pass.ts';
import { CrossProjectScopeError } from '../mirror/records/page-write.ts';
import { markStreamFailed, markStreamPaused, parentsToRefresh, retireStream, type PassMode } from '../mirror/streams/streams.ts';
import {
  defaultPollingPolicy,
  pollingDecision,
  pollingDecisions,
  recordPoll,
  webhookCoverage,
  type PollDecision,
  type PollingPolicy,
  type WebhookCoverage,
} from '../mirror/streams/polling.ts';
import type { UpstreamClient } from '../connectors/upstream-client.ts';
import { asActivity } from './failures.ts';
import { withHeartbeat } from './heartbeat.ts';
import { activityContext, defaultMaxPagesPerPass, SliceRunner, type SliceCounts, type SyncSliceInput, type SyncSliceResult } from './sync-slice.ts';

export { writeDepth } from './page-writer.ts';
export type { SliceCounts, SyncSliceInput, SyncSliceResult } from './sync-slice.ts';

export interface SyncDeps {
  upstream: UpstreamClient;
  pool: Pool;
  accounts: AccountStore;
  logger: Logger;
  /** Most pages one pass of a stream may take (SYNC_MAX_PAGES_PER_PASS); default {@link defaultMaxPagesPerPass}. */
  maxPagesPerPass?: number;
  /** The incremental and full passes' periods (SYNC_INCREMENTAL_MINUTES, SYNC_FULL_HOURS): adaptive polling's bounds. */
  polling?: PollingPolicy;
  /** Judges a 401: the account's credentials refused (confirmed by a cheap call), or one list's own refusal. */
  credentials?: AccountCredentials;
}

/** Most parents a children plan names inline (about 40 bytes each in the workflow's history). */
const inlineTotalMax = 20_000;

interface PlannedResource {
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
   * An account's scheduled incremental pass: streams not due (mirror/streams/polling.ts) are skipped, asking
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
  const slices = new SliceRunner({ upstream, pool, accounts, logger: log, pageBound });

  /** An account whose credentials are refused, or which is unlinked, asks the upstream nothing. */
  async function usable(accountId: string): Promise<void> {
    const { status, reason } = await accounts.status(accountId);
    if (status !== 'linked')
      throw new CredentialsRefusedError(`The account is ${status}${reason ? `: ${reason}` : ''}; its passes wait until it is linked again.`);
  }

  /**
   * The error that stops a pass because the account's credentials are refused, when `error` is one:
   * a 401 counts only once the upstream refuses the token on a cheap call too (else it is the list's own).
   */
  async function refusedCredentials(accountId: string, error: unknown): Promise<CredentialsRefusedError | undefined> {
    if (error instanceof CredentialsRefusedError) return error;
    if (!(error instanceof UpstreamAuthError) || error.upstreamStatus !== 401 || !deps.credentials) return undefined;
    const verdict = await deps.credentials.confirm(accountId).catch((e: unknown) => {
      log.warn({ err: e }, 'could not check whether the upstream still takes the account token');
      return undefined;
    });
    if (!verdict?.refused) return undefined;
    return new CredentialsRefusedError(`The upstream refuses the account's credentials: ${verdict.reason}`, { cause: error });
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
      return withHeartbeat(() =>
        asActivity(async () => {
          await usable(input.accountId);
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
                if (!(error instanceof UpstreamNotFoundError)) throw (await refusedCredentials(input.accountId, error)) ?? error;
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
        }),
      );
    },

    /** Ids of the live records of a parent stream: the scopes of its children (projects, invoices, ...). */
    async listParentIds(input: ParentScopesInput): Promise<string[]> {
      if (input.changedFor !== undefined) {
        const due = await withHeartbeat(() =>
          asActivity(() =>
            parentsToRefresh(pool, {
              accountId: input.accountId,
              parentResource: input.parentResource,
              parentScopes: [input.parentScope],
              childResource: input.changedFor!,
              ...(input.passKey ? { passKey: input.passKey } : {}),
            }),
          ),
        );
        return due.get(input.parentScope) ?? [];
      }
      return withHeartbeat(() =>
        asActivity(() => liveRecordIds(pool, { accountId: input.accountId, resource: input.parentResource, scope: input.parentScope })),
      );
    },

    /**
     * The children streams of a parent resource across parent scopes: the parents of each small scope
     * (swept by `sweepScopes`), and the big scopes (left to a children workflow of their own).
     */
    async planChildren(input: ChildrenPlanInput): Promise<ChildrenPlan> {
      return withHeartbeat(() =>
        asActivity(async () => {
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
        }),
      );
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
        // are this pass's, so due and done): the project lists the freshness scheduler picks within the
        // polling budget (mirror/streams/polling.ts), from the source system's published rate where known.
        const adaptive = input.adaptive && input.mode === 'incremental';
        const profile = adaptive ? await profileFor(input.accountId) : undefined;
        const budget = profile
          ? {
              resources: resources.filter((r) => r.name in profile.resources).length,
              sourceSystem: profile.slug,
              ...(profile.requestsPerMinute !== undefined ? { requestsPerMinute: profile.requestsPerMinute } : {}),
            }
          : {};
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
     * are marked deleted (mirror/records/finish-pass.ts `retireRemovedProjects`). Returns how many.
     */
    async retireRemovedProjects(input: { accountId: string; passKey: string }): Promise<number> {
      return withHeartbeat(() => asActivity(() => retireRemovedProjects(pool, input.accountId, input.passKey)));
    },

    /** Fetches and writes up to `maxPages` pages of a stream's pass; finishes the pass at its end. */
    async syncSlice(input: SyncSliceInput): Promise<SyncSliceResult> {
      const key = { accountId: input.accountId, resource: input.resource, scope: input.scope };
      try {
        await usable(input.accountId);
        let coverage: WebhookCoverage | undefined;
        if (input.adaptive && input.mode === 'incremental') {
          coverage = await webhookCoverage(pool, input.accountId);
          const decisions = await pollingDecisions(pool, { accountId: input.accountId, passKey: input.passKey, streams: [key], policy: polling, coverage });
          const decision = pollingDecision(decisions, key.resource, key.scope);
          if (!decision.due) return { ...emptyCounts(), done: true, generation: 0, notDue: decision.reason ?? 'not due' };
        }
        const result = await slices.run(input, key);
        if (result.done && input.scope === allProjectsScope) {
          await rememberCrossProject(pool, (await accounts.get(input.accountId)).sourceSystem, input.resource, true);
        }
        if (result.done) await notePoll(key, { coverage: coverage ?? (await webhookCoverage(pool, input.accountId)) });
        return result;
      } catch (caught) {
        // The account's credentials refused: the stream is paused, not failed (nothing is wrong with it).
        const refused = await refusedCredentials(input.accountId, caught);
        if (refused) {
          await markStreamPaused(pool, key).catch(() => undefined);
          return asActivity(() => Promise.reject(refused));
        }
        let error = caught;
        const refusal = input.scope === allProjectsScope ? crossProjectRefusal(caught) : undefined;
        if (refusal !== undefined) {
          // Remembered: later passes list this resource project by project without asking again.
          const system = (await accounts.get(input.accountId)).sourceSystem;
          await rememberCrossProject(pool, system, input.resource, false, refusal).catch(() => undefined);
          error = new CrossProjectScopeError(
            `${input.resource} of ${system} cannot be listed across projects (${refusal}); it is listed project by project instead`,
            { cause: caught },
          );
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
      await usable(key.accountId);
      for (;;) {
        const r = await slices.run(spec, key);
        for (const k of countKeys) totals[k] += r[k];
        if (r.done) {
          await notePoll(key, poll);
          return undefined;
        }
      }
    } catch (error) {
      // The account's credentials refused: thrown (the sweep stops, never retried), the stream paused.
      const refused = await refusedCredentials(key.accountId, error);
      if (refused) {
        await markStreamPaused(pool, key).catch(() => undefined);
        throw refused;
      }
      const message = error instanceof Error ? error.message : String(error);
      await markStreamFailed(pool, key, message).catch(() => undefined);
      if (error instanceof MirrorError && !error.retryable) return message;
      throw error;
    }
  }

  /**
   * Counts a completed pass as a poll of its stream and writes when it is due next (mirror/streams/polling.ts).
   * The pass is done whatever happens here: a failure only leaves the stream due at the next pass.
   */
  async function notePoll(key: { accountId: string; resource: string; scope: string }, o: { coverage?: WebhookCoverage; event?: boolean }): Promise<void> {
    try {
      await recordPoll(pool, key, { policy: polling, covered: o.coverage?.covers(key.resource, key.scope) ?? false, ...(o.event ? { event: true } : {}) });
    } catch (error) {
      log.warn({ resource: key.resource, scope: key.scope, err: error }, 'could not record the poll of a stream; it is due at the next pass');
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

export type SyncActivities = ReturnType<typeof createSyncActivities>;
