// One pass over a linked account: discovers its streams in dependency order (account-level
// resources and projects, then project-scoped resources, then children such as AP invoice line
// items and file versions) and runs one stream workflow per stream with bounded concurrency.
// A project-scoped resource whose source system lists it across projects (`Project-Id: *`) is one
// stream for the whole account; one that refuses falls back to a stream per project (and the refusal
// is remembered). An incremental pass lists children only under parents that changed.
import { ParentClosePolicy, executeChild, patched, proxyActivities, setHandler, uuid4 } from '@temporalio/workflow';
import { ApplicationFailure, WorkflowExecutionAlreadyStartedError } from '@temporalio/common';
import type { EventActivities } from '../activities/events.ts';
import type { AccountPlan, SweepItem, SyncActivities } from '../activities/sync.ts';
import { allProjectsScope } from '../lib/resources.ts';
import {
  PassPlan,
  childrenGroupsBeforeSweeps,
  childrenWork,
  inlineParentsMax,
  retiresRemovedProjects,
  sweepBatches,
  type ChildrenGroup,
  type StreamSpec,
} from './account-pass-plan.ts';
import { runBounded } from './bounded.ts';
import { accountProgressQuery, childrenWorkflowId, rootMessage, streamWorkflowId, type AccountProgress } from './shared.ts';
import { childStreamsWorkflow } from './child-streams.ts';
import { streamSyncWorkflow } from './stream-sync.ts';
import { activityProfiles } from './activity-profiles.ts';

const { planAccount, listParentIds, retireRemovedProjects, planChildren } = proxyActivities<SyncActivities>(activityProfiles.plan);
const { sweepScopes } = proxyActivities<SyncActivities>(activityProfiles.sweep);

const { registerWebhooks } = proxyActivities<EventActivities>(activityProfiles.webhooks);

export interface AccountSyncInput {
  accountId: string;
  mode?: 'full' | 'incremental';
  /** Streams running at once. */
  concurrency?: number;
  /** Restrict the pass to one resource (and optionally one scope): a targeted resync. */
  resource?: string;
  scope?: string;
  /** After the pass, register upstream webhooks for the account (the first pass after linking; every full pass of the whole account checks them). */
  registerWebhooks?: boolean;
  /** Set by a resumed run; new runs draw a fresh key. */
  passKey?: string;
}

interface StreamOutcome {
  resource: string;
  scope: string;
  records: number;
  error?: string;
}

/** A stream the pass left stalled (its checkpoint does not move): not failed, tried again after its backoff. */
interface StalledStream {
  resource: string;
  scope: string;
  reason: string;
}

export interface AccountSyncResult {
  accountId: string;
  streams: number;
  failed: StreamOutcome[];
  /** Streams stalled at the pass's end, and why (docs/operating.md, stalled passes). */
  stalled: StalledStream[];
  records: number;
  byResource: Record<string, number>;
  /** Records of projects the full pass no longer found, marked deleted. */
  deletedWithProjects?: number;
  /** Streams an incremental pass left alone as not due (adaptive polling: mirror/streams/polling.ts). */
  notDue?: number;
  /**
   * Why the pass stopped early: the upstream refuses the account's credentials, or the account is
   * unlinked. Its streams are paused, not failed; a probe resumes the account once its token is taken again.
   */
  halted?: string;
}

export async function accountSyncWorkflow(input: AccountSyncInput): Promise<AccountSyncResult> {
  const run = new PassRun(input);
  setHandler(accountProgressQuery, () => run.progress);
  let plan: AccountPlan;
  try {
    plan = await planAccount({ accountId: input.accountId });
  } catch (error) {
    if (run.halts(error)) return run.result;
    throw error;
  }
  // An account's own incremental pass polls adaptively: the activities skip streams that are not due
  // (mirror/streams/polling.ts). A targeted pass lists what it names. Passes begun before this replay as they ran.
  if (run.mode === 'incremental' && input.resource === undefined && input.scope === undefined && patched('adaptive-polling')) run.adaptive = true;
  const p = new PassPlan(plan, input);
  await accountPhase(run, p);
  const { projectIds, sweeping } = await projectPhase(run, p);
  await childrenPhase(run, p, projectIds, sweeping);
  await closingPhase(run, p);
  if (run.result.halted === undefined) run.progress.phase = 'done';
  return run.result;
}

