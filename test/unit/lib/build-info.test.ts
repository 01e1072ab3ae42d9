// The release a process reports: package.json's version, and the commit from MIRROR_COMMIT or git,
// null (never an error) where neither says.
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { buildInfo, readBuildInfo, releaseLabel, workerIdentity } from '../../../lib/build-info.ts';

const root = join(import.meta.dirname, '../../..');
const version = (JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')) as { version: string }).version;

describe('build info', () => {
  it("is package.json's version and the checkout's commit", () => {
    const head = execFileSync('git', ['rev-parse', 'HEAD'], { cwd: root, encoding: 'utf8' }).trim();
    const env = { ...process.env, MIRROR_COMMIT: undefined };
    assert.deepEqual(readBuildInfo(env, root), { version, commit: head });
    assert.equal(buildInfo().version, version);
    assert.equal(releaseLabel({ version: '1.2.3', commit: head }), `1.2.3+${head.slice(0, 12)}`);
    assert.match(workerIdentity({ version: '1.2.3', commit: null }), /^\d+@\S+ construction-mirror\/1\.2\.3$/);
  });

  it('takes MIRROR_COMMIT first (an image built without .git), and ignores one that is not a commit', () => {
    assert.equal(readBuildInfo({ ...process.env, MIRROR_COMMIT: 'ABCDEF1234567' }, root).commit, 'abcdef1234567');
    assert.equal(readBuildInfo({ ...process.env, MIRROR_COMMIT: 'main; rm -rf /' }, root).commit, null);
  });

  it('says null, without failing, where git is absent or the folder is no repository', () => {
    assert.deepEqual(readBuildInfo({ PATH: '/nonexistent' }, root), { version, commit: null });
    const dir = mkdtempSync(join(tmpdir(), 'mirror-build-info-'));
    try {
      writeFileSync(join(dir, 'package.json'), JSON.stringify({ version: '9.9.9' }));
      // GIT_CEILING_DIRECTORIES: git must not find a repository above the temporary folder either.
      assert.deepEqual(readBuildInfo({ ...process.env, MIRROR_COMMIT: undefined, GIT_CEILING_DIRECTORIES: tmpdir() }, dir), { version: '9.9.9', commit: null });
      assert.equal(releaseLabel({ version: '9.9.9', commit: null }), '9.9.9');
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
