// How a page's records go to Postgres, next to the SQL that reads them: one JSON parameter per write
// (the fastest path measured on this platform short of COPY). A list body goes as the bytes the
// upstream sent behind jsonb's binary version byte (Postgres parses it; the worker never does), or
// cut into `[[records without source_data], [their source_data]]` where every record carries source
// data; objects (events, writes, bodies Postgres refuses) go serialised by the worker. Each layout
// has its row source below, and nothing else reads the layouts.
import { BufferPool } from '../../lib/buffer-pool.ts';
import { MalformedResponseError } from '../../lib/errors.ts';
import type { PageRecords } from '../../lib/list-page.ts';

/** A list body as it came: its bytes and what the scan found in them. */
type BodyRecords = Extract<PageRecords, { bytes: Buffer }>;

/**
 * An object without its source data. jsonb's `-` rebuilds the object even when the key is absent
 * (most passes do not ask for source data): 1.4 ms of Postgres CPU per 1000-record page, saved by
 * looking first.
 */
const withoutSourceData = (e: string) => `CASE WHEN ${e} ? 'source_data' THEN ${e} - 'source_data' ELSE ${e} END`;

// The rows of a write, from objects the worker serialised ({k: object, c, u: its source times}).
const objectRows = (rows: string) => `
  SELECT ${withoutSourceData("(e->'k')")} AS data, e->'k'->'source_data' AS source_data, e->'k'->>'id' AS id,
         e->'k'->>'source_id' AS source_id, (e->>'c')::timestamptz AS sct, (e->>'u')::timestamptz AS sut,
         $5::bigint + n - 1 AS ordinal
    FROM jsonb_array_elements(${rows}::jsonb) WITH ORDINALITY AS t(e, n)`;

// The rows of a write, from a list body as the upstream sent it. Its source times were checked to
// be ISO 8601 with a zone (connectors/list-scan.ts); milliseconds, as the objects' path keeps them.
const bodyRows = (rows: string) => `
  SELECT ${withoutSourceData('e')} AS data, e->'source_data' AS source_data, e->>'id' AS id, e->>'source_id' AS source_id,
         date_trunc('milliseconds', (e->>'source_create_time')::timestamptz) AS sct,
         date_trunc('milliseconds', (e->>'source_update_time')::timestamptz) AS sut,
         $5::bigint + n - 1 AS ordinal
    FROM (SELECT ${rows}::jsonb AS b) body,
         jsonb_array_elements(CASE WHEN jsonb_typeof(b) = 'array' THEN b ELSE b->'data' END) WITH ORDINALITY AS t(e, n)`;

// The same from a list body's records split from their source data (`splitSourceData`): pairs each
// record with its source data, without rebuilding the record to take the source data out.
const splitRows = (rows: string) => `
  SELECT e AS data, s AS source_data, e->>'id' AS id, e->>'source_id' AS source_id,
         date_trunc('milliseconds', (e->>'source_create_time')::timestamptz) AS sct,
         date_trunc('milliseconds', (e->>'source_update_time')::timestamptz) AS sut,
         $5::bigint + n - 1 AS ordinal
    FROM (SELECT ${rows}::jsonb AS b) body,
         ROWS FROM (jsonb_array_elements(b->0), jsonb_array_elements(b->1)) WITH ORDINALITY AS t(e, s, n)`;

/**
 * The row source of each layout, given the parameter that holds the rows (`$n`): a write's statement
 * (mirror/records/page-write.ts) selects its input from one of them.
 */
export const rowSources = { objects: objectRows, body: bodyRows, split: splitRows } as const;
export type RowsKind = keyof typeof rowSources;

/** A write's records, encoded: the parameter its row source reads, and the ids it holds. */
export interface EncodedRows {
  kind: RowsKind;
  param: string | Buffer;
  ids: readonly string[];
  /** Hands the parameter's buffer back for the next page: call once the write was answered. */
  release?(): void;
}

/** jsonb's binary format: a version byte, then the JSON text (Postgres parses it as it would the text form). */
const jsonbVersion = 1;

/**
 * A list body as a jsonb parameter in binary form: split from its source data where the scan found
 * it in every record, else whole. In a buffer of `buffers` either way (whole, the body is copied
 * behind the version byte: 0.1 ms a megabyte, and no new megabyte for V8 to count): a page of 1000
 * records is about a megabyte, and the driver reads it only before the write's answer.
 */
export function encodeBody(records: BodyRecords, buffers: BufferPool): EncodedRows {
  const { bytes, ids, sourceData } = records;
  let param: Buffer;
  if (sourceData) {
    param = splitSourceData(bytes, sourceData, jsonbVersion, (size) => buffers.take(size));
  } else {
    param = buffers.take(bytes.length + 1);
    param[0] = jsonbVersion;
    bytes.copy(param, 1);
  }
  return { kind: sourceData ? 'split' : 'body', param, ids, release: () => buffers.give(param) };
}

