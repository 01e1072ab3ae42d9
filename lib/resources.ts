// The contract's resources (part 2) as data: the one catalog from which the mirror's partitions,
// typed SQL views, read routes and sync order are derived. Facts of the contract only; which source
// system serves what lives in connectors/source-systems/. The contract's 21 entries are written out
// below; every other listable collection of the real service comes from real-catalog.generated.ts
// (regenerated from the reference by scripts/generate-real-catalog.ts), one entry each.
import { realEntries } from './real-catalog.generated.ts';

export type ScopeKind =
  /** One list per linked account (or company). */
  | 'account'
  /** One list per project; the request carries `Project-Id`. */
  | 'project'
  /** Reachable only through a parent object: `/{parent}/{parentId}/{path}`. */
  | 'child';

export interface ResourceDef {
  /** Path segment and the mirror's resource key, e.g. `ap-invoices`. */
  name: string;
  /** Path of the list endpoint relative to the base URL (for children: the segment after the parent). */
  path: string;
  scope: ScopeKind;
  /** For children: the parent resource's name. */
  parent?: string;
  /** Unified fields named by the contract (besides the identifiers of 2.1). */
  fields: readonly string[];
  /** Fields that hold a storage-proxy URL. */
  urlFields?: readonly string[];
  /**
   * A list of another resource's children across every parent (`/vendors/compliances`: every
   * vendor's compliances). Listed and mirrored as an account-level resource of its own; no objects.
   */
  aggregateOf?: string;
}

const ids = ['id', 'source_id', 'source_create_time', 'source_update_time'] as const;

function def(d: ResourceDef): ResourceDef {
  return { ...d, fields: [...ids, ...d.fields.filter((f) => !(ids as readonly string[]).includes(f))] };
}

const contractResources: readonly ResourceDef[] = [
  def({
    name: 'projects',
    path: '/projects',
    scope: 'account',
    fields: ['address', 'amount', 'completion_date', 'name', 'number', 'start_date', 'status', 'type'],
  }),
  def({ name: 'jobs', path: '/jobs', scope: 'account', fields: ['name', 'status', 'description'] }),
  def({
    name: 'customers',
    path: '/customers',
    scope: 'account',
    fields: ['addresses', 'balance', 'currency_code', 'email', 'name', 'parent_id', 'phone', 'status', 'tax_code_id', 'terms', 'type', 'website'],
  }),
  def({
    name: 'appointments',
    path: '/appointments',
    scope: 'account',
    fields: ['actual_duration', 'actual_end_time', 'actual_start_time', 'address', 'appointment_number', 'arrival_window_end_time', 'description', 'status'],
  }),
  def({ name: 'leads', path: '/leads', scope: 'account', fields: ['address', 'contact', 'customer', 'description', 'industry', 'status', 'type'] }),
  def({
    name: 'opportunities',
    path: '/opportunities',
    scope: 'account',
    fields: ['amount', 'close_date', 'creator_id', 'customer_id', 'description', 'name', 'probability', 'stage', 'status', 'type'],
  }),
  def({
    name: 'activities',
    path: '/activities',
    scope: 'account',
    fields: ['name', 'description', 'status', 'type', 'start_time', 'end_time', 'opportunity_id', 'contact_id', 'customer_id'],
  }),
  def({ name: 'vendors', path: '/vendors', scope: 'account', fields: ['name', 'email', 'phone', 'status'] }),
  def({
    name: 'ap-invoices',
    path: '/ap-invoices',
    scope: 'account',
    fields: [
      'amount_due',
      'ap_payment_ids',
      'attachments',
      'creator_id',
      'currency_code',
      'description',
      'discount_amount',
      'discount_date',
      'due_date',
      'issue_date',
      'misc_amount',
      'net_amount',
      'number',
      'project_id',
      'retention_amount',
      'retention_percent',
      'status',
      'subtotal_amount',
      'tax_amount',
      'total_amount',
      'vendor_id',
    ],
  }),
  def({
    name: 'ap-invoice-line-items',
    path: 'line-items',
    scope: 'child',
    parent: 'ap-invoices',
    fields: [
      'amount',
      'change_order',
      'contract',
      'cost_code_id',
      'cost_type_id',
      'customer_id',
      'description',
      'item_id',
      'ledger_account_id',
      'project_id',
      'quantity',
      'status',
      'tax_amount',
      'tax_code_id',
      'type',
      'unit_cost',
      'unit_of_measure',
      'vendor_id',
    ],
  }),
  def({ name: 'cost-codes', path: '/cost-codes', scope: 'project', fields: ['name', 'number', 'status'] }),
  def({
    name: 'budget-line-items',
    path: '/budget-line-items',
    scope: 'project',
    fields: ['cost_code_id', 'cost_type_id', 'current_amount', 'name', 'original_amount', 'quantity', 'unit_of_measure', 'unit_cost', 'wbs_id'],
  }),
  def({
    name: 'actual-production-quantities',
    path: '/actual-production-quantities',
    scope: 'project',
    fields: ['cost_code_id', 'cost_type_id', 'date', 'project_id', 'quantity', 'status', 'sub_job_id', 'wbs_id'],
  }),
  def({
    name: 'drawings',
    path: '/drawings',
    scope: 'project',
    fields: ['creator_id', 'discipline', 'drawing_version_id', 'filename', 'name', 'number', 'preview_url', 'version', 'project_id', 'url'],
    urlFields: ['url', 'preview_url'],
  }),
  def({
    name: 'drawing-versions',
    path: 'versions',
    scope: 'child',
    parent: 'drawings',
    fields: ['creator_id', 'drawing_version_id', 'filename', 'name', 'number', 'preview_url', 'version', 'url'],
    urlFields: ['url', 'preview_url'],
  }),
  def({
    name: 'documents',
    path: '/documents',
    scope: 'project',
    fields: ['name', 'project_id', 'creator_id', 'folder_id', 'preview_url', 'size', 'type', 'url'],
    urlFields: ['url', 'preview_url'],
  }),
  def({
    name: 'specification-sections',
    path: '/specification-sections',
    scope: 'project',
    fields: ['name', 'number', 'preview_url', 'section_version_id', 'project_id', 'url'],
    urlFields: ['url', 'preview_url'],
  }),
  def({
    name: 'photos',
    path: '/photos',
    scope: 'project',
    fields: ['capture_time', 'creator_id', 'description', 'file_url', 'latitude', 'longitude', 'name', 'preview_url', 'size'],
    urlFields: ['file_url', 'preview_url'],
  }),
  def({ name: 'folders', path: '/folders', scope: 'project', fields: ['name', 'parent_id', 'project_id'] }),
  def({
    name: 'files',
    path: '/files',
    scope: 'project',
    fields: ['creator_id', 'file_version_id', 'filename', 'folder_id', 'name', 'notes', 'preview_url', 'project_id', 'size', 'type', 'url', 'version'],
    urlFields: ['url', 'preview_url'],
  }),
  def({
    name: 'file-versions',
    path: 'versions',
    scope: 'child',
    parent: 'files',
    fields: ['creator_id', 'file_version_id', 'file_id', 'filename', 'name', 'preview_url', 'url', 'version'],
    urlFields: ['url', 'preview_url'],
  }),
];

