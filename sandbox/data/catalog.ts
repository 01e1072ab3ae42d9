// The unified resources the sandbox serves, how they nest, and how many records each list holds.
// Whether a resource is account-level or project-scoped is a property of the source system
// (see source-systems/profiles.ts); children always live under one parent object.

export const topLevelResources = [
  'projects',
  'jobs',
  'customers',
  'vendors',
  'appointments',
  'leads',
  'opportunities',
  'activities',
  'files',
  'folders',
  'photos',
  'drawings',
  'documents',
  'specification-sections',
  'actual-production-quantities',
  'budget-line-items',
  'cost-codes',
  'ap-invoices',
] as const;
export type TopLevelResource = (typeof topLevelResources)[number];

export const childResources = ['ap-invoice-line-items', 'file-versions', 'drawing-versions'] as const;
export type ChildResource = (typeof childResources)[number];

export type ResourceName = TopLevelResource | ChildResource;

export interface ChildSpec {
  parent: TopLevelResource;
  /** Path segment under the parent: `/ap-invoices/{id}/line-items`. */
  segment: string;
  /** Records per parent, derived from a hash of the parent so it varies between parents. */
  min: number;
  max: number;
}

export const childSpecs: Record<ChildResource, ChildSpec> = {
  'ap-invoice-line-items': { parent: 'ap-invoices', segment: 'line-items', min: 3, max: 7 },
  'file-versions': { parent: 'files', segment: 'versions', min: 1, max: 3 },
  'drawing-versions': { parent: 'drawings', segment: 'versions', min: 1, max: 3 },
};

export function childOf(parent: string, segment: string): ChildResource | undefined {
  return childResources.find((c) => childSpecs[c].parent === parent && childSpecs[c].segment === segment);
}

export function isTopLevel(name: string): name is TopLevelResource {
  return (topLevelResources as readonly string[]).includes(name);
}

export function isChild(name: string): name is ChildResource {
  return (childResources as readonly string[]).includes(name);
}

/** Webhook `type` of a resource: the singular of its path. */
export function webhookTypeOf(resource: ResourceName): string {
  const singular: Record<ResourceName, string> = {
    projects: 'project',
    jobs: 'job',
    customers: 'customer',
    vendors: 'vendor',
    appointments: 'appointment',
    leads: 'lead',
    opportunities: 'opportunity',
    activities: 'activity',
    files: 'file',
    folders: 'folder',
    photos: 'photo',
    drawings: 'drawing',
    documents: 'document',
    'specification-sections': 'specification-section',
    'actual-production-quantities': 'actual-production-quantity',
    'budget-line-items': 'budget-line-item',
    'cost-codes': 'cost-code',
    'ap-invoices': 'ap-invoice',
    'ap-invoice-line-items': 'ap-invoice-line-item',
    'file-versions': 'file-version',
    'drawing-versions': 'drawing-version',
  };
  return singular[resource];
}

/**
 * Records per list. Projects stay few (they multiply every project-scoped list). `sizes` overrides
 * the rule per top-level resource (children keep their per-parent counts).
 */
export function listSize(resource: ResourceName, size: number, sizes?: Readonly<Record<string, number>>): number {
  const override = sizes?.[resource];
  if (override !== undefined && isTopLevel(resource)) return override;
  switch (resource) {
    case 'projects':
      return Math.min(25, Math.max(3, Math.floor(size / 20)));
    case 'folders':
      // A small tree per project; folder 0 is the root folder.
      return Math.min(40, Math.max(4, Math.ceil(size / 10)));
    case 'ap-invoice-line-items':
    case 'file-versions':
    case 'drawing-versions':
      return childSpecs[resource].max;
    default:
      return size;
  }
}
