// Drift between prisma/schema.prisma and the database our migrations build.
//
// Prisma's own schema engine (WebAssembly, see scripts/prisma-schema-sql.ts) turns schema.prisma into the SQL
// it would run on an empty database; that SQL builds one scratch database, our migrations (mirror/db/migrate.ts)
// build another, and the two catalogs are compared for every table: columns (type, nullability, default,
// identity, collation), primary keys, unique constraints, indexes (uniqueness, method, columns, order,
// predicate) and foreign keys (columns, target, actions), plus enum types and tables that only one side has.
//
// Deliberately not compared, because Prisma does not model them: partitioning (`records` is partitioned by
// list in the migration; its partitions records_* are skipped), check constraints, triggers, views,
// sequences' own settings and column order.
import assert from 'node:assert/strict';
import { readFile } from 'node:fs/promises';
import { after, before, test } from 'node:test';
import pg from 'pg';
import { prismaSchemaSql } from '../../scripts/prisma-schema-sql.ts';
import { createTestDatabase, type TestDatabase } from '../helpers/database.ts';

/** Tables that may exist in the migrated database without a model: Prisma's own bookkeeping. */
const unmodelledTables = new Set(['_prisma_migrations']);

/** Per table: `column "x"`, `index "i"` or `constraint "c"`, each with a one-line description. */
type TableShape = Map<string, string>;

interface Catalog {
  tables: Map<string, TableShape>;
  enums: Map<string, string>;
}

type Queryable = Pick<pg.ClientBase, 'query'>;

async function readCatalog(db: Queryable): Promise<Catalog> {
  const tables = new Map<string, TableShape>();
  const { rows: tableRows } = await db.query<{ oid: number; name: string }>(
    `SELECT c.oid, c.relname AS name
       FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
      WHERE n.nspname = current_schema() AND c.relkind IN ('r', 'p') AND NOT c.relispartition`,
  );
  const names = new Map<number, string>();
  for (const t of tableRows) {
    if (unmodelledTables.has(t.name)) continue;
    names.set(t.oid, t.name);
    tables.set(t.name, new Map());
  }
  const oids = [...names.keys()];
  const add = (oid: number, key: string, description: string) => tables.get(names.get(oid)!)!.set(key, description);

  const { rows: columns } = await db.query<{
    oid: number;
    name: string;
    type: string;
    not_null: boolean;
    default: string | null;
    identity: string;
    generated: string;
    collation: string | null;
  }>(
    `SELECT a.attrelid::int AS oid, a.attname AS name, format_type(a.atttypid, a.atttypmod) AS type,
            a.attnotnull AS not_null, pg_get_expr(d.adbin, d.adrelid) AS default,
            a.attidentity AS identity, a.attgenerated AS generated,
            CASE WHEN a.attcollation <> t.typcollation THEN co.collname END AS collation
       FROM pg_attribute a
       JOIN pg_type t ON t.oid = a.atttypid
       LEFT JOIN pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum
       LEFT JOIN pg_collation co ON co.oid = a.attcollation
      WHERE a.attrelid = ANY($1::oid[]) AND a.attnum > 0 AND NOT a.attisdropped`,
    [oids],
  );
  for (const c of columns) {
    const parts = [c.type, c.not_null ? 'NOT NULL' : 'NULL'];
    if (c.default !== null) parts.push(`DEFAULT ${c.default}`);
    if (c.identity) parts.push(`IDENTITY ${c.identity === 'a' ? 'ALWAYS' : 'BY DEFAULT'}`);
    if (c.generated) parts.push('GENERATED');
    if (c.collation) parts.push(`COLLATE ${c.collation}`);
    add(c.oid, `column "${c.name}"`, parts.join(' '));
  }

  // Primary keys, unique and exclusion constraints, foreign keys. Constraints cloned onto partitions, or
  // onto the referencing table for each partition of a referenced one, have a parent: skip those.
  const { rows: constraints } = await db.query<{ oid: number; name: string; definition: string }>(
    `SELECT conrelid::int AS oid, conname AS name, pg_get_constraintdef(oid) AS definition
       FROM pg_constraint
      WHERE conrelid = ANY($1::oid[]) AND contype IN ('p', 'u', 'f', 'x') AND conparentid = 0`,
    [oids],
  );
  for (const c of constraints) add(c.oid, `constraint "${c.name}"`, c.definition);

  // Every index except the primary key's (its constraint says all). The definition is cut to what follows
  // USING so that the table name and ONLY (on a partitioned table) do not count.
  const { rows: indexes } = await db.query<{ oid: number; name: string; unique: boolean; definition: string; backs: string | null }>(
    `SELECT i.indrelid::int AS oid, ic.relname AS name, i.indisunique AS unique,
            pg_get_indexdef(i.indexrelid) AS definition, con.contype AS backs
       FROM pg_index i
       JOIN pg_class ic ON ic.oid = i.indexrelid
       LEFT JOIN pg_constraint con ON con.conindid = i.indexrelid AND con.conrelid = i.indrelid
      WHERE i.indrelid = ANY($1::oid[]) AND NOT i.indisprimary`,
    [oids],
  );
  for (const i of indexes) {
    const using = i.definition.slice(i.definition.indexOf(' USING ') + 1);
    const backs = i.backs === 'u' ? ' (of a UNIQUE constraint)' : i.backs === 'x' ? ' (of an EXCLUDE constraint)' : '';
    add(i.oid, `index "${i.name}"`, `${i.unique ? 'UNIQUE ' : ''}${using}${backs}`);
  }

  const { rows: enumRows } = await db.query<{ name: string; labels: string[] }>(
    `SELECT t.typname AS name, array_agg(e.enumlabel ORDER BY e.enumsortorder) AS labels
       FROM pg_type t JOIN pg_namespace n ON n.oid = t.typnamespace JOIN pg_enum e ON e.enumtypid = t.oid
      WHERE n.nspname = current_schema()
      GROUP BY t.typname`,
  );
  const enums = new Map(enumRows.map((e) => [e.name, e.labels.join(', ')]));
  return { tables, enums };
}

