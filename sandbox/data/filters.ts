// List filters (`{field, operator, value}`, ANDed) and order keys (`{field, dir}`), checked once per
// request and evaluated per record with the semantics the mirror's SQL has (the drop-in read rule,
// see lib/list-parameters.ts): time fields as instants, all-number values numerically, everything
// else as text compared by code point (what COLLATE "C" does), and SQL's treatment of null.
import { z } from 'zod';
import { BadRequestError } from '../../lib/errors.ts';
import { filterOperators, isoInstant, isTimeField, type FilterOperator } from '../../lib/list-parameters.ts';

type Scalar = string | number | boolean;

/** Where a filter or order key reads: a time field (as an instant), a record field, or a key of the raw source object. */
export type FieldRef = { kind: 'time'; name: string } | { kind: 'field'; name: string } | { kind: 'source'; key: string };

export interface Filter {
  field: string;
  operator: FilterOperator;
  value: Scalar | Scalar[];
  ref: FieldRef;
  /** Whether a record passes, given its value at `ref` (for a time field its instant, or null). */
  test(x: unknown): boolean;
}

export interface OrderKey {
  field: string;
  desc: boolean;
  ref: FieldRef;
}

/** Resolves a field name of a request to where it reads, or throws a 400 naming the field. */
export type FieldResolver = (field: string, where: string) => FieldRef;

/** Field names of a resource: its record fields, the two time fields, and `source_data.<key>`. */
export function fieldResolver(resource: string, fields: ReadonlySet<string>): FieldResolver {
  return (field, where) => {
    if (isTimeField(field)) return { kind: 'time', name: field };
    if (field.startsWith('source_data.')) {
      const key = field.slice('source_data.'.length);
      if (key === '') throw new BadRequestError(`${where}: source_data. needs a key of the source object, e.g. source_data.Name`);
      if (key.includes('.'))
        throw new BadRequestError(`${where}: ${field} reaches into a nested value; only top-level keys of source_data can be filtered or ordered on`);
      return { kind: 'source', key };
    }
    if (field !== 'source_data' && fields.has(field)) return { kind: 'field', name: field };
    throw new BadRequestError(`${where}: ${resource} has no field ${field}`);
  };
}

const filterSchema = z.strictObject({ field: z.string().min(1), operator: z.string(), value: z.unknown().optional() });
const orderSchema = z.strictObject({ field: z.string().min(1), dir: z.string().optional() });

function shapeError(where: string, expected: string, error: z.ZodError): BadRequestError {
  const issues = error.issues.map((i) => (i.path.length ? `${i.path.join('.')}: ${i.message}` : i.message)).join('; ');
  return new BadRequestError(`${where} must be ${expected}: ${issues}`);
}

function isScalar(v: unknown): v is Scalar {
  return typeof v === 'string' || typeof v === 'boolean' || (typeof v === 'number' && Number.isFinite(v));
}

/** A filter object of a request, checked: names what to fix in a 400 otherwise. */
export function compileFilter(raw: unknown, where: string, resolve: FieldResolver): Filter {
  const parsed = filterSchema.safeParse(raw);
  if (!parsed.success) throw shapeError(where, 'an object {field, operator, value}', parsed.error);
  const { field } = parsed.data;
  if (!('value' in (raw as object))) throw new BadRequestError(`${where}: value is required`);
  const value = parsed.data.value;
  const operator = parsed.data.operator.trim().toUpperCase() as FilterOperator;
  if (!(filterOperators as readonly string[]).includes(operator)) {
    throw new BadRequestError(`${where}: unknown operator ${JSON.stringify(parsed.data.operator)}; use one of ${filterOperators.join(', ')}`);
  }
  const ref = resolve(field, where);
  const list = operator === 'IN' || operator === 'NOT IN' ? 'in' : operator === 'BETWEEN' || operator === 'NOT BETWEEN' ? 'between' : null;
  let values: Scalar[];
  if (list) {
    if (!Array.isArray(value)) throw new BadRequestError(`${where}: ${operator} takes an array of values`);
    if (list === 'in' && value.length === 0) throw new BadRequestError(`${where}: ${operator} takes at least one value`);
    if (list === 'between' && value.length !== 2) throw new BadRequestError(`${where}: ${operator} takes exactly two values [from, to]`);
    if (!value.every(isScalar)) throw new BadRequestError(`${where}: the values of ${operator} must be strings, numbers or booleans`);
    values = value;
  } else {
    if (!isScalar(value)) throw new BadRequestError(`${where}: ${operator} takes one value: a string, number or boolean`);
    values = [value];
  }
  const like = operator.endsWith('LIKE');
  let test: (x: unknown) => boolean;
  if (ref.kind === 'time') {
    if (like) throw new BadRequestError(`${where}: ${operator} does not apply to ${field}, a time; compare it with =, <, >, BETWEEN ...`);
    const instants = values.map((v) => isoInstant(v));
    if (instants.some((t) => t === null))
      throw new BadRequestError(`${where}: ${field} is a time: its values must be ISO 8601 strings, e.g. 2024-01-31T00:00:00Z`);
    test = comparison(operator, instants as number[], (x) => (typeof x === 'number' ? x : null), compareNumbers);
  } else if (like) {
    const match = likeMatcher(String(textOf(values[0]!)), operator.includes('ILIKE'), where);
    const negate = operator.startsWith('NOT');
    test = (x) => {
      const t = textOf(x);
      return t !== null && match(t) !== negate;
    };
  } else if (values.every((v) => typeof v === 'number')) {
    test = comparison(operator, values, (x) => (typeof x === 'number' ? x : null), compareNumbers);
  } else {
    test = comparison(
      operator,
      values.map((v) => textOf(v)!),
      textOf,
      compareText,
    );
  }
  return { field, operator, value: list ? values : values[0]!, ref, test };
}

