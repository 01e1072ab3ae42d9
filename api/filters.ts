// List filters (`{field, operator, value}`, ANDed) and order keys (`{field, dir}`) as a caller sends
// them in any of the read rule's forms, checked against the resource's fields: what
// mirror/reads/record-filters.ts compiles (values and field names become SQL parameters, never SQL text).
// A shape the rule calls malformed is the caller's 400, as the upstream answers it; a field the mirror
// does not hold (a key outside the catalog, `source_data.a.b`) is not evaluated here: the read is
// forwarded (NotEvaluated), never answered as if the predicate were not there.
import { z } from 'zod';
import { BadRequestError } from '../lib/errors.ts';
import { isoInstant, MAX_FILTERS, MAX_ORDER_KEYS } from '../lib/list-parameters.ts';
import type { ResourceDef } from '../lib/resources.ts';
import { filterOperators as operators, sourceDataPrefix, timeColumns, type RecordFilter, type RecordOrder } from '../mirror/reads/record-filters.ts';

/** At most this many filters and order keys in one read, all forms together (as upstream). */
const maxFilters = MAX_FILTERS;
const maxOrderKeys = MAX_ORDER_KEYS;

/** The first instant Postgres takes (0001-01-01): the rule's parse reaches year 0, which it refuses. */
const firstInstant = -62135596800000;

/**
 * An instant (ms, with microseconds as a fraction) as ISO 8601 text Postgres reads exactly, for every
 * instant a filter value can name (year 1 to the first day of year 10000: `9999-12-31T24:00:00-23:59`).
 * Date#toISOString writes a year past 9999 in ECMAScript's expanded form (`+010000-01-01T...`), which
 * Postgres refuses; it reads the year's digits alone (`10000-01-01T...`).
 */
function isoMicros(t: number): string {
  let ms = Math.floor(t);
  let micros = Math.round((t - ms) * 1000);
  // A fraction that rounds up to a whole millisecond is the next millisecond.
  if (micros === 1000) {
    ms += 1;
    micros = 0;
  }
  const base = new Date(ms).toISOString().replace(/^\+0*(?=\d{5})/, '');
  return micros === 0 ? base : `${base.slice(0, -1)}${String(micros).padStart(3, '0')}Z`;
}

/** A read the mirror cannot answer exactly: forwarded to the upstream, with this reason. */
export class NotEvaluated extends Error {
  readonly reason: string;
  constructor(reason: string) {
    super(reason);
    this.reason = reason;
  }
}

/** Caller's text quoted in a message or a header: printable ASCII, at most 64 characters. */
export function quoted(text: string): string {
  const clean = text.replace(/[^\x20-\x7e]/g, '?');
  return JSON.stringify(clean.length > 64 ? `${clean.slice(0, 64)}...` : clean);
}

const scalar = z.union([z.string(), z.number(), z.boolean()], { message: 'a value is a string, a number or a boolean' });
const filterSchema = z.strictObject({
  field: z.string({ message: 'field is a string' }).min(1, 'field is a field name'),
  operator: z
    .string({ message: 'operator is a string' })
    .transform((o) => o.trim().toUpperCase())
    .pipe(z.enum(operators, { message: `operator must be one of ${operators.join(', ')}` })),
  value: z.union([scalar, z.array(scalar)], { message: 'value is a string, a number, a boolean or an array of them' }),
});
const orderSchema = z.strictObject({
  field: z.string({ message: 'field is a string' }).min(1, 'field is a field name'),
  dir: z
    .string({ message: 'dir is ASC or DESC' })
    .transform((d) => d.trim().toUpperCase())
    .pipe(z.enum(['ASC', 'DESC'], { message: 'dir is ASC or DESC' }))
    .optional(),
});

/** Items as they came, each with where it came from (for messages): `filters.0`, `filters[]#2`, `body.filters.1`. */
export interface Sourced {
  at: string;
  item: unknown;
}

function invalid(at: string, error: z.ZodError): BadRequestError {
  const details = error.issues.map((i) => ({ path: [at, ...i.path].join('.'), message: i.message }));
  return new BadRequestError(`Invalid ${at}: ${details.map((d) => `${d.path}: ${d.message}`).join('; ')}`, { details });
}

