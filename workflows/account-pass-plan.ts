// What one pass over an account runs, decided without running anything: from the account's plan,
// the pass's target (a resource, a scope) and what earlier phases found (project ids, the parents
// whose children to list), which streams, sweeps and children workflows each phase starts, in the
// order it starts them. Pure, so a unit test can check every decision; workflows/account-sync.ts
// runs the phases and owns every command and every patched() call.
import type { AccountPlan, ChildrenPlan, SweepItem } from '../activities/sync.ts';
import { allProjectsScope, childrenOf, formatScope, listPath, parseScope, resourceDef } from '../lib/resources.ts';

/** One stream run by a stream workflow of its own. */
export interface StreamSpec {
  resource: string;
  scope: string;
  path: string;
  projectId?: string;
}

/** The children of one big parent scope, run by a children workflow. */
export interface ChildrenGroup {
  resource: string;
  parentResource: string;
  parentScope: string;
  projectId?: string;
  changedFor?: string;
}

/** A parent scope whose parents' children a pass lists. */
interface ParentScope {
  scope: string;
  projectId?: string;
}

/** One parent resource with children the pass wants, and the scopes its parents are in. */
interface ParentEntry {
  parent: string;
  children: string[];
  parentScopes: ParentScope[];
}

export interface PassTarget {
  /** Restrict the pass to one resource (with what it hangs off). */
  resource?: string;
  /** Restrict the pass to one scope (with the scopes above and below it). */
  scope?: string;
}

/** Small streams per sweep activity. */
const sweepSize = 100;
/** A parent scope with more parents than this gets a children workflow of its own (which continues as new). */
export const inlineParentsMax = 1000;

export class PassPlan {
  readonly #kinds: Map<string, string>;

  constructor(
    readonly plan: AccountPlan,
    readonly target: PassTarget,
  ) {
    this.#kinds = new Map(plan.resources.map((r) => [r.name, r.scope]));
  }

  /** The account's source system serves this resource. */
  has(resource: string): boolean {
    return this.#kinds.has(resource);
  }

  /** A resource this pass lists: every one, or the target, its parent, and projects. */
  wants(resource: string): boolean {
    const t = this.target.resource;
    return this.has(resource) && (t === undefined || t === resource || resource === 'projects' || resourceDef(t)?.parent === resource);
  }

  /** A scope this pass lists: every one, or the target scope, the scopes above it and below it. */
  wantsScope(scope: string): boolean {
    const t = this.target.scope;
    return t === undefined || scope === t || t.startsWith(`${scope}/`) || scope.startsWith(`${t}/`);
  }

  /** An untargeted pass: the whole account. */
  get whole(): boolean {
    return this.target.resource === undefined && this.target.scope === undefined;
  }

  /**
   * Phase 1, account-level resources: the projects' list first and alone (everything project-scoped
   * hangs off it; it runs even for a targeted scope), then the others side by side.
   */
  accountStreams(): { projects?: StreamSpec; others: StreamSpec[] } {
    const top = this.plan.resources.filter((r) => r.scope === 'account' && this.wants(r.name)).map((r) => r.name);
    const others = top
      .filter((r) => r !== 'projects')
      .map((r) => ({ resource: r, scope: '', path: listPath(r) }))
      .filter((s) => this.wantsScope(s.scope));
    return top.includes('projects') ? { projects: { resource: 'projects', scope: '', path: listPath('projects') }, others } : { others };
  }

  /** Phase 2's resources: the project-scoped ones this pass lists. */
  projectResources(): string[] {
    return this.plan.resources.filter((r) => r.scope === 'project' && this.wants(r.name)).map((r) => r.name);
  }

  /** Phase 2 needs the account's project ids. */
  needsProjectIds(): boolean {
    return this.projectResources().length > 0 && this.has('projects');
  }

  /** Lists across projects are possible for this pass (a targeted scope lists its own project). */
  mayListAcross(): boolean {
    return this.projectResources().length > 0 && this.target.scope === undefined;
  }

