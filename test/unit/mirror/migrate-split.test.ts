// splitStatements (mirror/db/migrate.ts): a migration that runs outside a transaction is sent one statement
// at a time, so its split must not cut inside strings, quoted names, dollar quotes or comments.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { noTransactionMarker, runsOutsideTransaction, splitStatements } from '../../../mirror/db/migrate.ts';

test('splits at the semicolons that end statements only', () => {
  const sql = `${noTransactionMarker}
-- a comment; with a semicolon
CREATE INDEX CONCURRENTLY IF NOT EXISTS "a;b" ON t (x);
/* block; /* nested; */ still comment; */
INSERT INTO t VALUES ('it''s; fine', $$dollar; 'quote'$$, $tag$ $$; $tag$);
DO $body$ BEGIN PERFORM 1; PERFORM 2; END $body$;
-- trailing comment only;
`;
  assert.deepEqual(splitStatements(sql), [
    `${noTransactionMarker}\n-- a comment; with a semicolon\nCREATE INDEX CONCURRENTLY IF NOT EXISTS "a;b" ON t (x)`,
    `/* block; /* nested; */ still comment; */\nINSERT INTO t VALUES ('it''s; fine', $$dollar; 'quote'$$, $tag$ $$; $tag$)`,
    'DO $body$ BEGIN PERFORM 1; PERFORM 2; END $body$',
  ]);
  assert.deepEqual(splitStatements('SELECT 1'), ['SELECT 1']);
  assert.deepEqual(splitStatements('SELECT $1::int; SELECT 2;'), ['SELECT $1::int', 'SELECT 2']);
});

test('the marker counts only as the first line', () => {
  assert.equal(runsOutsideTransaction(`${noTransactionMarker}\nCREATE INDEX CONCURRENTLY i ON t (x);`), true);
  assert.equal(runsOutsideTransaction(`  ${noTransactionMarker}  \r\nSELECT 1;`), true);
  assert.equal(runsOutsideTransaction(`SELECT 1;\n${noTransactionMarker}\n`), false);
  assert.equal(runsOutsideTransaction('-- migrate: no-transaction please\nSELECT 1;'), false);
});