/** Checks a field: a time field, `id`, a field of the resource's catalog entry, or `source_data.<key>`. */
function checkField(field: string, at: string, def: ResourceDef): void {
  if (field.startsWith(sourceDataPrefix)) {
    const key = field.slice(sourceDataPrefix.length);
    if (key === '')
      throw new BadRequestError(`${at}.field: name a key of the source object, e.g. source_data.${'Name'}.`, {
        details: [{ path: `${at}.field`, message: 'empty source_data key' }],
      });
    if (key.includes('.')) throw new NotEvaluated(`field ${quoted(field)} (a nested source_data key) is not evaluated by the mirror`);
    return;
  }
  if (!def.fields.includes(field)) throw new NotEvaluated(`field ${quoted(field)} of ${def.name} is not evaluated by the mirror`);
}

/** The caller's filters, all forms in order, checked: what mirror/reads/record-filters.ts compiles. */
export function checkFilters(items: readonly Sourced[], def: ResourceDef): RecordFilter[] {
  if (items.length > maxFilters) throw new BadRequestError(`At most ${maxFilters} filters (all forms together); this read has ${items.length}.`);
  return items.map(({ at, item }) => {
    const r = filterSchema.safeParse(item);
    if (!r.success) throw invalid(at, r.error);
    const f = r.data;
    checkField(f.field, at, def);
    const many = f.operator.endsWith('IN') || f.operator.endsWith('BETWEEN');
    if (many !== Array.isArray(f.value)) throw new BadRequestError(`${at}.value: ${f.operator} takes ${many ? 'an array' : 'a single value'}.`);
    const values = [f.value].flat();
    if (f.operator.endsWith('IN') && values.length === 0) throw new BadRequestError(`${at}.value: ${f.operator} takes a non-empty array.`);
    if (f.operator.endsWith('BETWEEN') && values.length !== 2) throw new BadRequestError(`${at}.value: ${f.operator} takes exactly two values.`);
    const like = f.operator.endsWith('LIKE');
    // Backslash escapes the next character of a LIKE pattern: one at the very end escapes nothing.
    if (like && /(^|[^\\])(\\\\)*\\$/.test(String(f.value))) {
      throw new BadRequestError(
        `${at}.value: a ${f.operator} pattern cannot end with a lone backslash (it escapes the next character; write \\\\ for a literal backslash).`,
      );
    }
    if (timeColumns[f.field]) {
      if (like) throw new BadRequestError(`${at}.operator: ${f.field} is a time; compare it with =, !=, <, <=, >, >=, IN, NOT IN, BETWEEN or NOT BETWEEN.`);
      // Compared as instants: the same parse as upstream's (lib/list-parameters.ts isoInstant), passed
      // on as a UTC instant, so Postgres never reads a zoneless time in its own session's zone.
      const instants = values.map((v) => isoInstant(v));
      if (instants.some((t) => t === null)) throw new BadRequestError(`${at}.value: ${f.field} compares with ISO 8601 timestamps (e.g. 2024-05-01T12:00:00Z).`);
      if (instants.some((t) => t! < firstInstant)) throw new NotEvaluated(`a ${f.field} before year 1 is not evaluated by the mirror`);
      const iso = instants.map((t) => isoMicros(t!));
      return { field: f.field, operator: f.operator, value: Array.isArray(f.value) ? iso : iso[0]! };
    }
    return { field: f.field, operator: f.operator, value: f.value };
  });
}

/** The caller's order keys, all forms in order, checked. */
export function checkOrder(items: readonly Sourced[], def: ResourceDef): RecordOrder[] {
  if (items.length > maxOrderKeys) throw new BadRequestError(`At most ${maxOrderKeys} order_by keys (all forms together); this read has ${items.length}.`);
  return items.map(({ at, item }) => {
    const r = orderSchema.safeParse(item);
    if (!r.success) throw invalid(at, r.error);
    checkField(r.data.field, at, def);
    return { field: r.data.field, dir: r.data.dir ?? 'ASC' };
  });
}
