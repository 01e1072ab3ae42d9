// MIRROR_INDEXED_FIELDS: `mirror migrate` creates an expression index per listed field on the
// resource's partition, with the very expression the filters compile to, so the planner uses it for
// a list's filter and an aggregate's (EXPLAIN of the statements themselves); a field no longer
// listed loses its index; a bad entry stops migrate with a message that names it.
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { fileURLToPath } from 'node:url';
import { after, before, describe, it } from 'node:test';
import { promisify } from 'node:util';
import { aggregateSql } from '../../mirror/reads/aggregates.ts';
import { fieldIndexPrefix } from '../../mirror/control/field-indexes.ts';
import { createPool, type Pool } from '../../mirror/db/pool.ts';
import { filtersSql, type RecordFilter } from '../../mirror/reads/record-filters.ts';
import { parseIndexedFields, textIndexed } from '../../lib/indexed-fields.ts';
import { createTestDatabase, type TestDatabase } from '../helpers/database.ts';

const run = promisify(execFile);
const root = fileURLToPath(new URL('../..', import.meta.url));

async function migrateCli(url: string, fields: string): Promise<{ code: number; out: string }> {
  try {
    const r = await run(process.execPath, ['bin/mirror.js', 'migrate'], {
      cwd: root,
      env: { ...process.env, DATABASE_URL: url, MIRROR_INDEXED_FIELDS: fields },
      timeout: 120_000,
    });
    return { code: 0, out: r.stdout + r.stderr };
  } catch (error) {
    const e = error as { code?: number; stdout?: string; stderr?: string };
    return { code: typeof e.code === 'number' ? e.code : 1, out: `${e.stdout ?? ''}${e.stderr ?? ''}` };
  }
}

