// The two SQL forms of a text filter (mirror/reads/record-filters.ts filtersSql) answer alike: the form a
// field's expression index serves (its text as textOf, compared) and the cheaper form every other
// field gets (`->>` compared first, the value's type asked only then). Evaluated by Postgres on the
// corners a generated list does not reach: objects and arrays whose JSON text equals the value,
// JSON null, a missing key, numbers, booleans, for a record's own field and a source object's, in
// the wrapper {path, content_type, data} and bare.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { createPool, type Pool } from '../../mirror/db/pool.ts';
import { filtersSql, type RecordFilter } from '../../mirror/reads/record-filters.ts';
import { createTestDatabase, type TestDatabase } from '../helpers/database.ts';

const values: unknown[] = ['a', 'b', 'A', '', '5', 5, 5.0, 1.5, true, false, null, { a: 1 }, [1], '{"a": 1}', '[1]', '%', 'é', 'a\nb'];

const filters: Omit<RecordFilter, 'field'>[] = [
  { operator: '=', value: 'a' },
  { operator: '=', value: '5' },
  { operator: '=', value: true },
  { operator: '=', value: '{"a": 1}' },
  { operator: '=', value: '[1]' },
  { operator: '!=', value: 'a' },
  { operator: '!=', value: '{"a": 1}' },
  { operator: '>', value: 'a' },
  { operator: '<=', value: 'b' },
  { operator: 'IN', value: ['a', '5'] },
  { operator: 'IN', value: ['{"a": 1}', 'x'] },
  { operator: 'NOT IN', value: ['a'] },
  { operator: 'NOT IN', value: ['[1]'] },
  { operator: 'BETWEEN', value: ['a', 'c'] },
  { operator: 'NOT BETWEEN', value: ['a', 'c'] },
  { operator: 'LIKE', value: '%' },
  { operator: 'LIKE', value: '{%' },
  { operator: 'NOT LIKE', value: 'a' },
  { operator: 'ILIKE', value: 'A%' },
  { operator: 'NOT ILIKE', value: '%' },
];

describe('the two forms of a text filter', () => {
  let db: TestDatabase;
  let pool: Pool;

  before(async () => {
    db = await createTestDatabase('mirror_filter_forms');
    pool = createPool(db.url, { max: 2, application: 'filter-forms' });
  });

  after(async () => {
    await pool?.end();
    await db?.drop();
  });

  /** The rows (by number) a filter keeps, in one form, over every corner value. */
  async function kept(filter: RecordFilter, indexed: boolean): Promise<{ sql: string; rows: number[] }> {
    const { sql, params } = filtersSql([filter], 2, indexed ? new Set([filter.field]) : undefined);
    const { rows } = await pool.query<{ n: number }>(
      `SELECT n FROM (SELECT n, data, source_data FROM jsonb_to_recordset($1::jsonb) AS t(n int, data jsonb, source_data jsonb)) r
        WHERE ${sql} ORDER BY n`,
      [rowsJson(), ...params],
    );
    return { sql, rows: rows.map((r) => r.n) };
  }

  /** Each value as a record's field, a wrapped source object's key and a bare one's; and one record without the key. */
  function rowsJson(): string {
    const out: { n: number; data: unknown; source_data: unknown }[] = [];
    let n = 0;
    for (const v of values) {
      out.push({ n: n++, data: { name: v }, source_data: { path: '/things', content_type: 'application/json', data: { name: v } } });
      out.push({ n: n++, data: { name: v }, source_data: { name: v } });
    }
    out.push({ n: n++, data: {}, source_data: { path: '/things', content_type: 'application/json', data: {} } });
    out.push({ n, data: {}, source_data: {} });
    return JSON.stringify(out);
  }

  for (const field of ['name', 'source_data.name']) {
    it(`keeps the same records in either form (${field})`, async () => {
      for (const f of filters) {
        const filter: RecordFilter = { ...f, field };
        const [fast, indexedForm] = [await kept(filter, false), await kept(filter, true)];
        assert.notEqual(fast.sql, indexedForm.sql, `two forms of ${f.operator}`);
        assert.deepEqual(fast.rows, indexedForm.rows, `${field} ${f.operator} ${JSON.stringify(f.value)}`);
      }
    });
  }
});
