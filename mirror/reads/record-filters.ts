// List filters and orderings compiled to SQL on `records`, beside the reads that use them, with the
// semantics of the drop-in read rule (the sandbox evaluates the same in JavaScript): a field is a
// time column, a key of the record (`data`) or a key of its raw source object (`source_data.<key>`).
// Everything the caller chose is a parameter: values and field names alike (`data->$n`), so no
// caller's text ever reaches the SQL; only the two time column names do, from the table below.
export const filterOperators = ['=', '!=', '>', '>=', '<', '<=', 'LIKE', 'NOT LIKE', 'ILIKE', 'NOT ILIKE', 'IN', 'NOT IN', 'BETWEEN', 'NOT BETWEEN'] as const;
type FilterOperator = (typeof filterOperators)[number];
type FilterValue = string | number | boolean;

/**
 * One predicate of a list (ANDed). `field` is a time field, a key of the record, or
 * `source_data.<key>`. A time field's values are ISO 8601 instants (api/filters.ts normalises them).
 */
export interface RecordFilter {
  field: string;
  operator: FilterOperator;
  value: FilterValue | FilterValue[];
}

/** One key of a list's order (`order_by`); ties go to the next key, then to the list's own order. */
export interface RecordOrder {
  field: string;
  dir: 'ASC' | 'DESC';
}

/** Fields that are columns of `records` (typed timestamps, ms precision), not keys of `data`. */
export const timeColumns: Readonly<Record<string, string>> = { source_update_time: 'source_update_time', source_create_time: 'source_create_time' };

export const sourceDataPrefix = 'source_data.';

/**
 * The raw source object of a record: `source_data` is either that object itself (projects) or the
 * wrapper `{path, content_type, data}` around it (the rule of api/source-data.ts reshape). The
 * expression indexes of MIRROR_INDEXED_FIELDS are built on this text (field-indexes.ts): changing it
 * rebuilds every operator's index at the next migrate, so it stays as it is.
 */
const rawSource = `(CASE WHEN jsonb_typeof(source_data) = 'object' AND source_data ? 'data' AND (source_data ? 'content_type' OR source_data ? 'path') THEN source_data->'data' ELSE source_data END)`;

/**
 * The same object for a key's lookup (`->key`, `->>key`) without an index: the type test left out,
 * one call of four a record. It changes no lookup: for an array or a scalar `source_data`, both
 * branches give NULL for a key. Measured on 200k wrapped objects (a count of `->>key = value`):
 * 160 ms against 171 with the test, 151 for the raw SQL `source_data->'data'->>key`.
 */
const rawSourceForKey = `(CASE WHEN source_data ? 'data' AND (source_data ? 'content_type' OR source_data ? 'path') THEN source_data->'data' ELSE source_data END)`;

export type Param = (value: unknown) => string;

/** The field's JSON value (NULL when missing). Time fields: the text the record carries. */
export function jsonOf(field: string, p: Param): string {
  if (field.startsWith(sourceDataPrefix)) return `(${rawSource}->${p(field.slice(sourceDataPrefix.length))}::text)`;
  return `(data->${p(field)}::text)`;
}

/** A JSON value as text: strings themselves, numbers their JSON text, booleans true/false; else NULL. */
const textOf = (x: string) => `(CASE WHEN jsonb_typeof(${x}) IN ('string', 'number', 'boolean') THEN ${x} #>> '{}' END)`;
/** A JSON number as a number; anything else NULL. */
const numberOf = (x: string) => `(CASE WHEN jsonb_typeof(${x}) = 'number' THEN (${x} #>> '{}')::numeric END)`;

/** A field's JSON value and its text (`->>`: a scalar's text, an object's or array's JSON text), one key parameter for both. */
export function fieldRef(field: string, p: Param): { json: string; text: string } {
  const source = field.startsWith(sourceDataPrefix);
  const parent = source ? rawSourceForKey : 'data';
  const key = p(source ? field.slice(sourceDataPrefix.length) : field);
  return { json: `(${parent}->${key}::text)`, text: `(${parent}->>${key}::text)` };
}

