// List filters (`filters=[{field, operator, value}]`, ANDed) validated against the resource's fields
// and compiled to parameterised SQL: values never reach the SQL text, fields only from the catalog.
import { z } from 'zod';
import { BadRequestError } from '../lib/errors.ts';
import type { ResourceDef } from '../lib/resources.ts';

export const operators = ['=', '!=', '>', '>=', '<', '<=', 'LIKE', 'NOT LIKE', 'ILIKE', 'NOT ILIKE', 'IN', 'NOT IN', 'BETWEEN', 'NOT BETWEEN'] as const;

const scalar = z.union([z.string(), z.number(), z.boolean()]);
export const filterSchema = z.object({
  field: z.string().min(1),
  operator: z.string().transform((o) => o.toUpperCase().trim()).pipe(z.enum(operators, { message: `operator must be one of ${operators.join(', ')}` })),
  value: z.union([scalar, z.array(scalar)]),
});
export const filtersSchema = z.array(filterSchema).max(20, 'at most 20 filters');
export type Filter = z.infer<typeof filterSchema>;

const isoTimestamp = z.union([z.iso.datetime({ offset: true, local: true }), z.iso.date()]);

const timeColumns: Record<string, string> = { source_update_time: 'source_update_time', source_create_time: 'source_create_time' };

export function parseFilters(raw: string | undefined, def: ResourceDef): Filter[] {
  if (raw === undefined || raw === '') return [];
  let json: unknown;
  try {
    json = JSON.parse(raw);
  } catch {
    throw new BadRequestError('filters must be a JSON array of {field, operator, value} objects.');
  }
  const r = filtersSchema.safeParse(json);
  if (!r.success) {
    const details = r.error.issues.map((i) => ({ path: `filters.${i.path.join('.')}`, message: i.message }));
    throw new BadRequestError(`Invalid filters: ${details.map((d) => `${d.path}: ${d.message}`).join('; ')}`, { details });
  }
  for (const [i, f] of r.data.entries()) {
    if (!def.fields.includes(f.field)) {
      throw new BadRequestError(`filters.${i}.field: ${def.name} has no field "${f.field.slice(0, 64)}"; filterable fields: ${def.fields.join(', ')}.`, { details: [{ path: `filters.${i}.field`, message: 'unknown field' }] });
    }
    const many = f.operator.endsWith('IN') || f.operator.endsWith('BETWEEN');
    if (many !== Array.isArray(f.value)) throw new BadRequestError(`filters.${i}.value: ${f.operator} takes ${many ? 'an array' : 'a single value'}.`);
    if (f.operator.endsWith('BETWEEN') && (f.value as unknown[]).length !== 2) throw new BadRequestError(`filters.${i}.value: BETWEEN takes exactly two values.`);
    // Backslash escapes the next character of a LIKE pattern: one at the very end escapes nothing.
    if (f.operator.endsWith('LIKE') && /(^|[^\\])(\\\\)*\\$/.test(String(f.value))) {
      throw new BadRequestError(`filters.${i}.value: a ${f.operator} pattern cannot end with a lone backslash (it escapes the next character; write \\\\ for a literal backslash).`);
    }
    // Strict ISO 8601: Date.parse alone accepts text such as "' OR '1'='1" (as 2001-01-01), which Postgres refuses.
    if (timeColumns[f.field] && [f.value].flat().some((v) => typeof v !== 'string' || !isoTimestamp.safeParse(v).success)) {
      throw new BadRequestError(`filters.${i}.value: ${f.field} compares with ISO 8601 timestamps.`);
    }
  }
  return r.data;
}

/** SQL for the filters, with placeholders from $offset on. */
export function filtersSql(filters: readonly Filter[], offset: number): { sql: string; params: unknown[] } {
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
