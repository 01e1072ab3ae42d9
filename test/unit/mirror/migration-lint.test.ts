// Online-migration lint: migrations newer than the last one of the release that introduced this check
// (20261126020000_stream_polling) must not block or rewrite big tables while the API serves them
// (CONTRIBUTING.md "Changing the database"). Each statement of prisma/migrations/*/migration.sql is checked for
// the patterns that do; a statement may carry `-- online-migration: allow <rule> because <reason>` when
// the table is known to be small or the lock is wanted. test/integration/online-migrations.test.ts shows
// the migrations under read load; this catches what a 200k-record test database would not show
// (a build of an index that blocks a pass's writes for minutes on a big mirror, a rewrite of a table).
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { readMigrations, runsOutsideTransaction, splitStatements } from '../../../mirror/db/migrate.ts';

/** The last migration written before the check: older ones are applied in the field and never edited. */
export const lintFrom = '20261126020000_stream_polling';

export const rules = {
  'index-not-concurrent':
    'CREATE INDEX on records or a partition of it without CONCURRENTLY blocks every write to it while it builds (use CONCURRENTLY per partition, or ON ONLY records then ATTACH)',
  'index-concurrently-in-transaction': 'CREATE INDEX CONCURRENTLY cannot run in a transaction: put `-- migrate: no-transaction` on the first line',
  'add-column-not-null':
    'ADD COLUMN ... NOT NULL needs a non-volatile DEFAULT (without one it fails on a filled table; a volatile one rewrites it): add it nullable, backfill in batches, then a validated CHECK',
  'alter-column-type': 'ALTER COLUMN ... TYPE rewrites the table under an exclusive lock: add a new column, backfill, switch readers, drop the old one later',
  'set-not-null':
    'SET NOT NULL scans the table under an exclusive lock unless a validated CHECK (col IS NOT NULL) exists: add it NOT VALID, VALIDATE CONSTRAINT, then SET NOT NULL',
  'add-constraint-validated':
    'ADD CONSTRAINT on records scans it under a lock that blocks writes: add it NOT VALID, then VALIDATE CONSTRAINT (which lets writes go on)',
} as const;

export type Rule = keyof typeof rules;

export interface Violation {
  migration: string;
  rule: Rule;
  statement: string;
}