/** Human-readable differences; empty when the migrations build exactly what schema.prisma describes. */
function diffCatalogs(prisma: Catalog, migrated: Catalog): string[] {
  const out: string[] = [];
  const sorted = (a: Iterable<string>, b: Iterable<string>) => [...new Set([...a, ...b])].sort();
  for (const table of sorted(prisma.tables.keys(), migrated.tables.keys())) {
    const want = prisma.tables.get(table);
    const have = migrated.tables.get(table);
    if (!have) {
      out.push(`table "${table}" is in schema.prisma but the migrations do not create it`);
      continue;
    }
    if (!want) {
      out.push(`table "${table}" is created by the migrations but schema.prisma has no model for it`);
      continue;
    }
    for (const key of sorted(want.keys(), have.keys())) {
      const a = want.get(key);
      const b = have.get(key);
      if (a === b) continue;
      if (b === undefined) out.push(`${table}: ${key} is missing from the migrations (Prisma: ${a})`);
      else if (a === undefined) out.push(`${table}: ${key} is not in schema.prisma (migrations: ${b})`);
      else out.push(`${table}: ${key} differs: Prisma: ${a} | migrations: ${b}`);
    }
  }
  for (const name of sorted(prisma.enums.keys(), migrated.enums.keys())) {
    const a = prisma.enums.get(name);
    const b = migrated.enums.get(name);
    if (a !== b) out.push(`enum "${name}": Prisma: ${a ?? '(none)'} | migrations: ${b ?? '(none)'}`);
  }
  return out;
}

async function withClient<T>(url: string, fn: (client: pg.Client) => Promise<T>): Promise<T> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    return await fn(client);
  } finally {
    await client.end();
  }
}

/** A scratch database built by the SQL Prisma generates for `schema` (default: prisma/schema.prisma). */
async function databaseFromSchema(schema?: string): Promise<TestDatabase> {
  const db = await createTestDatabase('mirror_drift_prisma', { migrate: false });
  try {
    const { sql } = await prismaSchemaSql({ databaseUrl: db.url, ...(schema === undefined ? {} : { schema }) });
    assert.match(sql, /CREATE TABLE/, 'the schema engine generated no tables');
    await withClient(db.url, (client) => client.query(sql));
    return db;
  } catch (error) {
    await db.drop();
    throw error;
  }
}

const databases: TestDatabase[] = [];
let migrated: TestDatabase;
let migratedCatalog: Catalog;
let prismaCatalog: Catalog;

before(async () => {
  migrated = await createTestDatabase('mirror_drift_migrated');
  databases.push(migrated);
  const fromSchema = await databaseFromSchema();
  databases.push(fromSchema);
  migratedCatalog = await withClient(migrated.url, readCatalog);
  prismaCatalog = await withClient(fromSchema.url, readCatalog);
});

after(async () => {
  await Promise.all(databases.map((db) => db.drop()));
});

test('the migrations build exactly the database schema.prisma describes', () => {
  assert.ok(prismaCatalog.tables.size > 0, 'the schema produced no tables');
  assert.ok(prismaCatalog.tables.get('records')?.has('column "ordinal"'), 'records is compared (its partitions are not)');
  assert.ok(![...migratedCatalog.tables.keys()].some((t) => t.startsWith('records_')), 'partitions are skipped');
  const differences = diffCatalogs(prismaCatalog, migratedCatalog);
  assert.deepEqual(
    differences,
    [],
    `schema.prisma and prisma/migrations disagree (${differences.length}):\n  ${differences.join('\n  ')}\n` +
      'Add a migration that makes the database match the schema (see `node --import tsx scripts/prisma-schema-sql.ts`), or fix the schema.',
  );
});