/** An order key of a request, checked. */
export function compileOrderKey(raw: unknown, where: string, resolve: FieldResolver): OrderKey {
  const parsed = orderSchema.safeParse(raw);
  if (!parsed.success) throw shapeError(where, 'an object {field, dir}', parsed.error);
  const dir = (parsed.data.dir ?? 'ASC').trim().toUpperCase();
  if (dir !== 'ASC' && dir !== 'DESC') throw new BadRequestError(`${where}: dir must be ASC or DESC, not ${JSON.stringify(parsed.data.dir)}`);
  return { field: parsed.data.field, desc: dir === 'DESC', ref: resolve(parsed.data.field, where) };
}

/**
 * A record value as text: a string itself, a boolean `true`/`false`, a number its JSON text; null,
 * missing, objects and arrays have none (SQL null).
 */
function textOf(x: unknown): string | null {
  if (typeof x === 'string') return x;
  if (typeof x === 'boolean') return x ? 'true' : 'false';
  if (typeof x === 'number') return Number.isFinite(x) ? JSON.stringify(x) : null;
  return null;
}

function compareNumbers(a: number, b: number): number {
  return a < b ? -1 : a > b ? 1 : 0;
}

/** A surrogate (a code point above U+FFFF) sorts after every other UTF-16 unit, as its code point does. */
function fixup(c: number): number {
  return c >= 0xe000 ? c - 0x800 : c + 0x2000;
}

/** Texts by code point: the order of their UTF-8 bytes, which is COLLATE "C"'s. */
export function compareText(a: string, b: string): number {
  const n = Math.min(a.length, b.length);
  for (let i = 0; i < n; i++) {
    let x = a.charCodeAt(i);
    let y = b.charCodeAt(i);
    if (x !== y) {
      if (x >= 0xd800 && y >= 0xd800) {
        x = fixup(x);
        y = fixup(y);
      }
      return x < y ? -1 : 1;
    }
  }
  return a.length - b.length;
}

/**
 * One comparison operator over values of one kind. A record whose value has no such kind (null)
 * passes only `!=` (IS DISTINCT FROM); every other operator, NOT IN and NOT BETWEEN included, fails.
 */
function comparison<T>(operator: FilterOperator, vs: T[], of: (x: unknown) => T | null, cmp: (a: T, b: T) => number): (x: unknown) => boolean {
  const v = vs[0]!;
  const w = vs[1]!;
  const within = (x: T) => cmp(x, v) >= 0 && cmp(x, w) <= 0;
  const among = (x: T) => vs.some((u) => cmp(x, u) === 0);
  const test: (x: T) => boolean = (() => {
    switch (operator) {
      case '=':
        return (x: T) => cmp(x, v) === 0;
      case '!=':
        return (x: T) => cmp(x, v) !== 0;
      case '>':
        return (x: T) => cmp(x, v) > 0;
      case '>=':
        return (x: T) => cmp(x, v) >= 0;
      case '<':
        return (x: T) => cmp(x, v) < 0;
      case '<=':
        return (x: T) => cmp(x, v) <= 0;
      case 'IN':
        return among;
      case 'NOT IN':
        return (x: T) => !among(x);
      case 'BETWEEN':
        return within;
      case 'NOT BETWEEN':
        return (x: T) => !within(x);
      default:
        throw new Error(`not a comparison: ${operator}`);
    }
  })();
  const nullPasses = operator === '!=';
  return (raw) => {
    const x = of(raw);
    return x === null ? nullPasses : test(x);
  };
}

