// List filters (`filters=[{field, operator, value}]`, ANDed) on the timestamps that support them.
import { z } from 'zod';
import { BadRequestError } from '../../lib/errors.ts';

export const filterOperators = ['=', '!=', '>', '>=', '<', '<=', 'LIKE', 'NOT LIKE', 'ILIKE', 'NOT ILIKE', 'IN', 'NOT IN', 'BETWEEN', 'NOT BETWEEN'] as const;
export const filterableFields = ['source_update_time', 'source_create_time'] as const;

export const filterSchema = z.object({
  field: z.string(),
  operator: z.string().transform((s) => s.toUpperCase()).pipe(z.enum(filterOperators)),
  value: z.unknown(),
});
export type Filter = z.infer<typeof filterSchema>;

export const filtersSchema = z.array(filterSchema);

/** Parses the `filters` query parameter (a JSON array); throws a 400 that says what to fix. */
export function parseFilters(raw: unknown): Filter[] {
  if (raw === undefined || raw === '') return [];
  let value: unknown = raw;
  if (typeof raw === 'string') {
    try {
      value = JSON.parse(raw);
    } catch {
      throw new BadRequestError('filters must be a JSON array of {field, operator, value}');
    }
  }
  const parsed = filtersSchema.safeParse(value);
  if (!parsed.success) throw new BadRequestError(`Invalid filters: ${parsed.error.issues.map((i) => `${i.path.join('.')}: ${i.message}`).join('; ')}`);
  for (const f of parsed.data) {
    if (!(filterableFields as readonly string[]).includes(f.field)) {
      throw new BadRequestError(`Filtering on ${f.field} is not supported; filterable fields: ${filterableFields.join(', ')}`);
    }
    const needsList = f.operator.endsWith('IN') || f.operator.endsWith('BETWEEN');
    if (needsList && !Array.isArray(f.value)) throw new BadRequestError(`${f.operator} needs an array value`);
    if (f.operator.endsWith('BETWEEN') && (f.value as unknown[]).length !== 2) throw new BadRequestError(`${f.operator} needs [from, to]`);
    if (!needsList && (typeof f.value !== 'string' && typeof f.value !== 'number')) throw new BadRequestError(`${f.operator} needs a string or number value`);
  }
  return parsed.data;
}

function asTime(v: unknown): number {
  if (typeof v === 'number') return v < 1e11 ? v * 1000 : v;
  const t = Date.parse(String(v));
  return Number.isNaN(t) ? NaN : t;
}

function likeToRegExp(pattern: string, flags: string): RegExp {
  const escaped = pattern.replace(/[.*+?^${}()|[\]\\]/g, '\\$&').replace(/%/g, '.*').replace(/_/g, '.');
  return new RegExp(`^${escaped}$`, flags);
}

/** Whether a record's timestamps pass every filter. `times` holds ISO strings or null. */
export function matchesFilters(filters: readonly Filter[], times: Record<string, string | null>): boolean {
  for (const f of filters) {
    const raw = times[f.field] ?? null;
    if (raw === null) return false;
    const t = Date.parse(raw);
    const op = f.operator;
    let ok: boolean;
    switch (op) {
      case '=':
        ok = t === asTime(f.value);
        break;
      case '!=':
        ok = t !== asTime(f.value);
        break;
      case '>':
        ok = t > asTime(f.value);
        break;
      case '>=':
        ok = t >= asTime(f.value);
        break;
      case '<':
        ok = t < asTime(f.value);
        break;
      case '<=':
        ok = t <= asTime(f.value);
        break;
      case 'IN':
        ok = (f.value as unknown[]).some((v) => asTime(v) === t);
        break;
      case 'NOT IN':
        ok = !(f.value as unknown[]).some((v) => asTime(v) === t);
        break;
      case 'BETWEEN': {
        const [a, b] = f.value as unknown[];
        ok = t >= asTime(a) && t <= asTime(b);
        break;
      }
      case 'NOT BETWEEN': {
        const [a, b] = f.value as unknown[];
        ok = !(t >= asTime(a) && t <= asTime(b));
        break;
      }
      case 'LIKE':
        ok = likeToRegExp(String(f.value), '').test(raw);
        break;
      case 'NOT LIKE':
        ok = !likeToRegExp(String(f.value), '').test(raw);
        break;
      case 'ILIKE':
        ok = likeToRegExp(String(f.value), 'i').test(raw);
        break;
      case 'NOT ILIKE':
        ok = !likeToRegExp(String(f.value), 'i').test(raw);
        break;
    }
    if (!ok) return false;
  }
  return true;
}
