// The lint's check for exports that nothing imports (scripts/unused-exports.ts, run by `npm run lint`):
// on a small tree of its own, an export no module takes is reported; one taken by an import, an
// import() or a re-export, or by a test, is not.
import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { after, describe, it } from 'node:test';
import { unusedExports } from '../../../scripts/unused-exports.ts';

const root = mkdtempSync(join(tmpdir(), 'unused-exports-'));
after(() => rmSync(root, { recursive: true, force: true }));
const write = (files: Record<string, string>) => {
  for (const [path, text] of Object.entries(files)) {
    mkdirSync(dirname(join(root, path)), { recursive: true });
    writeFileSync(join(root, path), text);
  }
};

describe('unused exports', () => {
  it('reports an export nothing imports, and none that something takes', () => {
    write({
      'mirror/reads/a.ts': [
        'export const imported = 1;',
        'export function dynamic() {}',
        'export type Reexported = number;',
        'export const forTests = 2;',
        'export const unused = 3;',
        'export interface UnusedType { a: number }',
      ].join('\n'),
      'api/b.ts': "import { imported } from '../mirror/reads/a.ts';\nexport type { Reexported } from '../mirror/reads/a.ts';\nexport const b = imported;",
      'bin/c.ts':
        "import { b } from '../api/b.ts';\nimport type { Reexported } from '../api/b.ts';\nexport async function c(): Promise<Reexported> {\n  const { dynamic } = await import('../mirror/reads/a.ts');\n  dynamic();\n  return b;\n}",
      'test/unit/a.test.ts': "import { forTests } from '../../mirror/reads/a.ts';\nimport { c } from '../../bin/c.ts';\nvoid [forTests, c];",
    });
    assert.deepEqual(unusedExports(root), ['mirror/reads/a.ts: unused', 'mirror/reads/a.ts: UnusedType']);
  });
});
