// Writes lib/real-catalog.generated.ts: the listable collection paths of the real service's request
// collection (the reference file `real-service-collections.json`), each as a catalog entry (name,
// path, scope, parent, fields). The mirror never reads the reference at run time; this committed file
// is its copy of those facts. Regenerate with
//   node --import tsx scripts/generate-real-catalog.ts <path/to/real-service-collections.json> > lib/real-catalog.generated.ts
// The rules (names, scopes, fields) are below; hints fill the few collections whose writes name no
// fields (list-only collections), so every resource has something to generate and mirror.
import { readFileSync } from 'node:fs';

interface Collection {
  path: string;
  operations: string[];
  project_id_header: string[];
  query_params: string[];
  write_body_fields: string[];
}

export interface RealEntry {
  path: string;
  name: string;
  scope: 'account' | 'project' | 'child';
  parent: string | null;
  /** For `/vendors/compliances`: the child resource it lists across every parent. */
  aggregateOf: string | null;
  operations: string[];
  fields: string[];
}

/** Collections the catalog holds by hand (lib/resources.ts) or that are no list of records of their own. */
const handled = new Set(['/folders/{id}/files']);

/**
 * Scope by hand where the collection's Project-Id hint misleads (AR invoices are kept per account with a
 * project_id; coordination issues belong to a project's model, and a list across projects must say
 * which project each came from).
 */
const scopeHints: Record<string, 'account' | 'project'> = {
  '/ar-invoices': 'account',
  '/contacts': 'account',
  '/issues': 'project',
  '/coordination-issues': 'project',
};

/** Fields of collections whose writes name none (list-only collections), or too few to be useful. */
const fieldHints: Record<string, string[]> = {
  '/bank-accounts': ['name', 'number', 'status', 'type', 'currency_code', 'balance'],
  '/checklist-templates': ['name', 'description', 'status', 'type'],
  '/checklists': ['name', 'description', 'status', 'due_date', 'assignee_id', 'location_id'],
  '/departments': ['name', 'code', 'status', 'type'],
  '/drawing-areas': ['name', 'code'],
  '/issues': ['name', 'description', 'status', 'type', 'due_date', 'assignee_id', 'location_id'],
  '/ledger-journals': ['name', 'number', 'status', 'post_date', 'description'],
  '/locations': ['name', 'code', 'parent_id'],
  '/sub-jobs': ['name', 'code', 'status'],
  '/transmittals': ['number', 'subject', 'description', 'status', 'sent_date', 'due_date', 'creator_id'],
  '/units-of-measure': ['name', 'code', 'type'],
  '/work-logs': ['date', 'description', 'hours', 'status', 'creator_id', 'vendor_id'],
  '/vendors/{id}/contacts': ['first_name', 'last_name', 'email', 'phone', 'job_title'],
  '/budget-transfers/{id}/line-items': ['amount', 'cost_code_id', 'cost_type_id', 'description'],
  '/specification-sections/{id}/versions': ['name', 'number', 'version', 'issue_date'],
  '/prime-contracts/{id}/change-orders': ['name', 'number', 'status', 'issue_date', 'description', 'total_amount'],
  '/subcontracts/{id}/change-orders': ['name', 'number', 'status', 'issue_date', 'description', 'total_amount'],
  '/rfis': ['subject', 'question', 'number', 'status', 'due_date', 'creator_id', 'assignee_id', 'cost_impact'],
  '/submittals': ['status', 'due_date'],
  '/subcontracts': ['total_amount', 'issue_date'],
  '/purchase-orders': ['total_amount'],
  '/prime-contracts': ['total_amount'],
  '/change-orders': ['status', 'total_amount'],
  '/cost-types': ['status'],
  '/employees': ['name'],
};

/** Write-body keys that are no field of a record: bulk envelopes, uploads, embedded children. */
const notFields = new Set([
  'source_data',
  'creates',
  'updates',
  'contents',
  'content_type',
  'line_items',
  'viewpoints',
  'reviewers',
  'distribution_contacts',
  'batch',
]);

export function singular(segment: string): string {
  if (segment.endsWith('ies')) return `${segment.slice(0, -3)}y`;
  if (segment.endsWith('s')) return segment.slice(0, -1);
  return segment;
}

