// Profiles of the source systems the mirror knows: the sandbox's seven (as its documentation
// describes them) and real-world figures from the reference notes. Unknown systems are probed.
import { sourceSystemProfileSchema, type SourceSystemProfile } from './profile.ts';

type Support = { scope?: 'account' | 'project'; maxPerPage?: number; updateTimeFilter?: boolean; crossProject?: boolean };
const A = (f = true): Support => ({ scope: 'account', updateTimeFilter: f });
const P = (f = true): Support => ({ scope: 'project', updateTimeFilter: f });
const C = (f = true): Support => ({ updateTimeFilter: f });

export const knownProfiles: readonly SourceSystemProfile[] = [
  {
    slug: 'buildpro', name: 'BuildPro', kind: 'construction', defaultPerPage: 100, maxPerPage: 1000,
    resources: {
      projects: A(), vendors: A(), 'cost-codes': P(), 'budget-line-items': P(), 'actual-production-quantities': P(),
      drawings: P(), 'drawing-versions': C(), documents: P(), 'specification-sections': P(), photos: P(), folders: P(), files: P(), 'file-versions': C(),
    },
    concurrency: 10, requestsPerMinute: 60,
    webhookTypes: ['file', 'folder', 'drawing', 'document', 'photo', 'vendor', 'budget-line-item', 'rfi', 'submittal'], passthrough: 'json',
  },
  {
    slug: 'docvault', name: 'DocVault', kind: 'documents', defaultPerPage: 50, maxPerPage: 500,
    // Its native API lists one project's folder tree at a time: no lists across projects.
    resources: { projects: A(false), folders: { ...P(false), crossProject: false }, files: { ...P(false), crossProject: false }, 'file-versions': C(false) },
    concurrency: 4, requestsPerMinute: 120, webhookTypes: ['file', 'folder'], passthrough: 'json',
  },
  {
    slug: 'sqlerp', name: 'SQL ERP', kind: 'erp', defaultPerPage: 50, maxPerPage: 500,
    resources: { projects: A(false), jobs: A(false), customers: A(false), vendors: A(false), 'ap-invoices': A(false), 'ap-invoice-line-items': C(false), 'cost-codes': A(false) },
    concurrency: 1, requestsPerMinute: 300, webhookTypes: [], passthrough: 'sql', preferAsync: true,
  },
  {
    slug: 'xmlbooks', name: 'XML Books', kind: 'accounting', defaultPerPage: 100, maxPerPage: 1000,
    resources: { customers: A(), vendors: A(), 'ap-invoices': A(), 'ap-invoice-line-items': C(false) },
    concurrency: 5, requestsPerMinute: 1800, webhookTypes: ['customer', 'vendor', 'ap-invoice'], passthrough: 'xml',
  },
  {
    slug: 'graphledger', name: 'GraphLedger', kind: 'accounting', defaultPerPage: 50, maxPerPage: 250,
    resources: { projects: A(), customers: A(), vendors: A(), 'ap-invoices': A(), 'ap-invoice-line-items': C() },
    concurrency: 10, requestsPerMinute: 500, webhookTypes: ['customer', 'vendor', 'ap-invoice'], passthrough: 'graphql',
  },
  {
    slug: 'crmcloud', name: 'CRM Cloud', kind: 'crm', defaultPerPage: 10, maxPerPage: 200,
    resources: { customers: A(), leads: A(), opportunities: A(), activities: A() },
    concurrency: 10, requestsPerMinute: 600, webhookTypes: ['customer', 'lead', 'opportunity', 'activity'], passthrough: 'json',
  },
  {
    slug: 'fieldops', name: 'FieldOps', kind: 'field-service', defaultPerPage: 50, maxPerPage: 1000,
    resources: { projects: A(), jobs: A(), appointments: A(), customers: A() },
    concurrency: 10, requestsPerMinute: 3600, webhookTypes: ['project', 'job', 'appointment', 'customer'], passthrough: 'json',
  },
].map((p) => sourceSystemProfileSchema.parse(p));

const bySlug = new Map(knownProfiles.map((p) => [p.slug, p]));

export function knownProfile(slug: string): SourceSystemProfile | undefined {
  return bySlug.get(slug);
}

export type { SourceSystemProfile } from './profile.ts';
export { perPageFor, scopeKindIn } from './profile.ts';
