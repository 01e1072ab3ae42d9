// The activities that run streams' passes: one slice of a stream (a stream workflow's step), many
// small streams swept in one activity (a project's list each, or a parent's children), and a batch
// of parents' children. Each stream's pass keeps its own checkpoint in Postgres, written with every
// page, so a retried activity resumes each stream at its last committed page.
import pLimit from 'p-limit';
import { resources, allProjectsScope, formatScope, listPath, parseScope } from '../lib/resources.ts';
import { rememberCrossProject } from '../mirror/streams/cross-project.ts';
import { CrossProjectScopeError } from '../mirror/records/page-write.ts';
import { markStreamFailed, markStreamPaused, retireStream, type StreamKey } from '../mirror/streams/streams.ts';
import { pollingDecision, pollingDecisions, webhookCoverage, type PollDecision, type WebhookCoverage } from '../mirror/streams/polling.ts';
import { asActivity } from './failures.ts';
import { StallAttemptError } from './stalls.ts';
import { emptyCounts, type SyncContext } from './sync-context.ts';
import { activityContext, type SyncSliceInput, type SyncSliceResult } from './sync-slice.ts';
import type { SweepInput, SweepItem, SweepResult, SyncChildrenInput, SyncChildrenResult } from './sync-types.ts';

/** Fetches and writes up to `maxPages` pages of a stream's pass; finishes the pass at its end. */
export async function syncSlice(ctx: SyncContext, input: SyncSliceInput): Promise<SyncSliceResult> {
  const { pool, accounts } = ctx.deps;
  const key = { accountId: input.accountId, resource: input.resource, scope: input.scope };
  try {
    await ctx.usable(input.accountId);
    let coverage: WebhookCoverage | undefined;
    if (input.adaptive && input.mode === 'incremental') {
      coverage = await webhookCoverage(pool, input.accountId);
      const decisions = await pollingDecisions(pool, { accountId: input.accountId, passKey: input.passKey, streams: [key], policy: ctx.polling, coverage });
      const decision = pollingDecision(decisions, key.resource, key.scope);
      if (!decision.due) return { ...emptyCounts(), done: true, generation: 0, notDue: decision.reason ?? 'not due' };
    }
    const result = await ctx.stalls.attempt(key, () => ctx.slices.run(input, key));
    await ctx.wrote(input.accountId, result);
    if (result.stalled !== undefined) return result;
    if (result.done && input.scope === allProjectsScope) {
      await rememberCrossProject(pool, (await accounts.get(input.accountId)).sourceSystem, input.resource, true);
    }
    if (result.done) await ctx.notePoll(key, { coverage: coverage ?? (await webhookCoverage(pool, input.accountId)) });
    return result;
  } catch (caught) {
    const error = await sliceFailure(ctx, input, key, caught);
    return asActivity(() => Promise.reject(error));
  }
}

/**
 * What a failed slice throws, once it is recorded on the stream: the account's credentials refused
 * (the stream paused, not failed: nothing is wrong with it), a list across projects the upstream
 * refuses (remembered, and the stream retired: the pass lists it project by project), or the failure.
 */
async function sliceFailure(ctx: SyncContext, input: SyncSliceInput, key: StreamKey, caught: unknown): Promise<Error> {
  const { pool, accounts } = ctx.deps;
  const refused = await ctx.refusedCredentials(input.accountId, caught);
  if (refused) {
    await markStreamPaused(pool, key).catch(() => undefined);
    return refused;
  }
  const refusal = input.scope === allProjectsScope && caught instanceof CrossProjectScopeError ? caught.message : undefined;
  if (refusal === undefined) {
    // An attempt short of a stall (activities/stalls.ts) is counted on the stream, not a failure of it.
    if (!(caught instanceof StallAttemptError))
      await markStreamFailed(pool, key, caught instanceof Error ? caught.message : String(caught)).catch(() => undefined);
    return caught instanceof Error ? caught : new Error(String(caught));
  }
  // Remembered: later passes list this resource project by project without asking again.
  const system = (await accounts.get(input.accountId)).sourceSystem;
  await rememberCrossProject(pool, system, input.resource, false, refusal).catch(() => undefined);
  // Not a failure of the account's sync: the stream across projects is gone, and the per-project
  // streams the pass starts instead are what the status page shows.
  await retireStream(pool, key).catch(() => undefined);
  return new CrossProjectScopeError(`${input.resource} of ${system} cannot be listed across projects (${refusal}); it is listed project by project instead`, {
    cause: caught,
  });
}

