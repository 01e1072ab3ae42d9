// MIRROR_RESOURCES: which of the catalog's resources the mirror keeps a copy of. `*` (the default) is
// every resource a source system serves; `contract` the contract's own resources; otherwise a
// comma-separated list of resource names. A resource left out is not synced and its reads are
// forwarded to the upstream, as for a resource the account's source system does not serve, so an
// application still gets the upstream's answer. What a selected resource needs comes with it: a
// child's parents (its lists are found through them) and `projects` (the scopes of project lists).
import { contractResourceNames, resourceDef, resources } from './resources.ts';

/** The selected names, or null for every resource. */
export type ResourceSelection = ReadonlySet<string> | null;

export function parseResourceSelection(text: string): { selection: ResourceSelection; problems: string[] } {
  const entries = text
    .split(',')
    .map((s) => s.trim())
    .filter((s) => s !== '');
  if (entries.length === 0 || entries.includes('*'))
    return { selection: null, problems: entries.length > 1 ? ['"*" means every resource: list nothing beside it'] : [] };
  const problems: string[] = [];
  const names = new Set<string>(['projects']);
  const add = (name: string) => {
    for (let d = resourceDef(name); d && !names.has(d.name); d = d.parent ? resourceDef(d.parent) : undefined) names.add(d.name);
  };
  for (const e of entries) {
    if (e === 'contract') contractResourceNames.forEach(add);
    else if (resourceDef(e)) add(e);
    else
      problems.push(
        `"${e}" is not a resource of the catalog (e.g. ${resources
          .slice(0, 3)
          .map((r) => r.name)
          .join(', ')}; or * for all, contract for the contract's own)`,
      );
  }
  return { selection: names, problems };
}

export function isSelected(selection: ResourceSelection, resource: string): boolean {
  return selection === null || selection.has(resource);
}
