// The seven simulated source systems. Their slugs are part of the sandbox's interface; everything
// else (page sizes, limits, field coverage, quirks) is what a mirror must discover or respect.
import type { ResourceName } from '../data/catalog.ts';

export interface ResourceSupport {
  /** Top-level resources only: project-scoped ones require the `Project-Id` header. */
  scope?: 'account' | 'project';
  /** Whether list filters on source_update_time / source_create_time are accepted. */
  filterable?: boolean;
  /** Whether the unified writes reach it (those its collection path offers: resources/write-routes.ts). */
  writable?: boolean;
  /** Unified fields this system does not fill: answered as null. */
  unsupportedFields?: readonly string[];
  /**
   * Project-scoped resources: whether lists accept `Project-Id: *` (every project's records in one
   * list, each carrying its project_id). Default true; false answers such a list 400.
   */
  crossProject?: boolean;
}

export type Naming = 'snake' | 'camel' | 'pascal' | 'upper';
export type SourceIdStyle = 'numeric' | 'opaque' | 'coded' | 'list-id' | 'crm';

export interface SourceSystemProfile {
  slug: string;
  /** Display name (linked account `source_system.name`, error messages). */
  name: string;
  /** Prefix of its rate-limit headers: `{headerName}-RateLimit-Total`. */
  headerName: string;
  kind: 'construction' | 'documents' | 'erp' | 'accounting' | 'crm' | 'field-service';
  defaultPerPage: number;
  maxPerPage: number;
  /** 'null': answers has_more_results null on every page (the client must detect the end). */
  hasMoreResults: 'exact' | 'null';
  resources: Partial<Record<ResourceName, ResourceSupport>>;
  rateLimit: { limit: number; windowMs: number };
  /** One request at a time per account, a bounded queue and a maximum execution time. */
  serial?: { maxQueued: number; maxExecutionMs: number };
  crossCompany: boolean;
  supportsCrossAccountUuid: boolean;
  webhookTypes: readonly string[];
  etags: boolean;
  passthrough: 'json' | 'sql' | 'xml' | 'graphql';
  naming: Naming;
  sourceIdStyle: SourceIdStyle;
  /** Base of native API paths, used in source_data.path and pass-through. */
  nativeBase: string;
  sourceContentType: string;
  /** A few very large files (over 100 MB) among its files. */
  largeFiles: boolean;
}

const construction: Partial<Record<ResourceName, ResourceSupport>> = {
  projects: { scope: 'account', filterable: true },
  vendors: { scope: 'account', filterable: true, writable: true, unsupportedFields: ['tax_number'] },
  'cost-codes': { scope: 'project', filterable: true },
  // Its records carry no project_id: a list across projects could not say where each belongs.
  'budget-line-items': { scope: 'project', filterable: true, writable: true, crossProject: false },
  'actual-production-quantities': { scope: 'project', filterable: true, unsupportedFields: ['sub_job_id'] },
  drawings: { scope: 'project', filterable: true },
  'drawing-versions': { filterable: true },
  documents: { scope: 'project', filterable: true },
  'specification-sections': { scope: 'project', filterable: true },
  photos: { scope: 'project', filterable: true, writable: true },
  folders: { scope: 'project', filterable: true, writable: true },
  files: { scope: 'project', filterable: true, writable: true },
  'file-versions': { filterable: true, writable: true },
};