const volatileDefault = /\bDEFAULT\s+(?:[\s\S]*\b(?:random|gen_random_uuid|uuid_generate_v[14]|clock_timestamp|timeofday|nextval)\s*\()/i;
const serialType = /\b(?:small|big)?serial\d?\b/i;

/** Whether `table` (unquoted, lower case) is `records` or one of its partitions. */
function isRecords(table: string): boolean {
  return table === 'records' || table.startsWith('records_');
}

function name(quotedOrNot: string): string {
  return quotedOrNot
    .replace(/"/g, '')
    .replace(/^public\./, '')
    .toLowerCase();
}

function allowed(statement: string, rule: Rule): boolean {
  return new RegExp(`--\\s*online-migration:\\s*allow\\s+${rule}\\s+because\\s+\\S`, 'i').test(statement);
}

/** The violations of one migration; `before` is the SQL of every earlier migration (validated CHECKs count from there). */
export function lintMigration(migration: string, sql: string, before = ''): Violation[] {
  const out: Violation[] = [];
  const outside = runsOutsideTransaction(sql);
  // Code without comments and string literals' contents, one statement at a time.
  const statements = splitStatements(sql).map((text) => ({
    text,
    code: text
      .replace(/--[^\n]*/g, ' ')
      .replace(/\/\*[\s\S]*?\*\//g, ' ')
      .replace(/'(?:[^']|'')*'/g, "''")
      .replace(/\s+/g, ' ')
      .trim(),
  }));
  let seen = before.replace(/--[^\n]*/g, ' ').replace(/\s+/g, ' ');
  for (const { text, code } of statements) {
    const flag = (rule: Rule) => {
      if (!allowed(text, rule)) out.push({ migration, rule, statement: code.slice(0, 160) });
    };
    const index = /^CREATE\s+(?:UNIQUE\s+)?INDEX\s+(CONCURRENTLY\s+)?(?:IF\s+NOT\s+EXISTS\s+)?(?:"?[\w.]+"?\s+)?ON\s+(ONLY\s+)?("?[\w.]+"?)/i.exec(code);
    if (index) {
      const [, concurrently, only, table] = index;
      if (concurrently && !outside) flag('index-concurrently-in-transaction');
      if (!concurrently && !only && isRecords(name(table!))) flag('index-not-concurrent');
    }
    const alter = /^ALTER\s+TABLE\s+(?:IF\s+EXISTS\s+)?(?:ONLY\s+)?("?[\w.]+"?)\s+([\s\S]*)$/i.exec(code);
    if (alter) {
      const table = name(alter[1]!);
      // Each action of the statement (`ADD COLUMN a ..., ADD COLUMN b ...`), split at top-level commas.
      const actions: string[] = [];
      let depth = 0;
      let from = 0;
      const body = alter[2]!;
      for (let i = 0; i < body.length; i++) {
        if (body[i] === '(') depth++;
        else if (body[i] === ')') depth--;
        else if (body[i] === ',' && depth === 0) {
          actions.push(body.slice(from, i));
          from = i + 1;
        }
      }
      actions.push(body.slice(from));
      for (const raw of actions) {
        const action = raw.trim();
        if (/^ADD\s+(?:COLUMN\s+)?(?!CONSTRAINT\b|CHECK\b|PRIMARY\b|UNIQUE\b|FOREIGN\b|EXCLUDE\b)/i.test(action)) {
          const notNull = /\bNOT\s+NULL\b/i.test(action);
          const hasDefault = /\bDEFAULT\b/i.test(action);
          if ((notNull && !hasDefault) || volatileDefault.test(action) || serialType.test(action)) flag('add-column-not-null');
        }
        if (/^ALTER\s+(?:COLUMN\s+)?"?\w+"?\s+(?:SET\s+DATA\s+)?TYPE\b/i.test(action)) flag('alter-column-type');
        const setNotNull = /^ALTER\s+(?:COLUMN\s+)?("?\w+"?)\s+SET\s+NOT\s+NULL\b/i.exec(action);
        if (setNotNull) {
          const column = name(setNotNull[1]!);
          // A CHECK (column IS NOT NULL) added earlier (this migration's earlier statements or an older
          // migration), and validated: either added without NOT VALID, or VALIDATE CONSTRAINT'd since.
          const check = new RegExp(
            `CONSTRAINT\\s+"?(\\w+)"?\\s+CHECK\\s*\\(\\s*\\(?\\s*"?${column}"?\\s+IS\\s+NOT\\s+NULL\\s*\\)?\\s*\\)(\\s+NOT\\s+VALID)?`,
            'ig',
          );
          const validated = [...seen.matchAll(check)].some((m) => !m[2] || new RegExp(`VALIDATE\\s+CONSTRAINT\\s+"?${m[1]}"?`, 'i').test(seen));
          if (!validated) flag('set-not-null');
        }
        if (
          isRecords(table) &&
          /^ADD\s+(?:CONSTRAINT\s+"?\w+"?\s+)?(?:CHECK|FOREIGN\s+KEY|UNIQUE|PRIMARY\s+KEY|EXCLUDE)\b/i.test(action) &&
          !/\bNOT\s+VALID\b/i.test(action) &&
          !/\bUSING\s+INDEX\b/i.test(action)
        ) {
          flag('add-constraint-validated');
        }
      }
    }
    seen += ` ${code}`;
  }
  return out;
}

describe('online-migration lint', () => {
  it(`passes every migration after ${lintFrom}`, async () => {
    const migrations = await readMigrations();
    assert.ok(
      migrations.some((m) => m.name === lintFrom),
      `${lintFrom} is one of the migrations`,
    );
    const violations: Violation[] = [];
    let before = '';
    for (const m of migrations) {
      if (m.name > lintFrom) violations.push(...lintMigration(m.name, m.sql, before));
      before += `\n${m.sql}`;
    }
    assert.deepEqual(
      violations.map((v) => `${v.migration}: ${v.rule} (${rules[v.rule]}) in: ${v.statement}`),
      [],
      'a migration blocks or rewrites a big table: see CONTRIBUTING.md "Changing the database"',
    );
  });

  const rulesOf = (sql: string, before = '') => lintMigration('test', sql, before).map((v) => v.rule);

  it('flags an index on records or a partition without CONCURRENTLY; accepts CONCURRENTLY outside a transaction and ON ONLY', () => {
    assert.deepEqual(rulesOf('CREATE INDEX "records_x_idx" ON "records"("account_id", "x");'), ['index-not-concurrent']);
    assert.deepEqual(rulesOf('CREATE UNIQUE INDEX IF NOT EXISTS records_projects_x ON public.records_projects (x);'), ['index-not-concurrent']);
    assert.deepEqual(rulesOf('CREATE INDEX "streams_x_idx" ON "streams"("x");'), []);
    assert.deepEqual(rulesOf('CREATE INDEX CONCURRENTLY "records_projects_x" ON "records_projects"("x");'), ['index-concurrently-in-transaction']);
    assert.deepEqual(
      rulesOf(
        '-- migrate: no-transaction\nCREATE INDEX IF NOT EXISTS "records_x_idx" ON ONLY "records"("x");\nCREATE INDEX CONCURRENTLY IF NOT EXISTS "records_projects_x" ON "records_projects"("x");\nALTER INDEX "records_x_idx" ATTACH PARTITION "records_projects_x";',
      ),
      [],
    );
  });

  it('flags NOT NULL columns without a default, volatile defaults, type changes', () => {
    assert.deepEqual(rulesOf('ALTER TABLE "records" ADD COLUMN "position" INTEGER NOT NULL;'), ['add-column-not-null']);
    assert.deepEqual(rulesOf('ALTER TABLE "streams" ADD COLUMN "a" INTEGER NOT NULL DEFAULT 0, ADD COLUMN "b" UUID DEFAULT gen_random_uuid();'), [
      'add-column-not-null',
    ]);
    assert.deepEqual(rulesOf('ALTER TABLE "records" ADD COLUMN "n" BIGSERIAL;'), ['add-column-not-null']);
    assert.deepEqual(rulesOf('ALTER TABLE "records" ADD COLUMN "position" INTEGER, ADD COLUMN "seen" TIMESTAMPTZ(6) NOT NULL DEFAULT CURRENT_TIMESTAMP;'), []);
    assert.deepEqual(rulesOf('ALTER TABLE "records" ALTER COLUMN "ordinal" TYPE NUMERIC;'), ['alter-column-type']);
    assert.deepEqual(rulesOf('ALTER TABLE "records" ALTER "ordinal" SET DATA TYPE INTEGER;'), ['alter-column-type']);
    assert.deepEqual(rulesOf('ALTER TABLE "stream_pages" ALTER COLUMN "ids" SET STORAGE EXTERNAL;'), []);
  });

  it('flags SET NOT NULL unless a validated CHECK (col IS NOT NULL) came first, here or in an earlier migration', () => {
    assert.deepEqual(rulesOf('ALTER TABLE "records" ALTER COLUMN "position" SET NOT NULL;'), ['set-not-null']);
    assert.deepEqual(
      rulesOf(
        'ALTER TABLE "records" ADD CONSTRAINT "records_position_nn" CHECK ("position" IS NOT NULL) NOT VALID;\nALTER TABLE "records" ALTER COLUMN "position" SET NOT NULL;',
      ),
      ['set-not-null'],
    );
    assert.deepEqual(
      rulesOf(
        'ALTER TABLE "records" VALIDATE CONSTRAINT "records_position_nn";\nALTER TABLE "records" ALTER COLUMN "position" SET NOT NULL;',
        'ALTER TABLE "records" ADD CONSTRAINT "records_position_nn" CHECK ("position" IS NOT NULL) NOT VALID;',
      ),
      [],
    );
  });

  it('flags constraints added to records without NOT VALID', () => {
    assert.deepEqual(rulesOf('ALTER TABLE "records" ADD CONSTRAINT "records_ordinal_pos" CHECK ("ordinal" >= 0);'), ['add-constraint-validated']);
    assert.deepEqual(rulesOf('ALTER TABLE "records" ADD CONSTRAINT "records_ordinal_pos" CHECK ("ordinal" >= 0) NOT VALID;'), []);
    assert.deepEqual(rulesOf('ALTER TABLE "streams" ADD CONSTRAINT "streams_x_fkey" FOREIGN KEY ("x") REFERENCES "y"("id");'), []);
  });

  it('lets a statement through with an allow comment that gives a reason', () => {
    assert.deepEqual(
      rulesOf(
        '-- online-migration: allow index-not-concurrent because records_wbs is created empty just above\nCREATE INDEX "records_wbs_x" ON "records_wbs"("x");',
      ),
      [],
    );
    assert.deepEqual(rulesOf('-- online-migration: allow index-not-concurrent\nCREATE INDEX "records_wbs_x" ON "records_wbs"("x");'), ['index-not-concurrent']);
    assert.deepEqual(rulesOf('-- online-migration: allow set-not-null because x\nCREATE INDEX "records_wbs_x" ON "records_wbs"("x");'), [
      'index-not-concurrent',
    ]);
  });
});
