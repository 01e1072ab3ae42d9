// The order `npm test` hands files to node's runner: the committed slow list first, in its order,
// so the long files start at once and the short ones fill the cores at the end.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { projectRoot } from '../../../bin/setup-steps.ts';
import { readSlowFiles, slowestFirst } from '../../../bin/test-runner.ts';

describe('test files slowest first', () => {
  it("puts the slow list's files first in its order, the others after in the order given", () => {
    const given = ['test/a.test.ts', 'test/b.test.ts', 'test/c.test.ts', 'test/d.test.ts'];
    assert.deepEqual(slowestFirst(given, ['test/c.test.ts', 'test/gone.test.ts', 'test/a.test.ts']), [
      'test/c.test.ts',
      'test/a.test.ts',
      'test/b.test.ts',
      'test/d.test.ts',
    ]);
    assert.deepEqual(slowestFirst(given, []), given);
    assert.deepEqual(slowestFirst(['test/b.test.ts'], ['test/a.test.ts']), ['test/b.test.ts'], 'a run of some files runs only those');
  });

  it('the committed list names test files that exist, each once', () => {
    const slow = readSlowFiles();
    assert.ok(slow.length >= 10, 'the list is read (comments and timings left out)');
    for (const p of slow) assert.ok(p.endsWith('.test.ts') && existsSync(join(projectRoot, p)), `${p} exists`);
    assert.equal(new Set(slow).size, slow.length);
  });

  it('the runner starts the files in the order given, not by name (as `node --test` would)', () => {
    const dir = mkdtempSync(join(tmpdir(), 'mirror-order-'));
    try {
      const log = join(dir, 'started');
      const files = ['c', 'a', 'b'].map((n) => {
        const f = join(dir, `${n}.test.mjs`);
        writeFileSync(
          f,
          `import { appendFileSync } from 'node:fs';\nimport { it } from 'node:test';\nit('${n}', () => appendFileSync(${JSON.stringify(log)}, '${n}'));\n`,
        );
        return f;
      });
      // Outside this test's own runner, as `npm test` starts it (inside one, node's runner starts no files).
      const { NODE_TEST_CONTEXT: _inside, ...env } = process.env;
      const r = spawnSync(process.execPath, ['--import', 'tsx', join(projectRoot, 'test', 'helpers', 'run-in-order.ts'), '1', ...files], {
        cwd: projectRoot,
        env,
        encoding: 'utf8',
      });
      assert.equal(r.status, 0, r.stderr);
      assert.equal(readFileSync(log, 'utf8'), 'cab');
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