/** The contract's resources (in their order, which sync order and partitions follow), then the real service's others. */
export const resources: readonly ResourceDef[] = [
  ...contractResources,
  ...realEntries
    .filter((e) => !contractResources.some((c) => c.name === e.name))
    .map((e) =>
      def({
        name: e.name,
        path: e.path,
        scope: e.scope,
        ...(e.parent ? { parent: e.parent } : {}),
        ...(e.aggregateOf ? { aggregateOf: e.aggregateOf } : {}),
        fields: e.fields,
      }),
    ),
];

/** The names of the contract's own resources (the catalog before the real service's others joined it). */
export const contractResourceNames: readonly string[] = contractResources.map((r) => r.name);

const byName = new Map(resources.map((r) => [r.name, r]));

export function resourceDef(name: string): ResourceDef | undefined {
  return byName.get(name);
}

/** The SQL-safe suffix for per-resource objects (partitions, views): `ap-invoices` -> `ap_invoices`. */
export function sqlName(resource: string): string {
  return resource.replace(/[^a-z0-9]+/g, '_');
}

/**
 * The canonical scope of a record: the chain of its parents, typed, outermost first.
 * `[]` for top-level records; e.g. `project=<id>/ap-invoices=<id>`.
 */
type ScopePart = readonly [kind: string, id: string];

export function formatScope(parts: readonly ScopePart[]): string {
  return parts.map(([kind, id]) => `${kind}=${id}`).join('/');
}

export function parseScope(scope: string): ScopePart[] {
  if (scope === '') return [];
  return scope.split('/').map((part) => {
    const eq = part.indexOf('=');
    return [part.slice(0, eq), part.slice(eq + 1)] as const;
  });
}

/**
 * The scope of a stream that lists a project-scoped resource across every project at once
 * (`Project-Id: *`): its records are kept in their own projects' scopes (`project=<project_id>`),
 * never in this one; only the stream (its checkpoint, its pass) has it.
 */
export const allProjectsScope = 'project=*';

/** The list path of a resource; children are listed through their parent object. */
export function listPath(resource: string, parentId?: string): string {
  const def = resourceDef(resource);
  if (!def) throw new Error(`unknown resource ${resource}`);
  if (def.scope !== 'child') return def.path;
  if (parentId === undefined) throw new Error(`${resource} is listed through a ${def.parent} id`);
  const parent = resourceDef(def.parent!)!;
  return `${parent.path}/${encodeURIComponent(parentId)}/${def.path}`;
}

/** Resources listed through each parent resource, e.g. `ap-invoices` -> [`ap-invoice-line-items`]. */
export function childrenOf(parent: string): ResourceDef[] {
  return resources.filter((r) => r.scope === 'child' && r.parent === parent);
}

/** The resource a webhook `type` names (`file` -> `files`, `opportunity` -> `opportunities`). */
export function resourceForWebhookType(type: string): ResourceDef | undefined {
  const t = type.toLowerCase().replace(/_/g, '-');
  return resourceDef(`${t}s`) ?? resourceDef(t.replace(/y$/, 'ies')) ?? resourceDef(t);
}