export const sourceSystemProfiles: readonly SourceSystemProfile[] = [
  {
    slug: 'buildpro',
    name: 'BuildPro',
    headerName: 'BuildPro',
    kind: 'construction',
    defaultPerPage: 100,
    maxPerPage: 1000,
    hasMoreResults: 'exact',
    resources: construction,
    rateLimit: { limit: 3600, windowMs: 3_600_000 },
    crossCompany: true,
    supportsCrossAccountUuid: true,
    webhookTypes: ['file', 'folder', 'drawing', 'document', 'photo', 'vendor', 'budget-line-item', 'rfi', 'submittal'],
    etags: true,
    passthrough: 'json',
    naming: 'snake',
    sourceIdStyle: 'numeric',
    nativeBase: '/rest/v1.0',
    sourceContentType: 'application/json',
    largeFiles: false,
  },
  {
    slug: 'docvault',
    name: 'DocVault',
    headerName: 'DocVault',
    kind: 'documents',
    defaultPerPage: 50,
    maxPerPage: 500,
    hasMoreResults: 'exact',
    resources: {
      projects: { scope: 'account', unsupportedFields: ['amount', 'number', 'type', 'address', 'start_date', 'completion_date'] },
      // Its native API lists one project's folder tree at a time.
      folders: { scope: 'project', crossProject: false },
      files: { scope: 'project', unsupportedFields: ['notes'], crossProject: false },
      'file-versions': {},
    },
    rateLimit: { limit: 120, windowMs: 60_000 },
    crossCompany: false,
    supportsCrossAccountUuid: true,
    webhookTypes: ['file', 'folder'],
    etags: true,
    passthrough: 'json',
    naming: 'camel',
    sourceIdStyle: 'opaque',
    nativeBase: '/api/v3',
    sourceContentType: 'application/json',
    largeFiles: true,
  },
  {
    slug: 'sqlerp',
    name: 'SQL ERP',
    headerName: 'SqlErp',
    kind: 'erp',
    defaultPerPage: 50,
    maxPerPage: 500,
    hasMoreResults: 'null',
    resources: {
      projects: { scope: 'account', unsupportedFields: ['type'] },
      jobs: { scope: 'account' },
      customers: { scope: 'account', unsupportedFields: ['website', 'tax_code_id', 'parent_id'] },
      vendors: { scope: 'account', unsupportedFields: ['website'] },
      'ap-invoices': { scope: 'account', unsupportedFields: ['attachments', 'discount_date', 'discount_amount'] },
      'ap-invoice-line-items': { unsupportedFields: ['change_order', 'contract'] },
      'cost-codes': { scope: 'account' },
    },
    rateLimit: { limit: 300, windowMs: 60_000 },
    serial: { maxQueued: 5, maxExecutionMs: 90_000 },
    crossCompany: false,
    supportsCrossAccountUuid: false,
    webhookTypes: [],
    etags: false,
    passthrough: 'sql',
    naming: 'upper',
    sourceIdStyle: 'coded',
    nativeBase: '',
    sourceContentType: 'application/json',
    largeFiles: false,
  },
  {
    slug: 'xmlbooks',
    name: 'XML Books',
    headerName: 'XmlBooks',
    kind: 'accounting',
    defaultPerPage: 100,
    maxPerPage: 1000,
    hasMoreResults: 'exact',
    resources: {
      customers: { scope: 'account', filterable: true, unsupportedFields: ['website'] },
      vendors: { scope: 'account', filterable: true },
      'ap-invoices': { scope: 'account', filterable: true, unsupportedFields: ['project_id', 'retention_amount', 'retention_percent'] },
      'ap-invoice-line-items': { unsupportedFields: ['change_order', 'contract', 'project_id'] },
    },
    rateLimit: { limit: 1800, windowMs: 60_000 },
    crossCompany: false,
    supportsCrossAccountUuid: false,
    webhookTypes: ['customer', 'vendor', 'ap-invoice'],
    etags: false,
    passthrough: 'xml',
    naming: 'pascal',
    sourceIdStyle: 'list-id',
    nativeBase: '',
    sourceContentType: 'text/xml',
    largeFiles: false,
  },
  {
    slug: 'graphledger',
    name: 'GraphLedger',
    headerName: 'GraphLedger',
    kind: 'accounting',
    defaultPerPage: 50,
    maxPerPage: 250,
    hasMoreResults: 'exact',
    resources: {
      projects: { scope: 'account', filterable: true, unsupportedFields: ['address', 'completion_date'] },
      customers: { scope: 'account', filterable: true, writable: true },
      vendors: { scope: 'account', filterable: true, writable: true },
      'ap-invoices': { scope: 'account', filterable: true, writable: true, unsupportedFields: ['retention_amount', 'retention_percent', 'misc_amount'] },
      'ap-invoice-line-items': { filterable: true, writable: true },
    },
    rateLimit: { limit: 500, windowMs: 60_000 },
    crossCompany: false,
    supportsCrossAccountUuid: false,
    webhookTypes: ['customer', 'vendor', 'ap-invoice'],
    etags: false,
    passthrough: 'graphql',
    naming: 'camel',
    sourceIdStyle: 'numeric',
    nativeBase: '/graphql',
    sourceContentType: 'application/json',
    largeFiles: false,
  },
  {
    slug: 'crmcloud',
    name: 'CRM Cloud',
    headerName: 'CrmCloud',
    kind: 'crm',
    defaultPerPage: 10,
    maxPerPage: 200,
    hasMoreResults: 'exact',
    resources: {
      customers: { scope: 'account', filterable: true, writable: true, unsupportedFields: ['balance', 'tax_code_id', 'terms'] },
      leads: { scope: 'account', filterable: true, writable: true },
      opportunities: { scope: 'account', filterable: true, writable: true },
      activities: { scope: 'account', filterable: true, writable: true },
    },
    rateLimit: { limit: 100, windowMs: 10_000 },
    crossCompany: false,
    supportsCrossAccountUuid: false,
    webhookTypes: ['customer', 'lead', 'opportunity', 'activity'],
    etags: false,
    passthrough: 'json',
    naming: 'pascal',
    sourceIdStyle: 'crm',
    nativeBase: '/services/data/v58.0/sobjects',
    sourceContentType: 'application/json',
    largeFiles: false,
  },
  {
    slug: 'fieldops',
    name: 'FieldOps',
    headerName: 'FieldOps',
    kind: 'field-service',
    defaultPerPage: 50,
    maxPerPage: 1000,
    hasMoreResults: 'exact',
    resources: {
      projects: { scope: 'account', filterable: true, unsupportedFields: ['amount'] },
      jobs: { scope: 'account', filterable: true },
      appointments: { scope: 'account', filterable: true, writable: true, unsupportedFields: ['actual_duration'] },
      customers: { scope: 'account', filterable: true, unsupportedFields: ['balance', 'terms', 'tax_code_id', 'currency_code'] },
    },
    rateLimit: { limit: 60, windowMs: 1_000 },
    crossCompany: false,
    supportsCrossAccountUuid: false,
    webhookTypes: ['project', 'job', 'appointment', 'customer'],
    etags: false,
    passthrough: 'json',
    naming: 'camel',
    sourceIdStyle: 'numeric',
    nativeBase: '/v2',
    sourceContentType: 'application/json',
    largeFiles: false,
  },
];

