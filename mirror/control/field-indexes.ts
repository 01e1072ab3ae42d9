// Expression indexes for the fields the operator lists in MIRROR_INDEXED_FIELDS (lib/indexed-fields.ts),
// created by `mirror migrate`. Each is built on the resource's partition of `records` over
// (account_id, <the field's expression>), where the expression is taken from the filter compiler
// itself (record-filters.ts filtersSql, its parameters written as literals), so it is the very
// expression a list's or an aggregate's filter compares: the planner matches an index only on an
// identical expression, and the text expression carries COLLATE "C", so its btree also serves LIKE
// prefixes. Why at migrate, not at API or worker start: CREATE INDEX CONCURRENTLY on a large
// partition takes minutes and must not run in several starting processes at once, and DDL belongs
// with the step an operator runs on deploy (it holds its own advisory lock here).
import { createHash } from 'node:crypto';
import pg from 'pg';
import type { IndexedField } from '../../lib/indexed-fields.ts';
import { sqlName } from '../../lib/resources.ts';
import { filtersSql } from '../reads/record-filters.ts';

/** Serialises concurrent runs (distinct from the migrations' lock, which is released by then). */
const FIELD_INDEX_LOCK = 72707370;

/** Every index this file manages starts with this; others are never touched. */
export const fieldIndexPrefix = 'mirror_fx_';

const literal = (v: unknown) => `'${String(v).replace(/'/g, "''")}'`;

/** The expression filters compare for this field, as SQL text with literals for its parameters. */
function fieldExpression(f: Pick<IndexedField, 'field' | 'kind'>): string {
  const isTime = f.field === 'source_create_time' || f.field === 'source_update_time';
  const sample = f.kind === 'number' ? 0 : isTime ? '2000-01-01T00:00:00Z' : '';
  const { sql, params } = filtersSql([{ field: f.field, operator: '=', value: sample }], 1, new Set([f.field]));
  const cast = isTime ? '::timestamptz' : f.kind === 'number' ? '::numeric' : '::text';
  const tail = ` = $${params.length}${cast}`;
  if (!sql.endsWith(tail)) throw new Error(`record-filters.ts compiles ${f.field} = <value> in a form field-indexes.ts does not know: ${sql}`);
  return sql.slice(0, -tail.length).replace(/\$(\d+)/g, (_m, n: string) => literal(params[Number(n) - 1]));
}

interface FieldIndexPlan {
  field: IndexedField;
  name: string;
  table: string;
  /** `CREATE INDEX CONCURRENTLY IF NOT EXISTS ...` */
  create: string;
}

/** The index of one field on its table (the resource's partition; records_default, partially, for a resource without one). */
function fieldIndexPlan(f: IndexedField, ownPartition: boolean): FieldIndexPlan {
  const table = ownPartition ? `records_${sqlName(f.resource)}` : 'records_default';
  const expression = fieldExpression(f);
  const where = ownPartition ? '' : ` WHERE resource = ${literal(f.resource)}`;
  // The name carries a digest of the whole definition: a definition that changes (a new expression
  // after an upgrade) is a new index, and the old one is dropped as unlisted.
  const digest = createHash('sha256').update(`${table}\n${expression}\n${where}`).digest('hex').slice(0, 12);
  const name = `${fieldIndexPrefix}${sqlName(f.resource).slice(0, 36)}_${digest}`;
  return { field: f, name, table, create: `CREATE INDEX CONCURRENTLY IF NOT EXISTS "${name}" ON "${table}" (account_id, (${expression}))${where}` };
}

interface FieldIndexResult {
  created: string[];
  kept: string[];
  dropped: string[];
}

/**
 * Makes the mirror's field indexes exactly those listed: creates the missing ones (CONCURRENTLY:
 * writes go on), rebuilds one a failed build left invalid, drops those no longer listed, and
 * analyzes each table that got one (so the planner has the expression's statistics).
 */
export async function applyFieldIndexes(
  databaseUrl: string,
  fields: readonly IndexedField[],
  log: (line: string) => void = () => undefined,
): Promise<FieldIndexResult> {
  const client = new pg.Client({ connectionString: databaseUrl });
  await client.connect();
  const result: FieldIndexResult = { created: [], kept: [], dropped: [] };
  try {
    await client.query('SELECT pg_advisory_lock($1)', [FIELD_INDEX_LOCK]);
    const { rows: partitions } = await client.query<{ name: string }>(
      `SELECT c.relname AS name FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid WHERE i.inhparent = 'records'::regclass`,
    );
    const tables = new Set(partitions.map((p) => p.name));
    const plans = fields.map((f) => fieldIndexPlan(f, tables.has(`records_${sqlName(f.resource)}`)));
    const { rows: existing } = await client.query<{ name: string; valid: boolean }>(
      `SELECT c.relname AS name, i.indisvalid AS valid FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid
        WHERE c.relnamespace = current_schema()::regnamespace AND starts_with(c.relname, $1)`,
      [fieldIndexPrefix],
    );
    const have = new Map(existing.map((r) => [r.name, r.valid]));
    const analyze = new Set<string>();
    for (const plan of plans) {
      const valid = have.get(plan.name);
      if (valid === true) {
        result.kept.push(plan.name);
        continue;
      }
      // A concurrent build that failed (or was interrupted) leaves an invalid index IF NOT EXISTS would keep.
      if (valid === false) await client.query(`DROP INDEX CONCURRENTLY IF EXISTS "${plan.name}"`);
      log(`creating ${plan.name} on ${plan.table} for ${plan.field.resource}.${plan.field.field}${plan.field.kind === 'number' ? ':number' : ''} ...`);
      await client.query(plan.create);
      result.created.push(plan.name);
      analyze.add(plan.table);
    }
    const wanted = new Set(plans.map((p) => p.name));
    for (const { name } of existing) {
      if (wanted.has(name)) continue;
      log(`dropping ${name} (no longer in MIRROR_INDEXED_FIELDS) ...`);
      await client.query(`DROP INDEX CONCURRENTLY IF EXISTS "${name}"`);
      result.dropped.push(name);
    }
    for (const table of analyze) await client.query(`ANALYZE "${table}"`);
    return result;
  } finally {
    await client.query('SELECT pg_advisory_unlock($1)', [FIELD_INDEX_LOCK]).catch(() => undefined);
    await client.end();
  }
}