/**
 * Many small streams in one activity, a few at a time, instead of a workflow each: a retried sweep (a
 * killed worker, a lost heartbeat) finds the streams it finished done and asks the upstream nothing for
 * them. A stream that fails for good is reported and the others go on; transient trouble fails the
 * sweep so that Temporal retries it.
 */
export async function sweepScopes(ctx: SyncContext, input: SweepInput): Promise<SweepResult> {
  const totals: SweepResult = { ...emptyCounts(), streams: 0, notDue: 0, failed: [], stalled: [] };
  const beat = activityContext();
  const limit = pLimit(input.concurrency ?? 4);
  let done = 0;
  const timer = setInterval(() => beat?.heartbeat({ done }), 5_000);
  try {
    const coverage = await webhookCoverage(ctx.deps.pool, input.accountId);
    const decisions = await sweepDecisions(ctx, input, coverage);
    const sweepOne = async (item: SweepItem): Promise<void> => {
      const decision = pollingDecision(decisions, item.resource, item.scope);
      if (!decision.due) {
        totals.notDue++;
      } else {
        const spec: SyncSliceInput = { accountId: input.accountId, ...item, passKey: input.passKey, mode: input.mode };
        const key = { accountId: input.accountId, resource: item.resource, scope: item.scope };
        const end = await ctx.streamToEnd(spec, key, totals, { coverage, ...(decision.event ? { event: true } : {}) });
        if (end.failed !== undefined) totals.failed.push({ resource: item.resource, scope: item.scope, error: end.failed });
        if (end.stalled !== undefined) totals.stalled!.push({ resource: item.resource, scope: item.scope, reason: end.stalled });
      }
      totals.streams++;
      beat?.heartbeat({ done: ++done });
    };
    // Every stream ends (or fails) before the sweep does: a retry must not race a stream still running.
    const settled = await Promise.allSettled(input.items.map((item) => limit(() => sweepOne(item))));
    const failure = settled.find((r): r is PromiseRejectedResult => r.status === 'rejected');
    if (failure) throw failure.reason;
    await ctx.wrote(input.accountId, totals);
  } catch (error) {
    return asActivity(() => Promise.reject(error instanceof Error ? error : new Error(String(error))));
  } finally {
    clearInterval(timer);
  }
  return totals;
}

/**
 * Which streams an adaptive pass lists (a retried sweep decides again: the streams it finished are
 * this pass's, so due and done): the project lists the freshness scheduler picks within the polling
 * budget (mirror/streams/polling.ts), from the source system's published rate where known. Any other
 * pass lists every stream (no decisions: each is due).
 */
async function sweepDecisions(ctx: SyncContext, input: SweepInput, coverage: WebhookCoverage): Promise<Map<string, PollDecision>> {
  if (!(input.adaptive && input.mode === 'incremental')) return new Map();
  const profile = await ctx.profileFor(input.accountId);
  const budget = profile
    ? {
        resources: resources.filter((r) => r.name in profile.resources).length,
        sourceSystem: profile.slug,
        ...(profile.requestsPerMinute !== undefined ? { requestsPerMinute: profile.requestsPerMinute } : {}),
      }
    : {};
  return pollingDecisions(ctx.deps.pool, { accountId: input.accountId, passKey: input.passKey, streams: input.items, policy: ctx.polling, coverage, budget });
}

/**
 * Children listed through their parents (line items, file and drawing versions): one stream per
 * parent, usually a single page each, synced here a batch of parents at a time so that a thousand
 * invoices do not cost a thousand workflows.
 */
export async function syncChildren(ctx: SyncContext, input: SyncChildrenInput): Promise<SyncChildrenResult> {
  const totals: SyncChildrenResult = { ...emptyCounts(), failed: [], stalled: [] };
  const beat = activityContext();
  const limit = pLimit(input.concurrency ?? 4);
  let done = 0;
  const syncParent = async (parentId: string): Promise<void> => {
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
    // Transient trouble fails the batch so Temporal retries it (finished parents are skipped then:
    // their pass is done); a permanent one is reported and the others go on.
    const end = await ctx.streamToEnd(spec, { accountId: input.accountId, resource: input.resource, scope }, totals);
    if (end.failed !== undefined) totals.failed.push({ scope, error: end.failed });
    if (end.stalled !== undefined) totals.stalled!.push({ scope, reason: end.stalled });
    beat?.heartbeat({ done: ++done });
  };
  await Promise.all(input.parentIds.map((parentId) => limit(() => syncParent(parentId)))).catch((error: unknown) =>
    asActivity(() => Promise.reject(error instanceof Error ? error : new Error(String(error)))),
  );
  await ctx.wrote(input.accountId, totals);
  return totals;
}
