// The store can be distributed by account (docs/sharding.md): every table that holds per-record data
// is keyed by the account first, so each of its rows, unique keys and foreign keys lives on one shard.
// Every table of the migrated database is placed here as either distributed by account or kept on the
// coordinator; a new table fails this test until it is placed, and a distributed table whose primary
// key, unique index or foreign key does not lead with the account fails it too.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import pg from 'pg';
import { createTestDatabase, type TestDatabase } from '../helpers/database.ts';

/** Tables distributed by `account_id`, co-located with `records`: they grow with the records. */
const distributed = new Set(['records', 'record_position_sets', 'record_position_chunks', 'account_events']);

/**
 * Tables that stay on the coordinator, each with the reason: they grow with accounts, streams,
 * passes or deliveries, not with records, and the control plane reads them across accounts.
 */
const coordinator = new Map<string, string>([
  ['_prisma_migrations', 'migration bookkeeping'],
  ['linked_accounts', 'one row per account; looked up by token hash across accounts'],
  ['account_tokens', 'a few rows per account; looked up by token hash across accounts'],
  ['api_clients', 'the application clients of the mirror'],
  ['link_sessions', 'short-lived link sessions, looked up by secret'],
  ['cross_project_lists', 'per source system, not per account'],
  ['rate_budgets', 'rate windows shared by every process, per budget key'],
  ['rate_leases', 'leases of the rate windows'],
  ['streams', 'one row per list; the scheduler reads them across accounts'],
  ['sync_runs', 'one row per pass of a list'],
  ['stream_pages', 'one row per page of a pass, keyed by its stream'],
  ['inbox_events', 'webhook deliveries waiting to be applied'],
  ['async_requests', 'durable async requests'],
  ['subscriptions', "the application's webhook subscriptions"],
  ['webhook_registrations', "the mirror's registrations at the upstream"],
  ['storage_accesses', 'signed storage links'],
  ['account_write_positions', "each account's last write position; the read router reads them across accounts"],
]);

interface KeyShape {
  table: string;
  name: string;
  kind: 'primary key' | 'unique index' | 'foreign key';
  columns: string[];
  references?: { table: string; columns: string[] };
}

type Queryable = Pick<pg.ClientBase, 'query'>;

/** Tables of the current schema (partitions aside: they carry their parent's keys). */
async function tables(db: Queryable): Promise<string[]> {
  const { rows } = await db.query<{ name: string }>(
    `SELECT c.relname AS name FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
      WHERE n.nspname = current_schema() AND c.relkind IN ('r', 'p') AND NOT c.relispartition ORDER BY 1`,
  );
  return rows.map((r) => r.name);
}

/** Primary keys, unique indexes and foreign keys of every table, with their columns in key order. */
async function keyShapes(db: Queryable): Promise<KeyShape[]> {
  const { rows: indexes } = await db.query<{ table: string; name: string; primary: boolean; columns: string[] }>(
    `SELECT t.relname AS table, i.relname AS name, x.indisprimary AS primary,
            array(SELECT coalesce(a.attname, '(expression)') FROM unnest(x.indkey) WITH ORDINALITY k(att, n)
                    LEFT JOIN pg_attribute a ON a.attrelid = t.oid AND a.attnum = k.att ORDER BY k.n)::text[] AS columns
       FROM pg_index x JOIN pg_class t ON t.oid = x.indrelid JOIN pg_class i ON i.oid = x.indexrelid
       JOIN pg_namespace n ON n.oid = t.relnamespace
      WHERE n.nspname = current_schema() AND x.indisunique AND NOT t.relispartition`,
  );
  const { rows: foreign } = await db.query<{ table: string; name: string; columns: string[]; ref: string; refColumns: string[] }>(
    `SELECT t.relname AS table, c.conname AS name, r.relname AS ref,
            array(SELECT a.attname FROM unnest(c.conkey) WITH ORDINALITY k(att, n)
                    JOIN pg_attribute a ON a.attrelid = c.conrelid AND a.attnum = k.att ORDER BY k.n)::text[] AS columns,
            array(SELECT a.attname FROM unnest(c.confkey) WITH ORDINALITY k(att, n)
                    JOIN pg_attribute a ON a.attrelid = c.confrelid AND a.attnum = k.att ORDER BY k.n)::text[] AS "refColumns"
       FROM pg_constraint c JOIN pg_class t ON t.oid = c.conrelid JOIN pg_class r ON r.oid = c.confrelid
       JOIN pg_namespace n ON n.oid = t.relnamespace
      WHERE n.nspname = current_schema() AND c.contype = 'f' AND NOT t.relispartition`,
  );
  return [
    ...indexes.map((i) => ({
      table: i.table,
      name: i.name,
      kind: i.primary ? ('primary key' as const) : ('unique index' as const),
      columns: i.columns,
    })),
    ...foreign.map((f) => ({
      table: f.table,
      name: f.name,
      kind: 'foreign key' as const,
      columns: f.columns,
      references: { table: f.ref, columns: f.refColumns },
    })),
  ];
}

