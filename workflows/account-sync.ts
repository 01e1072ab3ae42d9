// One pass over a linked account: discovers its streams in dependency order (account-level
// resources and projects, then project-scoped resources, then children such as AP invoice line
// items and file versions) and runs one stream workflow per stream with bounded concurrency.
import {
  ParentClosePolicy,
  executeChild,
  proxyActivities,
  setHandler,
  uuid4,
} from '@temporalio/workflow';
import { WorkflowExecutionAlreadyStartedError } from '@temporalio/common';
import type { EventActivities } from '../activities/events.ts';
import type { SyncActivities } from '../activities/sync.ts';
import { childrenOf, formatScope, listPath, resourceDef, type ScopePart } from '../lib/resources.ts';
import { runBounded } from './bounded.ts';
import { accountProgressQuery, rootMessage, streamWorkflowId, type AccountProgress } from './shared.ts';
import { childStreamsWorkflow } from './child-streams.ts';
import { streamSyncWorkflow } from './stream-sync.ts';

const { planAccount, listParentIds } = proxyActivities<SyncActivities>({
  startToCloseTimeout: '2 minutes',
  retry: { initialInterval: '1 second', maximumInterval: '30 seconds', maximumAttempts: 10 },
});

const { registerWebhooks } = proxyActivities<EventActivities>({
  startToCloseTimeout: '5 minutes',
  retry: { initialInterval: '2 seconds', maximumInterval: '1 minute', maximumAttempts: 5 },
});

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

export interface StreamOutcome {
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

  const plan = await planAccount({ accountId: input.accountId });
  const kindOf = new Map(plan.resources.map((r) => [r.name, r.scope]));
  const wanted = (r: string) =>
    kindOf.has(r) && (input.resource === undefined || input.resource === r || r === 'projects' || resourceDef(input.resource)?.parent === r);
  const wantedScope = (scope: string) => input.scope === undefined || scope === input.scope || input.scope.startsWith(`${scope}/`) || scope.startsWith(`${input.scope}/`);

  const run = async (spec: Spec): Promise<void> => {
    progress.streamsTotal++;
    result.streams++;
    try {
      const totals = await executeChild(streamSyncWorkflow, {
        workflowId: streamWorkflowId(input.accountId, spec.resource, spec.scope),
        args: [{ accountId: input.accountId, ...spec, passKey, mode }],
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
      progress.streamsFailed++;
      result.failed.push({ resource: spec.resource, scope: spec.scope, records: 0, error: rootMessage(error) });
    }
  };

  // 1. Account-level resources; projects first, since everything project-scoped hangs off them.
  progress.phase = 'account';
  const top = plan.resources.filter((r) => r.scope === 'account' && wanted(r.name)).map((r) => r.name);
  if (top.includes('projects')) await run({ resource: 'projects', scope: '', path: listPath('projects') });
  const accountSpecs = top.filter((r) => r !== 'projects').map((r) => ({ resource: r, scope: '', path: listPath(r) }));
  await runBounded(accountSpecs.filter((s) => wantedScope(s.scope)), concurrency, run);

  // 2. Project-scoped resources, one stream per project.
  progress.phase = 'projects';
  const projectLevel = plan.resources.filter((r) => r.scope === 'project' && wanted(r.name)).map((r) => r.name);
  const projectScopes: { scope: string; parts: ScopePart[]; projectId: string }[] = [];
  if (projectLevel.length > 0 && kindOf.has('projects')) {
    const projectIds = await listParentIds({ accountId: input.accountId, parentResource: 'projects', parentScope: '' });
    for (const id of projectIds) projectScopes.push({ scope: formatScope([['project', id]]), parts: [['project', id]], projectId: id });
  }
  const projectSpecs: Spec[] = projectScopes.flatMap((p) => projectLevel.map((r) => ({ resource: r, scope: p.scope, path: listPath(r), projectId: p.projectId })));
  await runBounded(projectSpecs.filter((s) => wantedScope(s.scope)), concurrency, run);

  // 3. Children, listed through each live parent object: one workflow per parent scope and child
  // resource, which syncs every parent's children in batches.
  progress.phase = 'children';
  const groups: { resource: string; parentResource: string; parentScope: string; projectId?: string }[] = [];
  for (const parent of plan.resources) {
    const children = childrenOf(parent.name).filter((c) => wanted(c.name));
    if (children.length === 0) continue;
    const parentScopes = parent.scope === 'project' ? projectScopes : [{ scope: '', parts: [] as ScopePart[], projectId: undefined }];
    for (const ps of parentScopes) {
      if (!wantedScope(ps.scope)) continue;
      for (const child of children) groups.push({ resource: child.name, parentResource: parent.name, parentScope: ps.scope, ...(ps.projectId ? { projectId: ps.projectId } : {}) });
    }
  }
  await runBounded(groups, concurrency, async (g) => {
    progress.streamsTotal++;
    try {
      const totals = await executeChild(childStreamsWorkflow, {
        workflowId: `children:${input.accountId}:${g.resource}:${g.parentScope || '-'}`,
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
      progress.streamsFailed++;
      result.failed.push({ resource: g.resource, scope: g.parentScope, records: 0, error: rootMessage(error) });
    }
  });
  if (input.registerWebhooks) {
    progress.phase = 'webhooks';
    try {
      await registerWebhooks({ accountId: input.accountId });
    } catch (error) {
      // Periodic passes still keep the mirror fresh; the failure is visible in the Temporal UI.
      result.failed.push({ resource: 'webhooks', scope: '', records: 0, error: rootMessage(error) });
    }
  }
  progress.phase = 'done';
  return result;
}
