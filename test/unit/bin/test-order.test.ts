// The order `npm test` hands files to node's runner: the committed slow list first, in its order,
// so the long files start at once and the short ones fill the cores at the end.
import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { projectRoot } from '../../../bin/setup.ts';
import { readSlowFiles, slowestFirst } from '../../../bin/test-runner.ts';

describe('test files slowest first', () => {
  it('puts the slow list\'s files first in its order, the others after in the order given', () => {
    const given = ['test/a.test.ts', 'test/b.test.ts', 'test/c.test.ts', 'test/d.test.ts'];
    assert.deepEqual(slowestFirst(given, ['test/c.test.ts', 'test/gone.test.ts', 'test/a.test.ts']), ['test/c.test.ts', 'test/a.test.ts', 'test/b.test.ts', 'test/d.test.ts']);
    assert.deepEqual(slowestFirst(given, []), given);
    assert.deepEqual(slowestFirst(['test/b.test.ts'], ['test/a.test.ts']), ['test/b.test.ts'], 'a run of some files runs only those');
  });

  it('the committed list names test files that exist, each once', () => {
    const slow = readSlowFiles();
    assert.ok(slow.length >= 10, 'the list is read (comments and timings left out)');
    for (const p of slow) assert.ok(p.endsWith('.test.ts') && existsSync(join(projectRoot, p)), `${p} exists`);
    assert.equal(new Set(slow).size, slow.length);
  });
});
