// The top-level fields a resource's records have: what a list filter or order key may name. The
// contract's fields (lib/resources.ts, the ones the mirror knows) and every key the generator
// writes, so a filter the mirror may evaluate is never refused here.
import { resourceDef } from '../../lib/resources.ts';
import type { ResourceName } from './catalog.ts';
import { generate, type GenInput } from './generators.ts';
import { Rng } from './random.ts';

const known = new Map<ResourceName, ReadonlySet<string>>();

/** A generator input that reaches nothing: only the keys of what it makes are used. */
function stubInput(): GenInput {
  return {
    rng: new Rng('record-fields'),
    i: 7,
    ref: () => '00000000-0000-0000-0000-000000000000',
    count: () => 3,
    projectId: '00000000-0000-0000-0000-000000000000',
    parent: { id: '00000000-0000-0000-0000-000000000000', index: 0, fields: {} },
    fileUrls: () => ({ url: '', preview_url: '' }),
    children: [],
    folderCount: 4,
    userId: () => '00000000-0000-0000-0000-000000000000',
    large: true,
  };
}

export function recordFields(resource: ResourceName): ReadonlySet<string> {
  let set = known.get(resource);
  if (!set) {
    const names = new Set<string>(['id', 'source_id', 'source_create_time', 'source_update_time']);
    for (const f of resourceDef(resource)?.fields ?? []) names.add(f);
    for (const f of Object.keys(generate(resource, stubInput()))) names.add(f);
    // Files over 100 MB carry the id of their transfer (see dataset.ts).
    if (resource === 'files') names.add('file_transfer_id');
    names.delete('source_data');
    known.set(resource, (set = names));
  }
  return set;
}

/**
 * Whether `Project-Id` narrows an account-level list of this resource: the contract gives its
 * records a `project_id` (the mirror reads the same catalog). A generator's own `project_id` on an
 * account-level list the contract does not give one (cost codes listed per account) does not count.
 */
export function narrowsByProject(resource: ResourceName): boolean {
  return resourceDef(resource)?.fields.includes('project_id') ?? false;
}