/** 1. Account-level resources; projects first, since everything project-scoped hangs off them. */
async function accountPhase(run: PassRun, p: PassPlan): Promise<void> {
  run.progress.phase = 'account';
  const { projects, others } = p.accountStreams();
  if (projects) await run.stream(projects);
  await runBounded(others, run.concurrency, (spec) => run.stream(spec));
}

/**
 * 2. Project-scoped resources: one stream across projects where the source system lists the
 * resource so (a targeted resync of one project aside), else one stream per project. A list across
 * projects the upstream refuses is listed per project in the same pass (and the refusal is remembered).
 */
async function projectPhase(run: PassRun, p: PassPlan): Promise<{ projectIds: string[]; sweeping: boolean }> {
  run.progress.phase = 'projects';
  const projectIds = p.needsProjectIds() ? await listParentIds({ accountId: run.input.accountId, parentResource: 'projects', parentScope: '' }) : [];
  // Passes begun before lists across projects existed replay as they ran (one stream per project).
  const crossLists = p.mayListAcross() && patched('cross-project-lists');
  const { across, perProject } = p.projectStreams(projectIds, crossLists);
  const refused: string[] = [];
  const refusedAcross = (spec: StreamSpec) => () => refused.push(spec.resource);
  // Many small streams (per project, per parent) are swept inside activities rather than each run
  // by a workflow of its own: workflows per pass stay about the number of resources.
  const sweeping = patched('sweep-scopes');
  if (sweeping) {
    // Streams across projects and sweeps of the per-project ones, side by side.
    const jobs = [...across.map((spec) => ({ spec })), ...sweepBatches(perProject).map((batch) => ({ batch }))];
    await runBounded(jobs, run.concurrency, (job) => ('spec' in job ? run.stream(job.spec, refusedAcross(job.spec)) : run.sweep(job.batch)));
    if (refused.length > 0) await runBounded(sweepBatches(p.perProject(refused, projectIds)), run.concurrency, (batch) => run.sweep(batch));
  } else {
    await runBounded([...across, ...perProject], run.concurrency, (spec) =>
      spec.scope === allProjectsScope ? run.stream(spec, refusedAcross(spec)) : run.stream(spec),
    );
    if (refused.length > 0) await runBounded(p.perProject(refused, projectIds), run.concurrency, (spec) => run.stream(spec));
  }
  return { projectIds, sweeping };
}

/**
 * 3. Children, listed through each live parent object. Small parent scopes' children are swept; a big
 * one gets a children workflow, which syncs every parent's children in batches. An incremental pass
 * lists them only under parents that changed since their children's last complete pass (and none
 * where none did). Passes begun before sweeps run a children workflow per parent scope.
 */
async function childrenPhase(run: PassRun, p: PassPlan, projectIds: string[], sweeping: boolean): Promise<void> {
  run.progress.phase = 'children';
  const changedOnly = sweeping && run.mode === 'incremental';
  const items: SweepItem[] = [];
  const groups: ChildrenGroup[] = [];
  for (const entry of p.childParents(projectIds)) {
    if (!sweeping) {
      groups.push(...childrenGroupsBeforeSweeps(entry));
      continue;
    }
    for (const child of entry.children) {
      const plan = await planChildren({
        accountId: run.input.accountId,
        parentResource: entry.parent,
        parentScopes: entry.parentScopes.map((ps) => ps.scope),
        childResource: child,
        changedOnly,
        inlineMax: inlineParentsMax,
      });
      const work = childrenWork(entry, child, plan, changedOnly);
      items.push(...work.items);
      groups.push(...work.groups);
    }
  }
  const jobs = [...sweepBatches(items).map((batch) => ({ batch })), ...groups.map((group) => ({ group }))];
  await runBounded(jobs, run.concurrency, (job) => ('batch' in job ? run.sweep(job.batch) : run.children(job.group)));
}

