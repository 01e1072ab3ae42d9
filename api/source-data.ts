// The source-data headers: Include-Source-Data (true or a field list), Include-Source-Data-Path,
// Exclude-Source-Data. Applied to stored objects only when a field list, exclusion or path=false asks.

export interface SourceDataOptions {
  include: boolean;
  /** Only these fields of the raw object (null: all). */
  fields: string[] | null;
  exclude: string[];
  includePath: boolean;
}

function list(v: string | undefined): string[] {
  return (v ?? '')
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean);
}

/** What a request without any source-data header asks for (most reads). */
const noSourceData: SourceDataOptions = Object.freeze({ include: false, fields: null, exclude: Object.freeze([]) as unknown as string[], includePath: true });

export function sourceDataOptions(headers: Record<string, string | string[] | undefined>): SourceDataOptions {
  if (headers['include-source-data'] === undefined && headers['exclude-source-data'] === undefined && headers['include-source-data-path'] === undefined)
    return noSourceData;
  const get = (n: string) => {
    const v = headers[n];
    return Array.isArray(v) ? v[0] : v;
  };
  const inc = get('include-source-data')?.trim();
  const include = inc !== undefined && inc !== '' && inc.toLowerCase() !== 'false';
  const fields = include && inc.toLowerCase() !== 'true' ? list(inc) : null;
  return { include, fields, exclude: list(get('exclude-source-data')), includePath: get('include-source-data-path')?.toLowerCase() !== 'false' };
}

export function needsReshaping(o: SourceDataOptions): boolean {
  return o.include && (o.fields !== null || o.exclude.length > 0 || !o.includePath);
}

function pick(raw: unknown, o: SourceDataOptions): unknown {
  if (!raw || typeof raw !== 'object' || Array.isArray(raw)) return raw;
  const entries = Object.entries(raw as Record<string, unknown>).filter(([k]) => (o.fields === null || o.fields.includes(k)) && !o.exclude.includes(k));
  return Object.fromEntries(entries);
}

/** Reshapes one object's `source_data` ({path, content_type, data} or the raw object itself). */
export function reshape(objectJson: string, o: SourceDataOptions): string {
  const obj = JSON.parse(objectJson) as Record<string, unknown>;
  const sd = obj.source_data;
  if (sd && typeof sd === 'object' && !Array.isArray(sd)) {
    const s = sd as Record<string, unknown>;
    if ('data' in s && ('content_type' in s || 'path' in s)) {
      const next: Record<string, unknown> = { ...s, data: pick(s.data, o) };
      if (!o.includePath) delete next.path;
      obj.source_data = next;
    } else {
      obj.source_data = pick(s, o);
    }
  }
  return JSON.stringify(obj);
}