/** What keeps a distributed table from living on one shard per account, one line each. */
function accountKeyProblems(shapes: KeyShape[], distributedTables: ReadonlySet<string>): string[] {
  const problems: string[] = [];
  const byTable = new Map<string, KeyShape[]>();
  for (const s of shapes) byTable.set(s.table, [...(byTable.get(s.table) ?? []), s]);
  for (const table of distributedTables) {
    const keys = byTable.get(table) ?? [];
    if (!keys.some((k) => k.kind === 'primary key')) problems.push(`${table}: no primary key`);
    for (const k of keys) {
      if (k.columns[0] !== 'account_id') {
        problems.push(`${table}: ${k.kind} ${k.name} (${k.columns.join(', ')}) does not lead with account_id`);
        continue;
      }
      if (k.kind !== 'foreign key' || !k.references) continue;
      if (!distributedTables.has(k.references.table)) {
        problems.push(`${table}: foreign key ${k.name} references ${k.references.table}, which is not distributed by account`);
      } else if (k.references.columns[0] !== 'account_id') {
        problems.push(`${table}: foreign key ${k.name} references ${k.references.table}(${k.references.columns.join(', ')}) off its account`);
      }
    }
  }
  return problems;
}

describe('keys lead with the account', () => {
  let db: TestDatabase;
  let client: pg.Client;
  before(async () => {
    db = await createTestDatabase('mirror_account_keys');
    client = new pg.Client({ connectionString: db.url });
    await client.connect();
  });
  after(async () => {
    await client?.end();
    await db?.drop();
  });

  it('places every table: distributed by account, or kept on the coordinator', async () => {
    const unplaced = (await tables(client)).filter((t) => !distributed.has(t) && !coordinator.has(t));
    assert.deepEqual(unplaced, [], 'place each new table in test/integration/account-keys.test.ts and docs/sharding.md');
    const gone = [...distributed, ...coordinator.keys()].filter((t) => !t.startsWith('_'));
    const present = new Set(await tables(client));
    assert.deepEqual(
      gone.filter((t) => !present.has(t)),
      [],
      'a placed table no longer exists',
    );
  });

  it("every distributed table's primary key, unique indexes and foreign keys lead with account_id", async () => {
    assert.deepEqual(accountKeyProblems(await keyShapes(client), distributed), []);
  });

  it('finds a key that does not lead with the account', async () => {
    // The check itself can fail: a table keyed by its own id, a unique index and a foreign key off the account.
    await client.query(`CREATE TABLE probe_parent (account_id uuid, id bigint, PRIMARY KEY (account_id, id))`);
    await client.query(
      `CREATE TABLE probe_child (id bigint PRIMARY KEY, account_id uuid, parent_id bigint, code text,
         UNIQUE (code, account_id), FOREIGN KEY (account_id, parent_id) REFERENCES probe_parent (account_id, id))`,
    );
    await client.query(
      `CREATE TABLE probe_stray (account_id uuid, id bigint, PRIMARY KEY (account_id, id),
         FOREIGN KEY (account_id) REFERENCES linked_accounts (id))`,
    );
    try {
      const problems = accountKeyProblems(await keyShapes(client), new Set(['probe_parent', 'probe_child', 'probe_stray']));
      assert.deepEqual(problems.sort(), [
        'probe_child: primary key probe_child_pkey (id) does not lead with account_id',
        'probe_child: unique index probe_child_code_account_id_key (code, account_id) does not lead with account_id',
        'probe_stray: foreign key probe_stray_account_id_fkey references linked_accounts, which is not distributed by account',
      ]);
    } finally {
      await client.query('DROP TABLE probe_child, probe_parent, probe_stray');
    }
  });
});
