// One pass over a linked account: discovers its streams in dependency order (account-level
// resources and projects, then project-scoped resources, then children such as AP invoice line
// items and file versions) and runs one stream workflow per stream with bounded concurrency.
// A project-scoped resource whose source system lists it across projects (`Project-Id: *`) is one
// stream for the whole account; one that refuses falls back to a stream per project (and the refusal
// is remembered). An incremental pass lists children only under parents that changed.
import { ParentClosePolicy, executeChild, patched, proxyActivities, setHandler, uuid4 } from '@temporalio/workflow';
import { ApplicationFailure, WorkflowExecutionAlreadyStartedError } from '@temporalio/common';
import type { EventActivities } from '../activities/events.ts';
import type { SweepItem, SyncActivities } from '../activities/sync.ts';
import { allProjectsScope, childrenOf, formatScope, listPath, parseScope, resourceDef, type ScopePart } from '../lib/resources.ts';
import { runBounded } from './bounded.ts';
import { accountProgressQuery, childrenWorkflowId, rootMessage, streamWorkflowId, type AccountProgress } from './shared.ts';
import { childStreamsWorkflow } from './child-streams.ts';
import { streamSyncWorkflow } from './stream-sync.ts';
import { activityProfiles } from './activity-profiles.ts';

const { planAccount, listParentIds, retireRemovedProjects, planChildren } = proxyActivities<SyncActivities>(activityProfiles.plan);
const { sweepScopes } = proxyActivities<SyncActivities>(activityProfiles.sweep);

/** Small streams per sweep activity. */
const sweepSize = 100;
/** A parent scope with more parents than this gets a children workflow of its own (which continues as new). */
const inlineParentsMax = 1000;

const { registerWebhooks } = proxyActivities<EventActivities>(activityProfiles.webhooks);

