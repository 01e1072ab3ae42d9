// The source system's own view of a record: its field names, its paths, its extras. Served as
// `source_data` and through pass-through, derived from the unified fields so both always agree.
import { asText } from './as-text.ts';
import type { Naming, SourceSystemProfile } from '../source-systems/profiles.ts';
import type { ResourceName } from './catalog.ts';
import type { Fields } from './generators.ts';

const sqlTables: Partial<Record<ResourceName, string>> = {
  projects: 'JCJM',
  jobs: 'SMWorkOrder',
  customers: 'ARCM',
  vendors: 'APVM',
  'ap-invoices': 'APTH',
  'ap-invoice-line-items': 'APTL',
  'cost-codes': 'JCCH',
};

const entities: Partial<Record<ResourceName, string>> = {
  projects: 'Project',
  jobs: 'Job',
  customers: 'Customer',
  vendors: 'Vendor',
  appointments: 'Appointment',
  leads: 'Lead',
  opportunities: 'Opportunity',
  activities: 'Event',
  'ap-invoices': 'Bill',
  'ap-invoice-line-items': 'BillLine',
  files: 'File',
  folders: 'Folder',
  'file-versions': 'FileVersion',
};

function camel(s: string): string {
  return s.replace(/[-_]([a-z0-9])/g, (_, c: string) => c.toUpperCase());
}

function renamed(naming: Naming, field: string): string {
  switch (naming) {
    case 'snake':
      return field;
    case 'camel':
      return camel(field);
    case 'pascal': {
      const c = camel(field);
      return c.charAt(0).toUpperCase() + c.slice(1);
    }
    case 'upper':
      return field.replace(/_/g, '').toUpperCase().slice(0, 12);
  }
}

// Field names repeat on every record of every page: each naming's conversions are remembered
// (bounded, since created records may bring any names).
const renames: Record<Naming, Map<string, string>> = { snake: new Map(), camel: new Map(), pascal: new Map(), upper: new Map() };
const MAX_REMEMBERED_NAMES = 10_000;

function renameField(naming: Naming, field: string): string {
  const memo = renames[naming];
  let name = memo.get(field);
  if (name === undefined) {
    name = renamed(naming, field);
    if (memo.size >= MAX_REMEMBERED_NAMES) memo.clear();
    memo.set(field, name);
  }
  return name;
}

/** The table (SQL), entity (XML, GraphQL, CRM) or collection (REST) name of a resource. */
export function nativeName(profile: SourceSystemProfile, resource: ResourceName): string {
  if (profile.naming === 'upper') return sqlTables[resource] ?? resource.toUpperCase().replace(/-/g, '_');
  if (profile.naming === 'pascal') return entities[resource] ?? renameField('pascal', resource);
  if (profile.naming === 'camel') return camel(resource);
  return resource.replace(/-/g, '_');
}

export function nativeResourceOf(profile: SourceSystemProfile, name: string): ResourceName | undefined {
  const resources = Object.keys(profile.resources) as ResourceName[];
  return resources.find((r) => nativeName(profile, r).toLowerCase() === name.toLowerCase());
}

const skipped = new Set(['id', 'source_id', 'source_create_time', 'source_update_time', 'source_data', 'line_items', 'files', 'folders']);

/** The raw source object of a record. */
export function rawObject(profile: SourceSystemProfile, resource: ResourceName, fields: Fields): Fields {
  const naming = profile.naming;
  const sourceId = asText(fields.source_id);
  const out: Fields = {};
  switch (profile.sourceIdStyle) {
    case 'numeric':
      out[renameField(naming, 'id')] = /^\d+$/.test(sourceId) ? Number(sourceId) : sourceId;
      break;
    case 'list-id':
      out.ListID = sourceId;
      break;
    case 'crm':
      out.Id = sourceId;
      out.attributes = { type: nativeName(profile, resource), url: `${profile.nativeBase}/${nativeName(profile, resource)}/${sourceId}` };
      break;
    default:
      out[renameField(naming, 'id')] = sourceId;
  }
  for (const k of Object.keys(fields)) {
    const v = fields[k];
    if (v === null || skipped.has(k)) continue;
    out[renameField(naming, k)] = v;
  }
  out[renameField(naming, naming === 'pascal' ? 'time_created' : 'created_at')] = fields.source_create_time ?? null;
  out[renameField(naming, naming === 'pascal' ? 'time_modified' : 'updated_at')] = fields.source_update_time ?? null;
  // A few native-only fields, as real systems have them.
  if (profile.slug === 'buildpro') out.custom_fields = {};
  if (profile.slug === 'sqlerp') out.KEYID = Number(String(sourceId).replace(/\D/g, '') || 0);
  if (profile.slug === 'xmlbooks') out.EditSequence = String(Date.parse(asText(fields.source_update_time)) / 1000 || 0);
  if (profile.slug === 'graphledger') out.__typename = nativeName(profile, resource).replace(/^./, (c) => c.toUpperCase());
  return out;
}

export interface PathContext {
  projectSourceId?: string;
  parentSourceId?: string;
  parentResource?: ResourceName;
  companySourceId?: string;
}

/** `source_data.path`: the native API path, or the SQL query for SQL-backed systems. */
export function nativePath(profile: SourceSystemProfile, resource: ResourceName, sourceId: string | null, c: PathContext = {}): string {
  const name = nativeName(profile, resource);
  switch (profile.passthrough) {
    case 'sql': {
      const where = c.parentSourceId
        ? `WHERE PARENTID = '${c.parentSourceId}'${sourceId ? ` AND LINE = ${Number(sourceId) || `'${sourceId}'`}` : ''}`
        : sourceId
          ? `WHERE KEYID = '${sourceId}'`
          : '';
      return `SELECT * FROM ${name}${where ? ` ${where}` : ''}`;
    }
    case 'xml':
      return `${name}QueryRq${sourceId ? `?ListID=${sourceId}` : ''}`;
    case 'graphql':
      return `${profile.nativeBase}?query=${name}${sourceId ? `(id: "${sourceId}")` : 's'}`;
    default: {
      let base = profile.nativeBase;
      if (c.companySourceId && profile.crossCompany) base += `/companies/${c.companySourceId}`;
      if (c.projectSourceId) base += `/projects/${c.projectSourceId}`;
      if (c.parentResource && c.parentSourceId) base += `/${nativeName(profile, c.parentResource)}/${c.parentSourceId}`;
      return `${base}/${name}${sourceId ? `/${sourceId}` : ''}`;
    }
  }
}