/**
 * The records of a list body as two JSON arrays in one, `[[records without source_data], [their
 * source_data]]`, after the byte `prefix`. Postgres parses these as it would the body, but need not
 * rebuild each object to take its source data out of it (7% of its CPU in a full pass). `offsets`
 * are the scan's (lib/list-page.ts); `alloc` gives the buffer written (of the size asked).
 */
export function splitSourceData(
  bytes: Buffer,
  offsets: readonly number[],
  prefix: number,
  alloc: (size: number) => Buffer = (size) => Buffer.allocUnsafe(size),
): Buffer {
  const n = offsets.length / 6;
  let size = 1 + 7 + 2 * Math.max(n - 1, 0);
  for (let i = 0; i < offsets.length; i += 6) size += offsets[i + 1]! - offsets[i]! - (offsets[i + 3]! - offsets[i + 2]!) + offsets[i + 5]! - offsets[i + 4]!;
  const out = alloc(size);
  out[0] = prefix;
  let at = 1;
  out[at++] = OPEN_ARRAY;
  out[at++] = OPEN_ARRAY;
  for (let i = 0; i < offsets.length; i += 6) {
    if (i > 0) out[at++] = COMMA;
    at += bytes.copy(out, at, offsets[i], offsets[i + 2]);
    at += bytes.copy(out, at, offsets[i + 3], offsets[i + 1]);
  }
  out[at++] = CLOSE_ARRAY;
  out[at++] = COMMA;
  out[at++] = OPEN_ARRAY;
  for (let i = 0; i < offsets.length; i += 6) {
    if (i > 0) out[at++] = COMMA;
    at += bytes.copy(out, at, offsets[i + 4], offsets[i + 5]);
  }
  out[at++] = CLOSE_ARRAY;
  out[at++] = CLOSE_ARRAY;
  if (at !== size) throw new Error(`splitSourceData wrote ${at} bytes of ${size}`);
  return out;
}

const COMMA = 0x2c;
const OPEN_ARRAY = 0x5b;
const CLOSE_ARRAY = 0x5d;

function isoOrNull(v: unknown): string | null {
  if (typeof v !== 'string' || v === '') return null;
  const t = Date.parse(v);
  return Number.isNaN(t) ? null : new Date(t).toISOString();
}

/**
 * Objects serialised for the write, untouched, with their parsed source times. The last copy of a
 * key wins: one statement cannot upsert the same key twice.
 */
export function encodeObjects(
  items: readonly Record<string, unknown>[],
  keyOf: (item: Record<string, unknown>) => string = (item) => String(item.id),
): EncodedRows {
  const byId = new Map<string, Record<string, unknown>>();
  for (const item of items) byId.set(keyOf(item), item);
  const rows = [...byId.values()].map((k) => ({ k, c: isoOrNull(k.source_create_time), u: isoOrNull(k.source_update_time) }));
  return { kind: 'objects', param: JSON.stringify(rows), ids: [...byId.keys()] };
}

/**
 * Errors of a body Postgres will not take as it is, though it may be a good list: a source time it
 * does not read, text that is not UTF-8, JSON it does not accept. The body's objects, parsed in the
 * worker (`parseBody`), are written instead.
 */
const bodyRefusals: ReadonlySet<string> = new Set(['22007', '22008', '22P02', '22021', '22P05', '21000']);

export function isBodyRefusal(error: unknown): boolean {
  return bodyRefusals.has((error as { code?: string } | undefined)?.code ?? '');
}

/**
 * A list body's records, parsed in the worker: for a body Postgres refused, or one with repeated
 * ids. The scan checked each record's shape, so only JSON's grammar is left to fail here: that is a
 * malformed answer (worth another try, like a cut-off body), as the connector's own parse says.
 */
export function parseBody(bytes: Buffer, what: string): Record<string, unknown>[] {
  let value: unknown;
  try {
    // Bytes that are not UTF-8 decode to U+FFFD, as the connector's parse decodes them.
    value = JSON.parse(bytes.toString('utf8'));
  } catch (error) {
    throw new MalformedResponseError(`Upstream sent malformed JSON for ${what}`, 200, { cause: error });
  }
  const records = Array.isArray(value) ? value : (value as { data?: unknown } | null)?.data;
  if (!Array.isArray(records) || !records.every((r) => typeof r === 'object' && r !== null && !Array.isArray(r))) {
    throw new MalformedResponseError(`Upstream's ${what} is not a list of records`, 200);
  }
  return records as Record<string, unknown>[];
}
