// The SQL pass-through of SQL-backed systems (read-only): COUNT, SELECT, SELECT DISTINCT over the
// generated rows of a table, with filters, ordering, paging and projection.
import { asText } from '../data/as-text.ts';
import { z } from 'zod';
import type { LinkedAccount } from '../auth-and-link/accounts.ts';
import type { SandboxContext } from '../context.ts';
import { isTopLevel } from '../data/catalog.ts';
import type { Fields } from '../data/generators.ts';
import { nativeName, nativeResourceOf, rawObject } from '../data/raw-source.ts';

const sqlOperators = ['=', '!=', '<>', '<=>', '<', '<=', '>', '>=', 'LIKE', 'NOT LIKE', 'ILIKE', 'NOT ILIKE'] as const;

export const sqlPassthroughSchema = z.object({
  table: z.string().min(1),
  operation: z.enum(['COUNT', 'SELECT', 'SELECT DISTINCT']),
  filters: z.array(z.object({ field: z.string(), operator: z.enum(sqlOperators), value: z.unknown() })).default([]),
  limit: z.number().int().positive().max(100_000).optional(),
  offset: z.number().int().nonnegative().default(0),
  order_by: z.array(z.object({ field: z.string(), dir: z.enum(['ASC', 'DESC']).default('ASC') })).default([]),
  fields: z.array(z.string()).optional(),
});
type SqlPassthrough = z.infer<typeof sqlPassthroughSchema>;

export interface SourceAnswer {
  status: number;
  body: unknown;
  path: string;
  contentType: string;
}

function like(pattern: string, value: string, flags: string): boolean {
  const re = new RegExp(
    `^${pattern
      .replace(/[.*+?^${}()|[\]\\]/g, '\\$&')
      .replace(/%/g, '.*')
      .replace(/_/g, '.')}$`,
    flags,
  );
  return re.test(value);
}

function compare(a: unknown, b: unknown): number {
  if (typeof a === 'number' && typeof b === 'number') return a - b;
  return asText(a).localeCompare(asText(b));
}

function test(row: Fields, f: SqlPassthrough['filters'][number]): boolean {
  const v = row[f.field];
  switch (f.operator) {
    case '=':
      return v === f.value || asText(v) === asText(f.value);
    case '!=':
    case '<>':
      return v !== null && v !== undefined && asText(v) !== asText(f.value);
    case '<=>':
      return (v ?? null) === (f.value ?? null) || asText(v) === asText(f.value);
    case '<':
      return compare(v, f.value) < 0;
    case '<=':
      return compare(v, f.value) <= 0;
    case '>':
      return compare(v, f.value) > 0;
    case '>=':
      return compare(v, f.value) >= 0;
    case 'LIKE':
      return like(asText(f.value), asText(v), '');
    case 'NOT LIKE':
      return !like(asText(f.value), asText(v), '');
    case 'ILIKE':
      return like(asText(f.value), asText(v), 'i');
    case 'NOT ILIKE':
      return !like(asText(f.value), asText(v), 'i');
  }
}

export function runSql(ctx: SandboxContext, account: LinkedAccount, q: SqlPassthrough): SourceAnswer {
  const profile = account.profile;
  const resource = nativeResourceOf(profile, q.table);
  const query = `${q.operation === 'COUNT' ? 'SELECT COUNT(*)' : `${q.operation} ${q.fields?.join(', ') ?? '*'}`} FROM ${q.table}${q.filters.length ? ` WHERE ${q.filters.map((f) => `${f.field} ${f.operator} ${JSON.stringify(f.value)}`).join(' AND ')}` : ''}`;
  if (!resource || !isTopLevel(resource)) {
    return {
      status: 400,
      body: {
        error: `Invalid object name '${q.table}'. Tables: ${Object.keys(profile.resources)
          .filter(isTopLevel)
          .map((r) => nativeName(profile, r))
          .join(', ')}`,
      },
      path: query,
      contentType: 'application/json',
    };
  }
  const scope = { company: 0, project: null, parent: null };
  const limit = q.limit ?? 1000;
  let rows: Fields[];
  const simple = q.filters.length === 0 && q.order_by.length === 0 && q.operation === 'SELECT';
  if (simple) {
    // No filter or order: read just the page asked for.
    rows = ctx.dataset.list(account, resource, [scope], { offset: q.offset, limit }).items.map((f) => rawObject(profile, resource, f));
  } else {
    rows = ctx.dataset.all(account, resource, scope).map((f) => rawObject(profile, resource, f));
    rows = rows.filter((r) => q.filters.every((f) => test(r, f)));
    if (q.operation === 'COUNT') return { status: 200, body: { count: rows.length }, path: query, contentType: 'application/json' };
    if (q.order_by.length) {
      rows.sort((a, b) => {
        for (const o of q.order_by) {
          const c = compare(a[o.field], b[o.field]);
          if (c !== 0) return o.dir === 'DESC' ? -c : c;
        }
        return 0;
      });
    }
  }
  if (q.fields) rows = rows.map((r) => Object.fromEntries(q.fields!.map((f) => [f, r[f] ?? null])));
  if (q.operation === 'SELECT DISTINCT') {
    const seen = new Set<string>();
    rows = rows.filter((r) => {
      const k = JSON.stringify(r);
      if (seen.has(k)) return false;
      seen.add(k);
      return true;
    });
  }
  if (!simple) rows = rows.slice(q.offset, q.offset + limit);
  return { status: 200, body: rows, path: query, contentType: 'application/json' };
}