/**
 * A text comparison `pred` of a field's text (textOf), evaluated on `->>` first: one lookup per row,
 * and the value's type asked only when the text compares true. textOf is the `->>` text for a
 * string, number or boolean and NULL otherwise, so `pred(textOf(x))` is `pred(t)` for a scalar and
 * `pred(NULL)` for anything else; `nullTrue` says whether `pred(NULL)` holds (IS DISTINCT FROM, an
 * empty NOT IN). Measured on 200k wrapped source objects (a page of 100 of 404 scanned): the textOf
 * form evaluated the wrapper and the key twice a row, 1.95 us a row against 0.87 for the raw SQL
 * `source_data->'data'->>key`; this form about the raw SQL's. A CASE, not an AND: Postgres may
 * reorder ANDed quals, and their product misestimates a page's matches (it chose a full sort of the
 * list over the ordered index, 176 ms for a page).
 */
function textPredicate(ref: { json: string; text: string }, pred: (t: string) => string, nullTrue: boolean, onlyScalars: boolean): string {
  const compared = pred(`${ref.text} COLLATE "C"`);
  if (onlyScalars) return compared;
  const scalar = `jsonb_typeof(${ref.json}) IN ('string', 'number', 'boolean')`;
  return nullTrue ? `(CASE WHEN ${compared} THEN true ELSE NOT coalesce(${scalar}, false) END)` : `(CASE WHEN ${compared} THEN ${scalar} ELSE false END)`;
}

/** A value whose text could be an object's or an array's JSON text. */
const nonScalarText = (v: FilterValue): boolean => typeof v === 'string' && (v.startsWith('{') || v.startsWith('['));

/**
 * Whether a text comparison can hold only for a scalar, so textPredicate needs no type test: `->>`
 * gives NULL for a JSON null and an object's or array's JSON text, which begins with `{` or `[`; so
 * `=` and `IN` with no value beginning so, and a LIKE or ILIKE pattern whose first character is a
 * literal other than those, never hold for one. The test (the field's JSON looked up again for each
 * record that compares true) was a quarter of a filtered page's expression time.
 */
