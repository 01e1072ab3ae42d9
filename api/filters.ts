// List filters (`filters=[{field, operator, value}]`, ANDed) validated against the resource's fields.
// mirror/record-filters.ts compiles them to parameterised SQL: values never reach the SQL text,
// fields only from the catalog (checked here).
import { z } from 'zod';
import { BadRequestError } from '../lib/errors.ts';
import type { ResourceDef } from '../lib/resources.ts';
import { filterOperators as operators, timeColumns, type RecordFilter } from '../mirror/record-filters.ts';

export { operators };

const scalar = z.union([z.string(), z.number(), z.boolean()]);
export const filterSchema = z.object({
  field: z.string().min(1),
  operator: z.string().transform((o) => o.toUpperCase().trim()).pipe(z.enum(operators, { message: `operator must be one of ${operators.join(', ')}` })),
  value: z.union([scalar, z.array(scalar)]),
});
export const filtersSchema = z.array(filterSchema).max(20, 'at most 20 filters');
export type Filter = z.infer<typeof filterSchema>;

const isoTimestamp = z.union([z.iso.datetime({ offset: true, local: true }), z.iso.date()]);

/** The caller's filters, checked against the resource's fields: what mirror/record-filters.ts compiles. */
export function parseFilters(raw: string | undefined, def: ResourceDef): RecordFilter[] {
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
