// MIRROR_INDEXED_FIELDS: the fields an operator filters on often enough to want an expression index
// for (mirror/control/field-indexes.ts creates them at `mirror migrate`), e.g.
// `customers.status,customers.source_data.Region,ap-invoices.total_amount:number`. Each entry is
// `<resource>.<field>`, the field as filters name it (a unified field, source_create_time /
// source_update_time, or `source_data.<key>`), with `:number` for a field compared with numbers
// (a filter whose values are numbers compares numerically, a different expression than text's).
import { resourceDef } from './resources.ts';

export interface IndexedField {
  resource: string;
  /** As filters name it: `status`, `source_update_time`, `source_data.Region`. */
  field: string;
  /** Which comparison the index serves: text (strings, booleans; LIKE prefixes) or number. */
  kind: 'text' | 'number';
}

const sourceDataPrefix = 'source_data.';

/** One entry, or the reason it is not one. */
function parseIndexedField(entry: string): IndexedField | string {
  let text = entry.trim();
  let kind: IndexedField['kind'] = 'text';
  if (text.endsWith(':number')) {
    kind = 'number';
    text = text.slice(0, -':number'.length);
  } else if (text.endsWith(':text')) {
    text = text.slice(0, -':text'.length);
  }
  const dot = text.indexOf('.');
  if (dot <= 0 || dot === text.length - 1) return `"${entry}" is not <resource>.<field> (e.g. customers.status or customers.source_data.Region)`;
  const resource = text.slice(0, dot);
  const field = text.slice(dot + 1);
  const def = resourceDef(resource);
  if (!def) return `"${entry}": no resource ${resource}`;
  if (field.startsWith(sourceDataPrefix)) {
    const key = field.slice(sourceDataPrefix.length);
    if (key === '' || key.includes('.')) return `"${entry}": name one top-level source_data key (source_data.<key>)`;
    if ([...key].some((c) => c.charCodeAt(0) < 0x20)) return `"${entry}": a source_data key without control characters`;
  } else if (!def.fields.includes(field)) {
    return `"${entry}": ${field} is not a field of ${resource} (fields: ${def.fields.join(', ')}, or source_data.<key>)`;
  }
  if (kind === 'number' && (field === 'source_create_time' || field === 'source_update_time')) return `"${entry}": ${field} is a time, not a number`;
  return { resource, field, kind };
}

/** The whole setting: comma-separated entries (duplicates once); problems listed. */
export function parseIndexedFields(value: string): { fields: IndexedField[]; problems: string[] } {
  const fields: IndexedField[] = [];
  const problems: string[] = [];
  for (const entry of value
    .split(',')
    .map((s) => s.trim())
    .filter((s) => s !== '')) {
    const f = parseIndexedField(entry);
    if (typeof f === 'string') problems.push(f);
    else if (!fields.some((x) => x.resource === f.resource && x.field === f.field && x.kind === f.kind)) fields.push(f);
  }
  return { fields, problems };
}

/** Per resource, the fields with a text expression index (a number's index serves numeric comparisons, whose form is one). */
export function textIndexed(fields: readonly IndexedField[]): (resource: string) => ReadonlySet<string> {
  const by = new Map<string, Set<string>>();
  for (const f of fields) if (f.kind === 'text') by.set(f.resource, (by.get(f.resource) ?? new Set()).add(f.field));
  const none: ReadonlySet<string> = new Set();
  return (resource) => by.get(resource) ?? none;
}
