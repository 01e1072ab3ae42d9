// `Include-Source-Data`, `Include-Source-Data-Path` and `Exclude-Source-Data`: the raw source
// object next to the unified fields, whole or trimmed to the fields asked for.
import { asText } from '../data/as-text.ts';
import type { ResourceName } from '../data/catalog.ts';
import type { Fields } from '../data/generators.ts';
import { nativePath, rawObject, type PathContext } from '../data/raw-source.ts';
import type { SourceSystemProfile } from '../source-systems/profiles.ts';

export interface SourceDataMode {
  /** null: every source field. */
  only: string[] | null;
  withPath: boolean;
  exclude: string[];
}

function list(v: string | undefined): string[] {
  return (v ?? '')
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean);
}

export function sourceDataMode(headers: Record<string, string | string[] | undefined>): SourceDataMode | null {
  const one = (n: string) => {
    const v = headers[n];
    return Array.isArray(v) ? v[0] : v;
  };
  const include = one('include-source-data')?.trim();
  if (!include || include.toLowerCase() === 'false') return null;
  return {
    only: include.toLowerCase() === 'true' ? null : list(include),
    withPath: one('include-source-data-path')?.trim().toLowerCase() !== 'false',
    exclude: list(one('exclude-source-data')),
  };
}

/** The raw object as `source_data` carries it: whole, or only the fields asked for, minus the excluded. */
export function trimmedRaw(profile: SourceSystemProfile, resource: ResourceName, fields: Fields, mode: SourceDataMode): Fields {
  let raw = rawObject(profile, resource, fields);
  if (mode.only) raw = Object.fromEntries(Object.entries(raw).filter(([k]) => mode.only!.includes(k)));
  for (const k of mode.exclude) delete raw[k];
  return raw;
}

/**
 * Adds `source_data` to a record. The projects endpoint places the raw object directly in
 * `source_data` (the contract's second shape); everything else wraps it in {path, content_type, data}.
 */
export function withSourceData(profile: SourceSystemProfile, resource: ResourceName, fields: Fields, mode: SourceDataMode, path: PathContext): Fields {
  const raw = trimmedRaw(profile, resource, fields, mode);
  if (resource === 'projects') return { ...fields, source_data: raw };
  const sourceId = fields.source_id === undefined || fields.source_id === null ? null : asText(fields.source_id);
  return {
    ...fields,
    source_data: {
      ...(mode.withPath ? { path: nativePath(profile, resource, sourceId, path) } : {}),
      content_type: profile.sourceContentType,
      data: raw,
    },
  };
}