const bySlug = new Map(sourceSystemProfiles.map((p) => [p.slug, p]));

export function profileOf(slug: string): SourceSystemProfile | undefined {
  return bySlug.get(slug);
}

export function supports(profile: SourceSystemProfile, resource: ResourceName): ResourceSupport | undefined {
  return profile.resources[resource];
}

/** The public description served at `GET /_admin/source-systems` and written in the README. */
export function describeProfile(p: SourceSystemProfile) {
  return {
    slug: p.slug,
    name: p.name,
    kind: p.kind,
    default_per_page: p.defaultPerPage,
    max_per_page: p.maxPerPage,
    has_more_results: p.hasMoreResults === 'null' ? 'always null' : 'exact',
    rate_limit: { limit: p.rateLimit.limit, window_ms: p.rateLimit.windowMs, header_prefix: p.headerName },
    serial: p.serial ? { max_concurrent: 1, max_queued: p.serial.maxQueued, max_execution_ms: p.serial.maxExecutionMs } : null,
    cross_company: p.crossCompany,
    supports_cross_account_uuid: p.supportsCrossAccountUuid,
    webhook_types: p.webhookTypes,
    etags: p.etags,
    passthrough: p.passthrough,
    resources: Object.fromEntries(
      Object.entries(p.resources).map(([name, s]) => [
        name,
        {
          scope: s.scope ?? 'child',
          filterable: Boolean(s.filterable),
          writable: Boolean(s.writable),
          unsupported_fields: s.unsupportedFields ?? [],
          ...(s.scope === 'project' ? { cross_project: s.crossProject !== false } : {}),
        },
      ]),
    ),
  };
}
