// One served record as JSON text, written into a page's buffer: exactly what JSON.stringify makes of
// the record, or of `withSourceData(...)` when source data is asked for, without the spread copies:
// the record's own text, then `source_data` where the spread puts it (last).
import { asText } from '../data/as-text.ts';
import type { ResourceName } from '../data/catalog.ts';
import type { Fields } from '../data/generators.ts';
import { nativePath, type PathContext } from '../data/raw-source.ts';
import type { SourceSystemProfile } from '../source-systems/profiles.ts';
import type { JsonWriter } from './json-writer.ts';
import { trimmedRaw, withSourceData, type SourceDataMode } from './source-data.ts';

/** Writes a record as served: its fields, then `source_data` when `mode` asks for it. */
export function writeRecord(
  w: JsonWriter,
  profile: SourceSystemProfile,
  resource: ResourceName,
  fields: Fields,
  mode: SourceDataMode | null,
  path: PathContext,
): void {
  if (!mode) {
    w.text(JSON.stringify(fields));
    return;
  }
  // An own `source_data` (a created record may carry one) keeps its place in the spread: the plain way.
  if (Object.prototype.hasOwnProperty.call(fields, 'source_data') || typeof profile.sourceContentType !== 'string') {
    w.text(JSON.stringify(withSourceData(profile, resource, fields, mode, path)));
    return;
  }
  const own = JSON.stringify(fields);
  if (own.charCodeAt(own.length - 1) !== 0x7d) {
    w.text(JSON.stringify(withSourceData(profile, resource, fields, mode, path)));
    return;
  }
  w.text(own);
  w.unwrite(1); // its closing brace
  w.text(own.length > 2 ? ',"source_data":' : '"source_data":');
  const raw = JSON.stringify(trimmedRaw(profile, resource, fields, mode));
  if (resource === 'projects') {
    w.text(raw);
  } else {
    const sourceId = fields.source_id === undefined || fields.source_id === null ? null : asText(fields.source_id);
    w.text(mode.withPath ? `{"path":${JSON.stringify(nativePath(profile, resource, sourceId, path))},"content_type":` : '{"content_type":');
    w.text(JSON.stringify(profile.sourceContentType));
    w.text(',"data":');
    w.text(raw);
    w.byte(0x7d);
  }
  w.byte(0x7d);
}