function onlyScalarsMatch(operator: FilterOperator, values: readonly FilterValue[]): boolean {
  if (operator === '=' || operator === 'IN') return values.length > 0 && !values.some(nonScalarText);
  if (operator === 'LIKE' || operator === 'ILIKE') return /^[^%_\\{[]/.test(String(values[0]));
  return false;
}

/**
 * SQL for the filters, with placeholders from $offset on. A text comparison of a field in `indexed`
 * (it has an expression index, MIRROR_INDEXED_FIELDS) compares the indexed expression itself
 * (mirror/control/field-indexes.ts), which the planner matches; others the cheaper form of textPredicate.
 */
export function filtersSql(filters: readonly RecordFilter[], offset: number, indexed?: ReadonlySet<string>): { sql: string; params: readonly unknown[] } {
  return compileFilters(filters, offset, indexed);
}

/**
 * Filters compiled, by the filters' array (a reader holds one): a read plan is kept for repeated reads
 * (api/read-plan.ts) and not changed after it is made, so its filters compile once (~10 us of a filtered
 * page's API CPU, bench [11]), for the last placeholder offset and index set they were compiled with, and
 * only while the array holds the same filter objects.
 */
export class CompiledFilters {
  readonly #compiled = new WeakMap<
    readonly RecordFilter[],
    { offset: number; indexed: ReadonlySet<string> | undefined; items: readonly RecordFilter[]; result: { sql: string; params: readonly unknown[] } }
  >();

  /** {@link filtersSql}, compiled once for a plan's filters. */
  sql(filters: readonly RecordFilter[], offset: number, indexed?: ReadonlySet<string>): { sql: string; params: readonly unknown[] } {
    const known = this.#compiled.get(filters);
    if (
      known !== undefined &&
      known.offset === offset &&
      known.indexed === indexed &&
      known.items.length === filters.length &&
      known.items.every((f, i) => f === filters[i])
    )
      return known.result;
    const result = compileFilters(filters, offset, indexed);
    this.#compiled.set(filters, { offset, indexed, items: [...filters], result });
    return result;
  }
}

function compileFilters(filters: readonly RecordFilter[], offset: number, indexed?: ReadonlySet<string>): { sql: string; params: readonly unknown[] } {
  const params: unknown[] = [];
  const p: Param = (v) => {
    params.push(v);
    return `$${offset + params.length - 1}`;
  };
  const parts = filters.map((f) => {
    const values = [f.value].flat();
    const time = timeColumns[f.field];
    const like = f.operator.endsWith('LIKE');
    const numeric = !like && !time && values.every((v) => typeof v === 'number');
    const cast = like ? '::text' : time ? '::timestamptz' : numeric ? '::numeric' : '::text';
    const asParam = (value: unknown) => (typeof value === 'boolean' ? String(value) : value);
    const v = (value: unknown) => `${p(asParam(value))}${cast}`;
    // The operator applied to the field's expression `x`, whichever form `x` takes.
    const compare = (x: string): string => {
      switch (f.operator) {
        case 'LIKE':
        case 'NOT LIKE':
        case 'ILIKE':
        case 'NOT ILIKE':
          // A pattern matches the field's text (a time field's as the record carries it), binary
          // (COLLATE "C": ILIKE folds ASCII letters only), `\` escaping the next character.
          return `${x} ${f.operator} ${p(String(values[0]))}::text`;
        case 'IN':
          return `${x} = ANY(${p(values.map(asParam))}${cast}[])`;
        case 'NOT IN':
          return `${x} <> ALL(${p(values.map(asParam))}${cast}[])`;
        case 'BETWEEN':
        case 'NOT BETWEEN':
          return `${x} ${f.operator} ${v(values[0])} AND ${v(values[1])}`;
        case '!=':
          // A record without the value differs from it (IS DISTINCT FROM), as the upstream answers.
          return `${x} IS DISTINCT FROM ${v(values[0])}`;
        default:
          return `${x} ${f.operator} ${v(values[0])}`;
      }
    };
    // A text comparison of a field without an index: the cheaper form (IS DISTINCT FROM and an empty
    // NOT IN hold for a value that is no scalar).
    if (!indexed?.has(f.field) && (like || (!time && !numeric)))
      return textPredicate(
        fieldRef(f.field, p),
        compare,
        f.operator === '!=' || (f.operator === 'NOT IN' && values.length === 0),
        onlyScalarsMatch(f.operator, values),
      );
    return compare(time && !like ? time : numeric ? numberOf(jsonOf(f.field, p)) : `${textOf(jsonOf(f.field, p))} COLLATE "C"`);
  });
  return { sql: parts.join(' AND '), params };
}

interface OrderColumn {
  sql: string;
  dir: 'ASC' | 'DESC';
  /** A text compared binary (COLLATE "C"), wherever the column is sorted again. */
  collateC?: boolean;
}

/**
 * The sort expressions of an order: per key, its class first (always ascending: time values and
 * numbers, then strings and booleans as text, then null/missing/object/array), then its value within
 * the class in the key's direction (numbers numerically, times as instants, texts binary).
 */
export function orderSql(order: readonly RecordOrder[], offset: number): { columns: OrderColumn[]; params: unknown[] } {
  const params: unknown[] = [];
  const p: Param = (v) => {
    params.push(v);
    return `$${offset + params.length - 1}`;
  };
  const columns: OrderColumn[] = [];
  for (const o of order) {
    const time = timeColumns[o.field];
    if (time) {
      columns.push({ sql: `(CASE WHEN ${time} IS NULL THEN 2 ELSE 0 END)`, dir: 'ASC' }, { sql: time, dir: o.dir });
      continue;
    }
    const x = jsonOf(o.field, p);
    columns.push(
      { sql: `(CASE jsonb_typeof(${x}) WHEN 'number' THEN 0 WHEN 'string' THEN 1 WHEN 'boolean' THEN 1 ELSE 2 END)`, dir: 'ASC' },
      { sql: numberOf(x), dir: o.dir },
      { sql: `(CASE WHEN jsonb_typeof(${x}) IN ('string', 'boolean') THEN ${x} #>> '{}' END) COLLATE "C"`, dir: o.dir, collateC: true },
    );
  }
  return { columns, params };
}