function cleanField(raw: string): string | null {
  const f = raw
    .replace(/\(.*?\)/g, '')
    .replace(/\[.*$/, '')
    .trim();
  if (!/^[a-z][a-z0-9_]*$/.test(f) || notFields.has(f)) return null;
  return f;
}

export function entriesOf(collections: readonly Collection[]): RealEntry[] {
  const listable = collections.filter(
    (c) => c.operations.includes('list') && !handled.has(c.path) && !c.path.startsWith('/admin') && !c.path.startsWith('/link'),
  );
  const names = new Map<string, string>();
  const out: RealEntry[] = [];
  for (const c of listable) {
    const parts = c.path.split('/').slice(1);
    let name: string;
    let scope: RealEntry['scope'];
    let parent: string | null = null;
    let aggregateOf: string | null = null;
    if (parts.length === 1) {
      name = parts[0]!;
      scope = scopeHints[c.path] ?? (c.project_id_header.every((h) => h === 'sent') ? 'project' : 'account');
    } else if (parts.length === 3 && parts[1] === '{id}') {
      parent = parts[0]!;
      name = `${singular(parts[0]!)}-${parts[2]!}`;
      scope = 'child';
    } else if (parts.length === 2) {
      // `/vendors/compliances`: every vendor's compliances in one list, a resource of its own.
      name = `all-${singular(parts[0]!)}-${parts[1]!}`;
      aggregateOf = `${singular(parts[0]!)}-${parts[1]!}`;
      scope = 'account';
    } else continue;
    names.set(c.path, name);
    const fields: string[] = [];
    const add = (f: string | null) => {
      if (f && !fields.includes(f)) fields.push(f);
    };
    c.write_body_fields.forEach((f) => add(cleanField(f)));
    (fieldHints[c.path] ?? []).forEach(add);
    if (aggregateOf) {
      const child = collections.find((x) => x.path === `/${parts[0]}/{id}/${parts[1]}`);
      child?.write_body_fields.forEach((f) => add(cleanField(f)));
      (fieldHints[`/${parts[0]}/{id}/${parts[1]}`] ?? []).forEach(add);
    }
    if (parent) add(`${singular(parent).replace(/-/g, '_')}_id`);
    if (aggregateOf) add(`${singular(parts[0]!).replace(/-/g, '_')}_id`);
    if (scope === 'project') add('project_id');
    if (fields.length === 0) ['name', 'status'].forEach(add);
    out.push({ path: parts.length === 3 ? parts[2]! : c.path, name, scope, parent, aggregateOf, operations: c.operations, fields });
  }
  return out;
}

export function generatedSource(collections: readonly Collection[]): string {
  const entries = entriesOf(collections);
  const lines = entries.map((e) => `  ${JSON.stringify(e)},`);
  return [
    "// GENERATED by scripts/generate-real-catalog.ts from the real service's request collection",
    '// (real-service-collections.json): its listable collection paths as catalog entries. Do not edit;',
    '// regenerate. lib/resources.ts adds those its own entries do not already hold.',
    '',
    'export interface RealEntry {',
    '  path: string;',
    '  name: string;',
    "  scope: 'account' | 'project' | 'child';",
    '  parent: string | null;',
    '  aggregateOf: string | null;',
    '  operations: readonly string[];',
    '  fields: readonly string[];',
    '}',
    '',
    `/** Every listable collection path of the reference (${collections.filter((c) => c.operations.includes('list')).length}), as it is requested. */`,
    'export const realListablePaths: readonly string[] = [',
    ...collections.filter((c) => c.operations.includes('list')).map((c) => `  ${JSON.stringify(c.path)},`),
    '];',
    '',
    '// `as const`: the sandbox types its resource names from these.',
    'export const realEntries = [',
    ...lines,
    '] as const satisfies readonly RealEntry[];',
    '',
  ].join('\n');
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const file = process.argv[2];
  if (!file) {
    process.stderr.write('usage: generate-real-catalog.ts <real-service-collections.json>\n');
    process.exit(2);
  }
  const reference = JSON.parse(readFileSync(file, 'utf8')) as { collections: Collection[] };
  process.stdout.write(generatedSource(reference.collections));
}