test('drift injected into the migrated database is caught', async () => {
  await withClient(migrated.url, async (client) => {
    await client.query('BEGIN');
    try {
      await client.query(`
        ALTER TABLE streams ALTER COLUMN mode SET NOT NULL;
        ALTER TABLE api_clients ALTER COLUMN name TYPE varchar(200);
        ALTER TABLE linked_accounts ALTER COLUMN status SET DEFAULT 'pending';
        ALTER TABLE records ADD COLUMN extra text;
        DROP INDEX records_account_id_resource_source_id_idx;
        CREATE INDEX records_account_id_resource_source_id_idx ON records (account_id, source_id);
        ALTER TABLE sync_runs DROP CONSTRAINT sync_runs_stream_id_fkey,
          ADD CONSTRAINT sync_runs_stream_id_fkey FOREIGN KEY (stream_id) REFERENCES streams(id) ON DELETE RESTRICT ON UPDATE CASCADE;
        DROP INDEX linked_accounts_token_hash_key;
        CREATE TABLE stray (id int PRIMARY KEY);`);
      const differences = diffCatalogs(prismaCatalog, await readCatalog(client));
      const expected = [
        /^streams: column "mode" differs: Prisma: text NULL \| migrations: text NOT NULL$/,
        /^api_clients: column "name" differs: Prisma: text NOT NULL \| migrations: character varying\(200\) NOT NULL$/,
        /^linked_accounts: column "status" differs: .*DEFAULT 'linked'.*DEFAULT 'pending'/,
        /^records: column "extra" is not in schema\.prisma/,
        /^records: index "records_account_id_resource_source_id_idx" differs: /,
        /^sync_runs: constraint "sync_runs_stream_id_fkey" differs: .*ON DELETE CASCADE.*ON DELETE RESTRICT/,
        /^linked_accounts: index "linked_accounts_token_hash_key" is missing from the migrations/,
        /^table "stray" is created by the migrations but schema\.prisma has no model for it$/,
      ];
      for (const pattern of expected) {
        assert.ok(
          differences.some((d) => pattern.test(d)),
          `not reported: ${pattern}\nreported:\n  ${differences.join('\n  ')}`,
        );
      }
      assert.equal(differences.length, expected.length, `unexpected extra differences:\n  ${differences.join('\n  ')}`);
    } finally {
      await client.query('ROLLBACK');
    }
  });
  // The rollback leaves the migrated database as it was.
  assert.deepEqual(diffCatalogs(prismaCatalog, await withClient(migrated.url, readCatalog)), diffCatalogs(prismaCatalog, migratedCatalog));
});

test('a schema.prisma change without a migration is caught', async () => {
  const original = await readFile(new URL('../../prisma/schema.prisma', import.meta.url), 'utf8');
  const edits: [string, string][] = [
    // a new optional column
    [
      '  unlinkedAt       DateTime? @map("unlinked_at") @db.Timestamptz(6)\n',
      '  unlinkedAt       DateTime? @map("unlinked_at") @db.Timestamptz(6)\n  note             String?\n',
    ],
    // a native type
    ['secretHash String   @map("secret_hash") @db.Char(64)', 'secretHash String   @map("secret_hash") @db.VarChar(64)'],
    // a referential action
    [
      'stream     Stream    @relation(fields: [streamId], references: [id], onDelete: Cascade)',
      'stream     Stream    @relation(fields: [streamId], references: [id], onDelete: Restrict)',
    ],
    // an index
    ['  @@index([accountId, resource, mirroredAt])\n', '  @@index([accountId, resource, mirroredAt])\n  @@index([hash])\n'],
  ];
  let schema = original;
  for (const [from, to] of edits) {
    assert.ok(schema.includes(from), `schema.prisma changed; update this test's edit: ${from.trim()}`);
    schema = schema.replace(from, to);
  }
  const changed = await databaseFromSchema(schema);
  databases.push(changed);
  const differences = diffCatalogs(await withClient(changed.url, readCatalog), migratedCatalog);
  const expected = [
    /^linked_accounts: column "note" is missing from the migrations \(Prisma: text NULL\)$/,
    /^api_clients: column "secret_hash" differs: Prisma: character varying\(64\) NOT NULL \| migrations: character\(64\) NOT NULL$/,
    /^sync_runs: constraint "sync_runs_stream_id_fkey" differs: .*ON DELETE RESTRICT.*ON DELETE CASCADE/,
    /^records: index "records_hash_idx" is missing from the migrations/,
  ];
  for (const pattern of expected) {
    assert.ok(
      differences.some((d) => pattern.test(d)),
      `not reported: ${pattern}\nreported:\n  ${differences.join('\n  ')}`,
    );
  }
  assert.equal(differences.length, expected.length, `unexpected extra differences:\n  ${differences.join('\n  ')}`);
});