/** 4. Retiring the projects a full pass no longer found, and registering webhooks (when asked; checked at every full pass). */
async function closingPhase(run: PassRun, p: PassPlan): Promise<void> {
  const { input, result } = run;
  const failedResources = result.failed.map((f) => f.resource);
  if (result.halted === undefined && retiresRemovedProjects(p, run.mode, failedResources) && patched('retire-removed-projects')) {
    try {
      result.deletedWithProjects = await retireRemovedProjects({ accountId: input.accountId, passKey: run.passKey });
    } catch (error) {
      result.failed.push({ resource: 'projects', scope: '', records: 0, error: rootMessage(error) });
    }
  }
  // The first pass after linking registers the account's webhooks. Every full pass of a whole account
  // with registrations checks that the upstream still has them and registers what is missing (what the
  // upstream lost, and new projects' own). Passes begun before this replay as they ran.
  const keepWebhooks =
    !input.registerWebhooks && run.mode === 'full' && input.resource === undefined && input.scope === undefined && patched('webhooks-every-full-pass');
  if ((input.registerWebhooks || keepWebhooks) && result.halted === undefined) {
    run.progress.phase = 'webhooks';
    try {
      await registerWebhooks(input.registerWebhooks ? { accountId: input.accountId } : { accountId: input.accountId, onlyIfRegistered: true });
    } catch (error) {
      // Periodic passes still keep the mirror fresh; the failure is visible in the Temporal UI.
      result.failed.push({ resource: 'webhooks', scope: '', records: 0, error: rootMessage(error) });
    }
  }
}

/** One pass's running state: its result and progress, and the three kinds of work it starts. */
class PassRun {
  readonly passKey: string;
  readonly mode: 'full' | 'incremental';
  readonly concurrency: number;
  readonly progress: AccountProgress = { phase: 'planning', streamsTotal: 0, streamsDone: 0, streamsFailed: 0, records: 0 };
  readonly result: AccountSyncResult;
  /** Streams not due are skipped (an account's own incremental pass). */
  adaptive = false;

  constructor(readonly input: AccountSyncInput) {
    this.passKey = input.passKey ?? uuid4();
    this.mode = input.mode ?? 'full';
    this.concurrency = input.concurrency ?? 4;
    this.result = { accountId: input.accountId, streams: 0, failed: [], stalled: [], records: 0, byResource: {} };
  }

  /**
   * The account's credentials refused (or the account unlinked) stops the whole pass, once: its
   * remaining streams are not started, and none is reported failed. Passes begun before this replay as they ran.
   */
  halts(error: unknown): boolean {
    if (!isCredentialsRefusal(error) || !patched('account-states')) return false;
    this.result.halted ??= rootMessage(error);
    this.progress.phase = 'halted';
    return true;
  }

  /** One stream in a stream workflow. `onRefused`: a stream across projects the upstream will not list so (it is run per project instead). */
  async stream(spec: StreamSpec, onRefused?: () => void): Promise<void> {
    if (this.result.halted !== undefined) return;
    this.progress.streamsTotal++;
    this.result.streams++;
    await this.settle(
      async () => {
        const totals = await executeChild(streamSyncWorkflow, {
          workflowId: streamWorkflowId(this.input.accountId, spec.resource, spec.scope),
          args: [{ accountId: this.input.accountId, ...spec, passKey: this.passKey, mode: this.mode, ...(this.adaptive ? { adaptive: true } : {}) }],
          parentClosePolicy: ParentClosePolicy.REQUEST_CANCEL,
        });
        this.count(spec.resource, totals.records);
        if (totals.stalled !== undefined) this.result.stalled.push({ resource: spec.resource, scope: spec.scope, reason: totals.stalled });
        this.progress.streamsDone++;
      },
      (error) => this.failed(1, [{ resource: spec.resource, scope: spec.scope }], error),
      onRefused,
    );
  }

