// The SQL of an aggregate's measures (what aggregates.test.ts checks against Postgres for every kind
// of value): here, the cost of the rows that carry no value, and of numbers. No I/O.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { aggregateSql } from '../../../mirror/reads/aggregates.ts';

const sql = (field: string) =>
  aggregateSql({ accountId: 'a', resource: 'customers', scopes: 'all', includeDeleted: false, filters: [], measures: [{ fn: 'sum', field }], limit: 10 }).sql;

describe('aggregate SQL', () => {
  it('settles a missing or null field by its text, and casts a number from its JSON', () => {
    for (const field of ['balance', 'source_data.Balance']) {
      const s = sql(field);
      // The text (->>) first: NULL for a missing field and a JSON null, with no JSON value made.
      assert.match(s, /sum\(\(CASE WHEN \(.*->>\$3::text\) IS NOT NULL THEN/, s);
      // A number as it is stored: no text round trip (numeric_out, then numeric_in).
      assert.match(s, /WHEN 'number' THEN \(.*->\$3::text\)::numeric/, s);
      assert.ok(!s.includes(`#>> '{}')::numeric WHEN 'string'`), s);
    }
  });
});