/** ASCII letters only, as Postgres folds them under COLLATE "C". */
function foldAscii(s: string): string {
  return /[A-Z]/.test(s) ? s.replace(/[A-Z]+/g, (m) => m.toLowerCase()) : s;
}

/** A LIKE pattern as a test: `%` any run, `_` one character, `\` takes the next character as it is. */
function likeMatcher(pattern: string, fold: boolean, where: string): (text: string) => boolean {
  const p = fold ? foldAscii(pattern) : pattern;
  let source = '';
  const chars = Array.from(p);
  for (let i = 0; i < chars.length; i++) {
    const c = chars[i]!;
    if (c === '\\') {
      if (i + 1 >= chars.length) throw new BadRequestError(`${where}: the LIKE pattern ends with an escape character (\\); write \\\\ for a backslash`);
      source += escapeRegExp(chars[++i]!);
    } else if (c === '%') source += '.*';
    else if (c === '_') source += '.';
    else source += escapeRegExp(c);
  }
  const re = new RegExp(`^${source}$`, 'su');
  return fold ? (t) => re.test(foldAscii(t)) : (t) => re.test(t);
}

function escapeRegExp(c: string): string {
  return /[.*+?^${}()|[\]\\/]/.test(c) ? `\\${c}` : c;
}

const high = /[\uD800-\uFFFF]/;
const highAll = /[\uD800-\uFFFF]/g;

/** A text whose UTF-16 order is its code-point order (`compareText`'s), for a native comparison. */
function codePointOrdered(t: string): string {
  return high.test(t) ? t.replace(highAll, (c) => String.fromCharCode(fixup(c.charCodeAt(0)))) : t;
}

/** Whether every filter passes, given how to read a record's value at a field. */
export function passes(filters: readonly Filter[], valueOf: (ref: FieldRef) => unknown): boolean {
  for (const f of filters) if (!f.test(valueOf(f.ref))) return false;
  return true;
}

/** Time filters read only a record's two timestamps, which the dataset has without making the record. */
export function timeOnly(filters: readonly Filter[]): boolean {
  return filters.every((f) => f.ref.kind === 'time');
}

/** The instant of a record's time value (ISO text), or null. */
export function instantOf(raw: unknown): number | null {
  if (typeof raw !== 'string') return null;
  const t = Date.parse(raw);
  return Number.isNaN(t) ? null : t;
}

/** Whether a record's timestamps pass every (time) filter. `times` holds ISO strings or null. */
export function matchesFilters(filters: readonly Filter[], times: Record<string, string | null>): boolean {
  for (const f of filters) {
    const name = f.ref.kind === 'time' ? f.ref.name : '';
    if (!f.test(instantOf(times[name] ?? null))) return false;
  }
  return true;
}

/**
 * A record's place under the order keys: per key its class (0 numbers and instants, 1 text, 2 null,
 * objects and arrays: always ascending) then its value within the class, flat: [class, value, ...].
 */
export type SortKey = Array<number | string | null>;

export function sortKeyOf(keys: readonly OrderKey[], valueOf: (ref: FieldRef) => unknown): SortKey {
  const key: SortKey = new Array<number | string | null>(keys.length * 2);
  for (let k = 0; k < keys.length; k++) {
    const x = valueOf(keys[k]!.ref);
    if (typeof x === 'number' && Number.isFinite(x)) {
      key[2 * k] = 0;
      key[2 * k + 1] = x;
    } else if (typeof x === 'string' || typeof x === 'boolean') {
      key[2 * k] = 1;
      key[2 * k + 1] = codePointOrdered(textOf(x)!);
    } else {
      key[2 * k] = 2;
      key[2 * k + 1] = null;
    }
  }
  return key;
}

/** Orders two records by the keys; 0 leaves them in the list's own order. */
export function compareSortKeys(keys: readonly OrderKey[], a: SortKey, b: SortKey): number {
  for (let k = 0; k < keys.length; k++) {
    const ca = a[2 * k] as number;
    const cb = b[2 * k] as number;
    if (ca !== cb) return ca - cb;
    if (ca === 2) continue;
    const va = a[2 * k + 1]!;
    const vb = b[2 * k + 1]!;
    // Texts were made code-point ordered (sortKeyOf): the native comparison is the right one.
    const c = va < vb ? -1 : va > vb ? 1 : 0;
    if (c !== 0) return keys[k]!.desc ? -c : c;
  }
  return 0;
}
