// The account pass's planning activities: which resources an account mirrors, the parents whose
// children a pass lists, and, after a full pass, the records of projects it no longer found. Each
// beats on a timer (activities/heartbeat.ts): a dead worker's plan is retried within 20 s.
import { isMirrored, knownProfile, scopeKindIn } from '../connectors/source-systems/index.ts';
import { listPage } from '../connectors/operations.ts';
import { UpstreamNotFoundError } from '../lib/errors.ts';
import { resourceDef, resources, type ScopeKind } from '../lib/resources.ts';
import { liveRecordIds } from '../mirror/streams/known-ids.ts';
import { crossProjectSupport } from '../mirror/streams/cross-project.ts';
import { retireRemovedProjects as retireProjects } from '../mirror/records/finish-pass.ts';
import { parentsToRefresh } from '../mirror/streams/streams.ts';
import { asActivity } from './failures.ts';
import { withHeartbeat } from './heartbeat.ts';
import { emptyCounts, type SyncContext } from './sync-context.ts';
import type { AccountPlan, ChildrenPlan, ChildrenPlanInput, ParentScopesInput, PlannedResource } from './sync-types.ts';

/** Most parents a children plan names inline (about 40 bytes each in the workflow's history). */
const inlineTotalMax = 20_000;

/** Dependency order: account-level resources, then project-scoped ones, then children. */
const scopeOrder: Record<ScopeKind, number> = { account: 0, project: 1, child: 2 };

/** Which resources to mirror for an account: from its source system's profile, else by probing. */
export async function planAccount(ctx: SyncContext, input: { accountId: string }): Promise<AccountPlan> {
  // Probing an unknown source system's lists can take a while: the plan beats on a timer.
  return withHeartbeat(() =>
    asActivity(async () => {
      await ctx.usable(input.accountId);
      const account = await ctx.deps.accounts.get(input.accountId);
      const profile = knownProfile(account.sourceSystem);
      const supported = profile ? resources.filter((r) => r.name in profile.resources).map((r) => r.name) : await probeResources(ctx, input.accountId);
      const learned = await crossProjectSupport(ctx.deps.pool, account.sourceSystem);
      const planned: PlannedResource[] = supported.map((name) => {
        const scope = scopeKindIn(profile, name, resourceDef(name)!.scope);
        if (scope !== 'project') return { name, scope };
        return { name, scope, crossProject: profile?.resources[name]?.crossProject ?? learned.get(name) ?? true };
      });
      planned.sort((a, b) => scopeOrder[a.scope] - scopeOrder[b.scope]);
      return { sourceSystem: account.sourceSystem, resources: planned };
    }),
  );
}

/** An unknown source system: each top-level list asked for one record; those it serves are mirrored. */
async function probeResources(ctx: SyncContext, accountId: string): Promise<string[]> {
  const token = await ctx.deps.accounts.token(accountId);
  const supported: string[] = [];
  for (const r of resources.filter((d) => d.scope === 'account' && isMirrored(d.name))) {
    try {
      await listPage(ctx.deps.upstream, { accountToken: token, accountId, path: r.path, page: 1, perPage: 1 });
      supported.push(r.name);
    } catch (error) {
      if (!(error instanceof UpstreamNotFoundError)) throw (await ctx.refusedCredentials(accountId, error)) ?? error;
    }
  }
  return supported;
}

/** Ids of the live records of a parent stream: the scopes of its children (projects, invoices, ...). */
export async function listParentIds(ctx: SyncContext, input: ParentScopesInput): Promise<string[]> {
  const { pool } = ctx.deps;
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
  return withHeartbeat(() => asActivity(() => liveRecordIds(pool, { accountId: input.accountId, resource: input.parentResource, scope: input.parentScope })));
}

/**
 * The children streams of a parent resource across parent scopes: the parents of each small scope
 * (swept by `sweepScopes`), and the big scopes (left to a children workflow of their own).
 */
export async function planChildren(ctx: SyncContext, input: ChildrenPlanInput): Promise<ChildrenPlan> {
  return withHeartbeat(() =>
    asActivity(async () => {
      const parents = await parentsToRefresh(ctx.deps.pool, { ...input, every: !input.changedOnly });
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
}

/**
 * After a full pass whose projects' stream completed: the records of projects it no longer found
 * are marked deleted (mirror/records/finish-pass.ts `retireRemovedProjects`). Returns how many.
 */
export async function retireRemovedProjects(ctx: SyncContext, input: { accountId: string; passKey: string }): Promise<number> {
  return withHeartbeat(() =>
    asActivity(async () => {
      const deleted = await retireProjects(ctx.deps.pool, input.accountId, input.passKey);
      await ctx.wrote(input.accountId, { ...emptyCounts(), deleted });
      return deleted;
    }),
  );
}
