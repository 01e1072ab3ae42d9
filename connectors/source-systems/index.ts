// Profiles of the source systems the mirror knows: the sandbox's ten (as its documentation
// describes them) and real-world figures from the reference notes. Unknown systems are probed.
import { isSelected, type ResourceSelection } from '../../lib/resource-selection.ts';
import { sourceSystemProfileSchema, type SourceSystemProfile } from './profile.ts';

type Support = { scope?: 'account' | 'project'; maxPerPage?: number; updateTimeFilter?: boolean; crossProject?: boolean };
const A = (f = true): Support => ({ scope: 'account', updateTimeFilter: f });
const P = (f = true): Support => ({ scope: 'project', updateTimeFilter: f });
const C = (f = true): Support => ({ updateTimeFilter: f });
/** The real service's other resources a system serves (lib/real-catalog.generated.ts), all at one scope. */
const many = (make: () => Support, names: readonly string[]): Record<string, Support> => Object.fromEntries(names.map((n) => [n, make()]));

export const knownProfiles: readonly SourceSystemProfile[] = [
  {
    slug: 'buildpro',
    name: 'BuildPro',
    kind: 'construction',
    defaultPerPage: 100,
    maxPerPage: 1000,
    resources: {
      projects: A(),
      vendors: A(),
      'cost-codes': P(),
      'budget-line-items': P(),
      'actual-production-quantities': P(),
      drawings: P(),
      'drawing-versions': C(),
      documents: P(),
      'specification-sections': P(),
      photos: P(),
      folders: P(),
      files: P(),
      'file-versions': C(),
      // Project management: RFIs, submittals, observations, daily logs, checklists, change events.
      ...many(P, [
        'rfis',
        'submittals',
        'submittal-packages',
        'observations',
        'work-logs',
        'issues',
        'checklists',
        'checklist-templates',
        'coordination-issues',
        'change-events',
        'transmittals',
        'locations',
        'drawing-areas',
        'budget-production-quantities',
        'cost-projections',
        'wbs',
        'sub-jobs',
      ]),
      contacts: A(),
    },
    concurrency: 10,
    requestsPerMinute: 60,
    webhookTypes: ['file', 'folder', 'drawing', 'document', 'photo', 'vendor', 'budget-line-item', 'rfi', 'submittal'],
    passthrough: 'json',
  },
  {
    slug: 'docvault',
    name: 'DocVault',
    kind: 'documents',
    defaultPerPage: 50,
    maxPerPage: 500,
    // Its native API lists one project's folder tree at a time: no lists across projects.
    resources: {
      projects: A(false),
      folders: { ...P(false), crossProject: false },
      files: { ...P(false), crossProject: false },
      'file-versions': C(false),
      'specification-sections': { ...P(false), crossProject: false },
      'specification-section-versions': C(),
    },
    concurrency: 4,
    requestsPerMinute: 120,
    webhookTypes: ['file', 'folder'],
    passthrough: 'json',
  },
  {
    slug: 'sqlerp',
    name: 'SQL ERP',
    kind: 'erp',
    defaultPerPage: 50,
    maxPerPage: 500,
    resources: {
      projects: A(false),
      jobs: A(false),
      customers: A(false),
      vendors: A(false),
      'ap-invoices': A(false),
      'ap-invoice-line-items': C(false),
      'cost-codes': A(false),
      // Contracts, commitments, job cost and payroll, per account.
      ...many(A, [
        'prime-contracts',
        'subcontracts',
        'all-subcontract-compliances',
        'purchase-orders',
        'all-purchase-order-compliances',
        'change-orders',
        'subcontract-claims',
        'job-costs',
        'employees',
        'timecard-entries',
        'cost-types',
        'item-receipts',
        'change-events',
        'budget-transfers',
        'wbs-segments',
      ]),
      ...many(C, [
        'prime-contract-line-items',
        'prime-contract-change-orders',
        'subcontract-line-items',
        'subcontract-change-orders',
        'subcontract-compliances',
        'purchase-order-line-items',
        'purchase-order-compliances',
        'change-order-line-items',
        'subcontract-claim-line-items',
        'item-receipt-line-items',
        'change-event-line-items',
        'budget-transfer-line-items',
        'wbs-segment-items',
      ]),
    },
    concurrency: 1,
    requestsPerMinute: 300,
    webhookTypes: [],
    passthrough: 'sql',
    preferAsync: true,
  },
  {
    slug: 'xmlbooks',
    name: 'XML Books',
    kind: 'accounting',
    defaultPerPage: 100,
    maxPerPage: 1000,
    resources: {
      customers: A(),
      vendors: A(),
      'ap-invoices': A(),
      'ap-invoice-line-items': C(false),
      // Receivables, payments, the ledger, items, and the contacts of its customers and vendors.
      ...many(A, [
        'ar-invoices',
        'ar-payments',
        'ap-payments',
        'bank-accounts',
        'tax-codes',
        'items',
        'expenses',
        'estimates',
        'ledger-accounts',
        'ledger-journal-entries',
        'ledger-journals',
        'departments',
        'units-of-measure',
        'batches',
        'inventory-locations',
        'all-vendor-compliances',
      ]),
      ...many(C, [
        'ar-invoice-line-items',
        'ar-payment-line-items',
        'ap-payment-line-items',
        'expense-line-items',
        'estimate-line-items',
        'ledger-journal-entry-line-items',
        'customer-contacts',
        'vendor-contacts',
        'vendor-compliances',
      ]),
    },
    concurrency: 5,
    requestsPerMinute: 1800,
    webhookTypes: ['customer', 'vendor', 'ap-invoice'],
    passthrough: 'xml',
  },
  {
    slug: 'graphledger',
    name: 'GraphLedger',
    kind: 'accounting',
    defaultPerPage: 50,
    maxPerPage: 250,
    resources: { projects: A(), customers: A(), vendors: A(), 'ap-invoices': A(), 'ap-invoice-line-items': C() },
    concurrency: 10,
    requestsPerMinute: 500,
    webhookTypes: ['customer', 'vendor', 'ap-invoice'],
    passthrough: 'graphql',
  },
  {
    slug: 'crmcloud',
    name: 'CRM Cloud',
    kind: 'crm',
    defaultPerPage: 10,
    maxPerPage: 200,
    resources: { customers: A(), leads: A(), opportunities: A(), activities: A() },
    concurrency: 10,
    requestsPerMinute: 600,
    webhookTypes: ['customer', 'lead', 'opportunity', 'activity'],
    passthrough: 'json',
  },
  {
    slug: 'fieldops',
    name: 'FieldOps',
    kind: 'field-service',
    defaultPerPage: 50,
    maxPerPage: 1000,
    resources: { projects: A(), jobs: A(), appointments: A(), customers: A(), ...many(A, ['service-sites', 'work-orders', 'assets']) },
    concurrency: 10,
    requestsPerMinute: 3600,
    webhookTypes: ['project', 'job', 'appointment', 'customer'],
    passthrough: 'json',
  },
  // Shaped like the systems construction companies actually connect (sandbox/source-systems/profiles.ts).
  {
    // Cloud construction PM: an hourly budget (and, upstream, a 10-second burst limit besides).
    slug: 'sitecloud',
    name: 'SiteCloud',
    kind: 'construction',
    defaultPerPage: 100,
    maxPerPage: 300,
    resources: {
      projects: A(),
      vendors: A(),
      'cost-codes': P(),
      drawings: P(),
      'drawing-versions': C(),
      documents: P(),
      'specification-sections': P(),
      photos: P(),
      contacts: A(),
      ...many(P, [
        'rfis',
        'submittals',
        'submittal-packages',
        'observations',
        'work-logs',
        'issues',
        'checklists',
        'locations',
        'change-events',
        'transmittals',
      ]),
      'change-event-line-items': C(),
    },
    concurrency: 10,
    requestsPerMinute: 60,
    webhookTypes: ['project', 'vendor', 'drawing', 'photo', 'rfi', 'submittal', 'observation'],
    passthrough: 'json',
  },
  {
    // On-premises construction ERP: one request at a time, no update-time filters.
    slug: 'jobsiteerp',
    name: 'Jobsite ERP',
    kind: 'erp',
    defaultPerPage: 100,
    maxPerPage: 500,
    resources: {
      projects: A(false),
      jobs: A(false),
      customers: A(false),
      vendors: A(false),
      'cost-codes': A(false),
      'ap-invoices': A(false),
      'ap-invoice-line-items': C(false),
      ...many(
        () => A(false),
        ['prime-contracts', 'subcontracts', 'purchase-orders', 'change-orders', 'job-costs', 'cost-types', 'employees', 'timecard-entries', 'ar-invoices'],
      ),
      ...many(
        () => C(false),
        [
          'prime-contract-line-items',
          'subcontract-line-items',
          'subcontract-change-orders',
          'purchase-order-line-items',
          'change-order-line-items',
          'ar-invoice-line-items',
        ],
      ),
    },
    concurrency: 1,
    requestsPerMinute: 600,
    webhookTypes: [],
    passthrough: 'sql',
    preferAsync: true,
  },
  {
    slug: 'cloudbooks',
    name: 'CloudBooks',
    kind: 'accounting',
    defaultPerPage: 100,
    maxPerPage: 1000,
    resources: {
      customers: A(),
      vendors: A(),
      'ap-invoices': A(),
      'ap-invoice-line-items': C(),
      ...many(A, [
        'ar-invoices',
        'ar-payments',
        'ap-payments',
        'bank-accounts',
        'tax-codes',
        'items',
        'expenses',
        'ledger-accounts',
        'ledger-journal-entries',
        'departments',
      ]),
      ...many(C, [
        'ar-invoice-line-items',
        'ar-payment-line-items',
        'ap-payment-line-items',
        'expense-line-items',
        'ledger-journal-entry-line-items',
        'customer-contacts',
        'vendor-contacts',
      ]),
    },
    concurrency: 10,
    requestsPerMinute: 500,
    webhookTypes: ['customer', 'vendor', 'ap-invoice', 'ar-invoice'],
    passthrough: 'json',
  },
].map((p) => sourceSystemProfileSchema.parse(p));

let bySlug = new Map(knownProfiles.map((p) => [p.slug, p]));
let selected: ResourceSelection = null;

/**
 * The resources this process mirrors (MIRROR_RESOURCES, set once at start by bin/services.ts): every
 * profile then lists only those, so planning, reads (which forward the rest) and the demo agree.
 */
export function selectResources(selection: ResourceSelection): void {
  selected = selection;
  bySlug = new Map(
    knownProfiles.map((p) => [
      p.slug,
      selection === null ? p : { ...p, resources: Object.fromEntries(Object.entries(p.resources).filter(([name]) => selection.has(name))) },
    ]),
  );
}

/** Whether this process mirrors a resource (an unknown source system is probed only for those). */
export function isMirrored(resource: string): boolean {
  return isSelected(selected, resource);
}

/** A source system's profile, its resources narrowed to the mirrored ones. */
export function knownProfile(slug: string): SourceSystemProfile | undefined {
  return bySlug.get(slug);
}

export type { SourceSystemProfile } from './profile.ts';
export { perPageFor, scopeKindIn } from './profile.ts';
