// List filters compiled to SQL on `records`, beside the reads that use them: parameterised, so
// values never reach the SQL text; a field reaches it only once the API checked it against the
// catalog (api/filters.ts validates what a caller sends).
export const filterOperators = ['=', '!=', '>', '>=', '<', '<=', 'LIKE', 'NOT LIKE', 'ILIKE', 'NOT ILIKE', 'IN', 'NOT IN', 'BETWEEN', 'NOT BETWEEN'] as const;
export type FilterOperator = (typeof filterOperators)[number];
export type FilterValue = string | number | boolean;

/** One predicate of a list (`filters=[{field, operator, value}]`, ANDed). `field` is a catalog field. */
export interface RecordFilter {
  field: string;
  operator: FilterOperator;
  value: FilterValue | FilterValue[];
}

/** Fields that are columns of `records` (typed timestamps), not keys of `data`. */
export const timeColumns: Readonly<Record<string, string>> = { source_update_time: 'source_update_time', source_create_time: 'source_create_time' };

/** SQL for the filters, with placeholders from $offset on. */
export function filtersSql(filters: readonly RecordFilter[], offset: number): { sql: string; params: unknown[] } {
  const params: unknown[] = [];
  const p = (v: unknown) => {
    params.push(v);
    return `$${offset + params.length - 1}`;
  };
  const parts = filters.map((f) => {
    const values = [f.value].flat();
    const numeric = values.every((v) => typeof v === 'number');
    const col = timeColumns[f.field]
      ? timeColumns[f.field]!
      : numeric
        ? `(CASE WHEN jsonb_typeof(data->'${f.field}') = 'number' THEN (data->>'${f.field}')::numeric END)`
        : `(data->>'${f.field}')`;
    const cast = timeColumns[f.field] ? '::timestamptz' : numeric ? '::numeric' : '::text';
    const v = (x: unknown) => `${p(typeof x === 'boolean' ? String(x) : x)}${cast}`;
    switch (f.operator) {
      case 'IN':
      case 'NOT IN':
        return `${col} ${f.operator} (${values.map(v).join(', ')})`;
      case 'BETWEEN':
      case 'NOT BETWEEN':
        return `${col} ${f.operator} ${v(values[0])} AND ${v(values[1])}`;
      case 'LIKE':
      case 'NOT LIKE':
      case 'ILIKE':
      case 'NOT ILIKE':
        return `${col}::text ${f.operator} ${p(String(values[0]))}::text`;
      case '!=':
        return `${col} IS DISTINCT FROM ${v(values[0])}`;
      default:
        return `${col} ${f.operator} ${v(values[0])}`;
    }
  });
  return { sql: parts.join(' AND '), params };
}