  /** Small streams of one resource, swept by one activity. */
  async sweep(items: SweepItem[]): Promise<void> {
    if (this.result.halted !== undefined) return;
    this.progress.streamsTotal += items.length;
    this.result.streams += items.length;
    await this.settle(
      async () => {
        const r = await sweepScopes({
          accountId: this.input.accountId,
          passKey: this.passKey,
          mode: this.mode,
          items,
          ...(this.adaptive ? { adaptive: true } : {}),
        });
        if (r.notDue) this.result.notDue = (this.result.notDue ?? 0) + r.notDue;
        this.count(items[0]!.resource, r.records);
        this.progress.streamsDone += items.length - r.failed.length;
        this.progress.streamsFailed += r.failed.length;
        for (const f of r.failed) this.result.failed.push({ resource: f.resource, scope: f.scope, records: 0, error: f.error });
        this.result.stalled.push(...(r.stalled ?? []));
      },
      (error) => this.failed(items.length, items, error),
    );
  }

  /** The children of one big parent scope, in a children workflow. */
  async children(g: ChildrenGroup): Promise<void> {
    if (this.result.halted !== undefined) return;
    this.progress.streamsTotal++;
    await this.settle(
      async () => {
        const totals = await executeChild(childStreamsWorkflow, {
          workflowId: childrenWorkflowId(this.input.accountId, g.resource, g.parentScope),
          args: [{ accountId: this.input.accountId, ...g, passKey: this.passKey, mode: this.mode }],
          parentClosePolicy: ParentClosePolicy.REQUEST_CANCEL,
        });
        this.result.streams += totals.streams;
        this.count(g.resource, totals.records);
        for (const f of totals.failed) this.result.failed.push({ resource: g.resource, scope: f.scope, records: 0, error: f.error });
        for (const s of totals.stalled ?? []) this.result.stalled.push({ resource: g.resource, scope: s.scope, reason: s.reason });
        this.progress.streamsDone++;
      },
      (error) => this.failed(1, [{ resource: g.resource, scope: g.parentScope }], error),
    );
  }

  /**
   * Runs one piece of the pass; what it throws is sorted: another run of the same workflow already in
   * progress (a resync, which brings it up to date), a list across projects refused, the account
   * halted, or a failure of what it ran, reported without failing the pass.
   */
  private async settle(work: () => Promise<void>, fail: (error: unknown) => void, onRefused?: () => void): Promise<void> {
    try {
      await work();
    } catch (error) {
      if (error instanceof WorkflowExecutionAlreadyStartedError) {
        this.progress.streamsDone++;
        return;
      }
      if (onRefused && isCrossProjectRefusal(error)) {
        onRefused();
        this.progress.streamsDone++;
        return;
      }
      if (this.halts(error)) return;
      fail(error);
    }
  }

  private count(resource: string, records: number): void {
    this.progress.records += records;
    this.result.records += records;
    this.result.byResource[resource] = (this.result.byResource[resource] ?? 0) + records;
  }

  private failed(streams: number, what: readonly { resource: string; scope: string }[], error: unknown): void {
    this.progress.streamsFailed += streams;
    const message = rootMessage(error);
    for (const w of what) this.result.failed.push({ resource: w.resource, scope: w.scope, records: 0, error: message });
  }
}

/** A stream, a sweep or the plan stopped because the account's credentials are refused (lib/errors.ts CredentialsRefusedError). */
function isCredentialsRefusal(error: unknown): boolean {
  for (let e: unknown = error; e instanceof Error; e = e.cause) {
    if (e instanceof ApplicationFailure && e.type === 'credentials_refused') return true;
  }
  return false;
}

/** A stream across projects failed because the upstream will not list its resource so (activities/sync.ts). */
function isCrossProjectRefusal(error: unknown): boolean {
  for (let e: unknown = error; e instanceof Error; e = e.cause) {
    if (e instanceof ApplicationFailure && e.type === 'cross_project_refused') return true;
  }
  return false;
}