describe('expression indexes of MIRROR_INDEXED_FIELDS', { timeout: 300_000 }, () => {
  let db: TestDatabase;
  let pool: Pool;
  const account = randomUUID();
  const other = randomUUID();

  before(async () => {
    db = await createTestDatabase();
    pool = createPool(db.url, { max: 2 });
    // 20,000 customers of one account and 2,000 of another: 400 statuses, 50 regions (in the source
    // object), balances as numbers; the source object wrapped as the mirror stores it.
    for (const [acc, n] of [
      [account, 20_000],
      [other, 2_000],
    ] as const) {
      await pool.query(
        `INSERT INTO records (account_id, resource, scope, id, source_id, data, source_data, hash, generation, ordinal)
         SELECT $1::uuid, 'customers', '', 'c' || i, 's' || i,
                jsonb_build_object('id', 'c' || i, 'status', 'status-' || (i % 400), 'balance', (i % 1000) * 1.5),
                jsonb_build_object('path', '/customers', 'content_type', 'application/json', 'data', jsonb_build_object('Region', 'region-' || (i % 50), 'Id', i)),
                gen_random_uuid(), 1, i
           FROM generate_series(1, $2::int) i`,
        [acc, n],
      );
    }
    await pool.query('ANALYZE records');
  });

  after(async () => {
    await pool?.end();
    await db?.drop();
  });

  const indexes = async () =>
    (
      await pool.query<{ name: string; table: string; valid: boolean; def: string }>(
        `SELECT c.relname AS name, t.relname AS table, i.indisvalid AS valid, pg_get_indexdef(c.oid) AS def
         FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid JOIN pg_class t ON t.oid = i.indrelid
        WHERE starts_with(c.relname, $1) ORDER BY c.relname`,
        [fieldIndexPrefix],
      )
    ).rows;

  /** The plan of a statement with its parameters (as the API sends them: a custom plan). */
  async function plan(sql: string, params: unknown[]): Promise<string> {
    const { rows } = await pool.query<{ 'QUERY PLAN': string }>(`EXPLAIN ${sql}`, params);
    return rows.map((r) => r['QUERY PLAN']).join('\n');
  }

  // The fields the API is told have an index (ApiDeps.indexedFields, from the same setting): their
  // filters compare the indexed expression; any other text filter has a cheaper form no index serves.
  const indexed = textIndexed(parseIndexedFields('customers.status,customers.source_data.Region,customers.balance:number').fields)('customers');

  /** The WHERE of a list read (mirror/reads/records-read.ts listRecords) with these filters. */
  function listWhere(filters: RecordFilter[]): { sql: string; params: unknown[] } {
    const f = filtersSql(filters, 4, indexed);
    return {
      sql: `SELECT id FROM records WHERE account_id = $1 AND resource = $2 AND scope = ANY($3::text[]) AND deleted_at IS NULL AND ${f.sql}`,
      params: [account, 'customers', [''], ...f.params],
    };
  }

  const aggregate = (filters: RecordFilter[]) =>
    aggregateSql({
      accountId: account,
      resource: 'customers',
      scopes: [''],
      includeDeleted: false,
      filters,
      measures: [{ fn: 'sum', field: 'balance' }],
      groupBy: 'status',
      limit: 100,
      indexed,
    });

  it('are created by migrate on the partition, and the filters of lists and aggregates use them', async () => {
    const filters: RecordFilter[][] = [
      [{ field: 'status', operator: '=', value: 'status-7' }],
      [{ field: 'source_data.Region', operator: '=', value: 'region-3' }],
      [{ field: 'status', operator: 'IN', value: ['status-7', 'status-8'] }],
      [{ field: 'status', operator: 'LIKE', value: 'status-39%' }],
      [{ field: 'balance', operator: '>', value: 1495 }],
    ];
    // Before: no index of ours, and none of these filters can use one.
    assert.deepEqual(await indexes(), []);
    for (const f of filters) assert.doesNotMatch(await plan(listWhere(f).sql, listWhere(f).params), new RegExp(fieldIndexPrefix), JSON.stringify(f));

    const r = await migrateCli(db.url, 'customers.status, customers.source_data.Region,customers.balance:number');
    assert.equal(r.code, 0, r.out);
    assert.match(r.out, /Field indexes: 3 created, 0 kept, 0 dropped/);
    const made = await indexes();
    assert.equal(made.length, 3);
    for (const ix of made) {
      assert.equal(ix.table, 'records_customers', "on the resource's partition");
      assert.equal(ix.valid, true);
      assert.match(ix.def, /\(account_id, /);
    }

    for (const f of filters) {
      const list = listWhere(f);
      assert.match(await plan(list.sql, list.params), new RegExp(fieldIndexPrefix), `a list filtered by ${JSON.stringify(f)} uses the field's index`);
      const agg = aggregate(f);
      assert.match(await plan(agg.sql, agg.params), new RegExp(fieldIndexPrefix), `an aggregate filtered by ${JSON.stringify(f)} uses the field's index`);
    }
    // And the index gives the same rows as the table (another account's never among them).
    const list = listWhere(filters[1]!);
    const { rows } = await pool.query<{ id: string }>(list.sql, list.params);
    assert.equal(rows.length, 400);
  });

  it('migrate again keeps them; an unlisted field loses its index; a bad entry is refused by name', async () => {
    const again = await migrateCli(db.url, 'customers.status,customers.source_data.Region,customers.balance:number');
    assert.equal(again.code, 0, again.out);
    assert.match(again.out, /0 created, 3 kept, 0 dropped/);

    const fewer = await migrateCli(db.url, 'customers.status');
    assert.equal(fewer.code, 0, fewer.out);
    assert.match(fewer.out, /0 created, 1 kept, 2 dropped/);
    const left = await indexes();
    assert.equal(left.length, 1);
    assert.match(left[0]!.def, /'status'::text/);

    const bad = await migrateCli(db.url, 'customers.nosuch,nosuch.status');
    assert.notEqual(bad.code, 0);
    assert.match(bad.out, /MIRROR_INDEXED_FIELDS/);
    assert.match(bad.out, /nosuch is not a field of customers/);
    assert.match(bad.out, /no resource nosuch/);
    assert.equal((await indexes()).length, 1, 'a refused setting changes nothing');
  });
});