  /**
   * Phase 2's streams: one across projects for each resource the source system lists so (when
   * `crossLists`), and the per-project streams of the rest.
   */
  projectStreams(projectIds: readonly string[], crossLists: boolean): { across: StreamSpec[]; perProject: StreamSpec[] } {
    const names = this.projectResources();
    const acrossNames = crossLists ? this.plan.resources.filter((r) => names.includes(r.name) && r.crossProject !== false).map((r) => r.name) : [];
    return {
      across: acrossNames.map((r) => ({ resource: r, scope: allProjectsScope, path: listPath(r), projectId: '*' })),
      perProject: this.perProject(
        names.filter((r) => !acrossNames.includes(r)),
        projectIds,
      ),
    };
  }

  /** One stream per project for each resource (project by project), in the pass's scope. */
  perProject(resources: readonly string[], projectIds: readonly string[]): StreamSpec[] {
    return projectIds
      .flatMap((id) => resources.map((r) => ({ resource: r, scope: projectScope(id), path: listPath(r), projectId: id })))
      .filter((s) => this.wantsScope(s.scope));
  }

  /** Phase 3: each parent resource with children this pass lists, and its parents' scopes in the pass's scope. */
  childParents(projectIds: readonly string[]): ParentEntry[] {
    const entries: ParentEntry[] = [];
    for (const parent of this.plan.resources) {
      const children = childrenOf(parent.name)
        .filter((c) => this.wants(c.name))
        .map((c) => c.name);
      if (children.length === 0) continue;
      const scopes: ParentScope[] = parent.scope === 'project' ? projectIds.map((id) => ({ scope: projectScope(id), projectId: id })) : [{ scope: '' }];
      entries.push({ parent: parent.name, children, parentScopes: scopes.filter((ps) => this.wantsScope(ps.scope)) });
    }
    return entries;
  }
}

function projectScope(projectId: string): string {
  return formatScope([['project', projectId]]);
}

/**
 * One child resource's children under one parent resource, from its children plan: the parents of
 * small scopes as sweep items (one stream per parent), each big scope as a children workflow.
 * `changedOnly`: an incremental pass, whose children workflows list only parents that changed.
 */
export function childrenWork(entry: ParentEntry, child: string, plan: ChildrenPlan, changedOnly: boolean): { items: SweepItem[]; groups: ChildrenGroup[] } {
  const items: SweepItem[] = [];
  const groups: ChildrenGroup[] = [];
  for (const ps of entry.parentScopes) {
    const projectId = ps.projectId ? { projectId: ps.projectId } : {};
    for (const id of plan.inline[ps.scope] ?? []) {
      items.push({ resource: child, scope: formatScope([...parseScope(ps.scope), [entry.parent, id]]), path: listPath(child, id), ...projectId });
    }
    if (plan.big.includes(ps.scope)) {
      groups.push({ resource: child, parentResource: entry.parent, parentScope: ps.scope, ...projectId, ...(changedOnly ? { changedFor: child } : {}) });
    }
  }
  return { items, groups };
}

/** Passes begun before sweeps: a children workflow per parent scope and child resource, scope by scope. */
export function childrenGroupsBeforeSweeps(entry: ParentEntry): ChildrenGroup[] {
  return entry.parentScopes.flatMap((ps) =>
    entry.children.map((child) => ({
      resource: child,
      parentResource: entry.parent,
      parentScope: ps.scope,
      ...(ps.projectId ? { projectId: ps.projectId } : {}),
    })),
  );
}

/** Sweep items in batches of at most `size`, each batch of one resource (resources in order of first appearance). */
export function sweepBatches(items: readonly SweepItem[], size = sweepSize): SweepItem[][] {
  const byResource = new Map<string, SweepItem[]>();
  for (const item of items) byResource.set(item.resource, [...(byResource.get(item.resource) ?? []), item]);
  const batches: SweepItem[][] = [];
  for (const list of byResource.values()) for (let i = 0; i < list.length; i += size) batches.push(list.slice(i, i + size));
  return batches;
}

/**
 * A full pass of the whole account whose projects' list completed retires the projects it no longer
 * found (their streams are not run any more, so nothing else would). Never after a failed projects pass.
 */
export function retiresRemovedProjects(p: PassPlan, mode: 'full' | 'incremental', failedResources: readonly string[]): boolean {
  return mode === 'full' && p.whole && p.has('projects') && !failedResources.includes('projects');
}