export interface AccountSyncInput {
  accountId: string;
  mode?: 'full' | 'incremental';
  /** Streams running at once. */
  concurrency?: number;
  /** Restrict the pass to one resource (and optionally one scope): a targeted resync. */
  resource?: string;
  scope?: string;
  /** After the pass, register upstream webhooks for the account (the first pass after linking). */
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

export interface AccountSyncResult {
  accountId: string;
  streams: number;
  failed: StreamOutcome[];
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

interface Spec {
  resource: string;
  scope: string;
  path: string;
  projectId?: string;
}

export async function accountSyncWorkflow(input: AccountSyncInput): Promise<AccountSyncResult> {
  const passKey = input.passKey ?? uuid4();
  const mode = input.mode ?? 'full';
  const concurrency = input.concurrency ?? 4;
  const progress: AccountProgress = { phase: 'planning', streamsTotal: 0, streamsDone: 0, streamsFailed: 0, records: 0 };
  setHandler(accountProgressQuery, () => progress);
  const result: AccountSyncResult = { accountId: input.accountId, streams: 0, failed: [], records: 0, byResource: {} };

  // The account's credentials refused (or the account unlinked) stops the whole pass, once: its
  // remaining streams are not started, and none is reported failed. Passes begun before this replay as they ran.
  const halts = (error: unknown): boolean => {
    if (!isCredentialsRefusal(error) || !patched('account-states')) return false;
    result.halted ??= rootMessage(error);
    progress.phase = 'halted';
    return true;
  };
  let plan: Awaited<ReturnType<typeof planAccount>>;
  try {
    plan = await planAccount({ accountId: input.accountId });
  } catch (error) {
    if (halts(error)) return result;
    throw error;
  }
  // An account's own incremental pass polls adaptively: the activities skip streams that are not due
  // (mirror/streams/polling.ts). A targeted pass lists what it names. Passes begun before this replay as they ran.
  const adaptive = mode === 'incremental' && input.resource === undefined && input.scope === undefined && patched('adaptive-polling');
  const adaptiveFlag = adaptive ? { adaptive: true } : {};
  const kindOf = new Map(plan.resources.map((r) => [r.name, r.scope]));
  const wanted = (r: string) =>
    kindOf.has(r) && (input.resource === undefined || input.resource === r || r === 'projects' || resourceDef(input.resource)?.parent === r);
  const wantedScope = (scope: string) =>
    input.scope === undefined || scope === input.scope || input.scope.startsWith(`${scope}/`) || scope.startsWith(`${input.scope}/`);

  /** `onRefused`: a stream across projects that the upstream will not list so (it is run per project instead). */
  const run = async (spec: Spec, onRefused?: () => void): Promise<void> => {
    if (result.halted !== undefined) return;
    progress.streamsTotal++;
    result.streams++;
    try {
      const totals = await executeChild(streamSyncWorkflow, {
        workflowId: streamWorkflowId(input.accountId, spec.resource, spec.scope),
        args: [{ accountId: input.accountId, ...spec, passKey, mode, ...adaptiveFlag }],
        parentClosePolicy: ParentClosePolicy.REQUEST_CANCEL,
      });
      progress.records += totals.records;
      result.records += totals.records;
      result.byResource[spec.resource] = (result.byResource[spec.resource] ?? 0) + totals.records;
      progress.streamsDone++;
    } catch (error) {
      if (error instanceof WorkflowExecutionAlreadyStartedError) {
        // Another run of this stream is in progress (a resync): it will bring it up to date.
        progress.streamsDone++;
        return;
      }
      if (onRefused && isCrossProjectRefusal(error)) {
        onRefused();
        progress.streamsDone++;
        return;
      }
      if (halts(error)) return;
      progress.streamsFailed++;
      result.failed.push({ resource: spec.resource, scope: spec.scope, records: 0, error: rootMessage(error) });
    }
  };

  // 1. Account-level resources; projects first, since everything project-scoped hangs off them.
  progress.phase = 'account';
  const top = plan.resources.filter((r) => r.scope === 'account' && wanted(r.name)).map((r) => r.name);
  if (top.includes('projects')) await run({ resource: 'projects', scope: '', path: listPath('projects') });
  const accountSpecs = top.filter((r) => r !== 'projects').map((r) => ({ resource: r, scope: '', path: listPath(r) }));
  await runBounded(
    accountSpecs.filter((s) => wantedScope(s.scope)),
    concurrency,
    run,
  );

  // 2. Project-scoped resources: one stream across projects where the source system lists the
  // resource so (a targeted resync of one project aside), else one stream per project.
  progress.phase = 'projects';
  const projectLevel = plan.resources.filter((r) => r.scope === 'project' && wanted(r.name)).map((r) => r.name);
  const projectScopes: { scope: string; parts: ScopePart[]; projectId: string }[] = [];
  if (projectLevel.length > 0 && kindOf.has('projects')) {
    const projectIds = await listParentIds({ accountId: input.accountId, parentResource: 'projects', parentScope: '' });
    for (const id of projectIds) projectScopes.push({ scope: formatScope([['project', id]]), parts: [['project', id]], projectId: id });
  }
  const perProject = (names: readonly string[]): Spec[] =>
    projectScopes
      .flatMap((p) => names.map((r) => ({ resource: r, scope: p.scope, path: listPath(r), projectId: p.projectId })))
      .filter((s) => wantedScope(s.scope));
  // Passes begun before lists across projects existed replay as they ran (one stream per project).
  const crossLists = projectLevel.length > 0 && input.scope === undefined && patched('cross-project-lists');
  const across = crossLists ? plan.resources.filter((r) => projectLevel.includes(r.name) && r.crossProject !== false).map((r) => r.name) : [];
  const refused: string[] = [];
  const acrossSpecs: Spec[] = across.map((r) => ({ resource: r, scope: allProjectsScope, path: listPath(r), projectId: '*' }));
  // Many small streams (per project, per parent) are swept inside activities rather than each run
  // by a workflow of its own: workflows per pass stay about the number of resources.
  const sweeping = patched('sweep-scopes');
  const sweep = async (items: SweepItem[]): Promise<void> => {
    if (result.halted !== undefined) return;
    progress.streamsTotal += items.length;
    result.streams += items.length;
    try {
      const r = await sweepScopes({ accountId: input.accountId, passKey, mode, items, ...adaptiveFlag });
      if (r.notDue) result.notDue = (result.notDue ?? 0) + r.notDue;
      progress.records += r.records;
      result.records += r.records;
      // A sweep holds one resource's streams.
      result.byResource[items[0]!.resource] = (result.byResource[items[0]!.resource] ?? 0) + r.records;
      progress.streamsDone += items.length - r.failed.length;
      progress.streamsFailed += r.failed.length;
      for (const f of r.failed) result.failed.push({ resource: f.resource, scope: f.scope, records: 0, error: f.error });
    } catch (error) {
      if (halts(error)) return;
      progress.streamsFailed += items.length;
      const message = rootMessage(error);
      for (const item of items) result.failed.push({ resource: item.resource, scope: item.scope, records: 0, error: message });
    }
  };
  const sweepsOf = (items: SweepItem[]): SweepItem[][] => {
    const byResource = new Map<string, SweepItem[]>();
    for (const item of items) byResource.set(item.resource, [...(byResource.get(item.resource) ?? []), item]);
    const batches: SweepItem[][] = [];
    for (const list of byResource.values()) for (let i = 0; i < list.length; i += sweepSize) batches.push(list.slice(i, i + sweepSize));
    return batches;
  };
  const perProjectRest = perProject(projectLevel.filter((r) => !across.includes(r)));
  if (sweeping) {
    // Streams across projects and sweeps of the per-project ones, side by side.
    await runBounded([...acrossSpecs.map((spec) => ({ spec })), ...sweepsOf(perProjectRest).map((batch) => ({ batch }))], concurrency, (job) =>
      'spec' in job ? run(job.spec, () => refused.push(job.spec.resource)) : sweep(job.batch),
    );
    if (refused.length > 0) await runBounded(sweepsOf(perProject(refused)), concurrency, sweep);
  } else {
    await runBounded([...acrossSpecs, ...perProjectRest], concurrency, (spec) =>
      spec.scope === allProjectsScope ? run(spec, () => refused.push(spec.resource)) : run(spec),
    );
    // Refused across projects (now remembered): this pass lists them per project.
    if (refused.length > 0) await runBounded(perProject(refused), concurrency, run);
  }

  // 3. Children, listed through each live parent object: one workflow per parent scope and child
  // resource, which syncs every parent's children in batches. An incremental pass lists them only
  // under parents that changed since their children's last complete pass (and none where none did).
  progress.phase = 'children';
  const groups: { resource: string; parentResource: string; parentScope: string; projectId?: string; changedFor?: string }[] = [];
  const changedOnly = sweeping && mode === 'incremental';
  const childItems: SweepItem[] = [];
  for (const parent of plan.resources) {
    const children = childrenOf(parent.name).filter((c) => wanted(c.name));
    if (children.length === 0) continue;
    const parentScopes = (parent.scope === 'project' ? projectScopes : [{ scope: '', parts: [] as ScopePart[], projectId: undefined }]).filter((ps) =>
      wantedScope(ps.scope),
    );
    if (sweeping) {
      // Small parent scopes' children are swept; a big one gets its own children workflow.
      for (const child of children) {
        const cp = await planChildren({
          accountId: input.accountId,
          parentResource: parent.name,
          parentScopes: parentScopes.map((ps) => ps.scope),
          childResource: child.name,
          changedOnly,
          inlineMax: inlineParentsMax,
        });
        for (const ps of parentScopes) {
          const projectId = ps.projectId ? { projectId: ps.projectId } : {};
          for (const id of cp.inline[ps.scope] ?? []) {
            childItems.push({
              resource: child.name,
              scope: formatScope([...parseScope(ps.scope), [parent.name, id]]),
              path: listPath(child.name, id),
              ...projectId,
            });
          }
          if (cp.big.includes(ps.scope))
            groups.push({
              resource: child.name,
              parentResource: parent.name,
              parentScope: ps.scope,
              ...projectId,
              ...(changedOnly ? { changedFor: child.name } : {}),
            });
        }
      }
      continue;
    }
    // Passes begun before sweeps: a children workflow per parent scope, as they ran.
    for (const ps of parentScopes) {
      for (const child of children)
        groups.push({ resource: child.name, parentResource: parent.name, parentScope: ps.scope, ...(ps.projectId ? { projectId: ps.projectId } : {}) });
    }
  }
  await runBounded([...sweepsOf(childItems).map((batch) => ({ batch })), ...groups.map((group) => ({ group }))], concurrency, async (job) => {
    if ('batch' in job) return sweep(job.batch);
    if (result.halted !== undefined) return;
    const g = job.group;
    progress.streamsTotal++;
    try {
      const totals = await executeChild(childStreamsWorkflow, {
        workflowId: childrenWorkflowId(input.accountId, g.resource, g.parentScope),
        args: [{ accountId: input.accountId, ...g, passKey, mode }],
        parentClosePolicy: ParentClosePolicy.REQUEST_CANCEL,
      });
      result.streams += totals.streams;
      progress.records += totals.records;
      result.records += totals.records;
      result.byResource[g.resource] = (result.byResource[g.resource] ?? 0) + totals.records;
      for (const f of totals.failed) result.failed.push({ resource: g.resource, scope: f.scope, records: 0, error: f.error });
      progress.streamsDone++;
    } catch (error) {
      if (error instanceof WorkflowExecutionAlreadyStartedError) {
        progress.streamsDone++;
        return;
      }
      if (halts(error)) return;
      progress.streamsFailed++;
      result.failed.push({ resource: g.resource, scope: g.parentScope, records: 0, error: rootMessage(error) });
    }
  });
  // A full pass whose projects' list completed: records of projects it no longer found are deleted
  // (their streams are not run any more, so nothing else would). Never after a failed projects pass.
  if (
    result.halted === undefined &&
    mode === 'full' &&
    input.resource === undefined &&
    input.scope === undefined &&
    kindOf.has('projects') &&
    !result.failed.some((f) => f.resource === 'projects') &&
    patched('retire-removed-projects')
  ) {
    try {
      result.deletedWithProjects = await retireRemovedProjects({ accountId: input.accountId, passKey });
    } catch (error) {
      result.failed.push({ resource: 'projects', scope: '', records: 0, error: rootMessage(error) });
    }
  }
  if (input.registerWebhooks && result.halted === undefined) {
    progress.phase = 'webhooks';
    try {
      await registerWebhooks({ accountId: input.accountId });
    } catch (error) {
      // Periodic passes still keep the mirror fresh; the failure is visible in the Temporal UI.
      result.failed.push({ resource: 'webhooks', scope: '', records: 0, error: rootMessage(error) });
    }
  }
  if (result.halted === undefined) progress.phase = 'done';
  return result;
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
