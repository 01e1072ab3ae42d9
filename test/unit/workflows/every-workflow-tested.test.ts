// Every workflow the worker registers (workflows/index.ts) has a test of its own decisions, on the
// workflow alone with its activities faked: test/unit/workflows/<workflow, in kebab case>.test.ts
// (accountSyncWorkflow: account-sync-workflow.test.ts). A workflow added without one fails here.
import assert from 'node:assert/strict';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import ts from 'typescript';

const root = new URL('../../..', import.meta.url).pathname;

/** The names a module exports by `export { ... }` and `export function`, read with TypeScript's parser. */
function exportedNames(text: string): string[] {
  const source = ts.createSourceFile('index.ts', text, ts.ScriptTarget.Latest, true);
  const names: string[] = [];
  for (const statement of source.statements) {
    if (ts.isExportDeclaration(statement) && !statement.isTypeOnly && statement.exportClause && ts.isNamedExports(statement.exportClause)) {
      for (const e of statement.exportClause.elements) if (!e.isTypeOnly) names.push(e.name.text);
    }
    if (ts.isFunctionDeclaration(statement) && statement.name && statement.modifiers?.some((m) => m.kind === ts.SyntaxKind.ExportKeyword)) {
      names.push(statement.name.text);
    }
  }
  return names;
}

/** The test file a workflow's decisions belong in. */
const testFileOf = (workflow: string) => `test/unit/workflows/${workflow.replace(/[A-Z]/g, (c) => `-${c.toLowerCase()}`)}.test.ts`;

/** The workflows among `names` whose test file is missing. */
function untested(names: string[], exists: (path: string) => boolean): string[] {
  return names.filter((name) => !exists(join(root, testFileOf(name)))).map((name) => `${name}: no ${testFileOf(name)}`);
}

describe('every workflow has a test file of its own', () => {
  const names = exportedNames(readFileSync(join(root, 'workflows/index.ts'), 'utf8'));

  it('finds the workflows the worker registers', () => {
    for (const known of ['accountSyncWorkflow', 'streamSyncWorkflow', 'accountChangesWorkflow', 'subscriptionDeliveryWorkflow', 'maintenanceWorkflow']) {
      assert.ok(names.includes(known), `workflows/index.ts exports ${known}`);
    }
    assert.equal(testFileOf('accountSyncWorkflow'), 'test/unit/workflows/account-sync-workflow.test.ts');
  });

  it('each workflow exported from workflows/index.ts has its test file', () => {
    assert.deepEqual(untested(names, existsSync), []);
  });

  it('a workflow without a test file is named', () => {
    const added = exportedNames(`export { accountSyncWorkflow } from './account-sync.ts';\nexport { ledgerAuditWorkflow } from './ledger-audit.ts';`);
    assert.deepEqual(untested(added, existsSync), ['ledgerAuditWorkflow: no test/unit/workflows/ledger-audit-workflow.test.ts']);
  });
});
