// Workflows already running in users' deployments replay under new code. Histories recorded with the
// code before issue 22 (lists across projects, children of changed parents, sweeps, removed projects:
// a BuildPro and a GraphLedger account, a full and an incremental pass each, and a children workflow)
// must replay without a nondeterminism error: the new commands are behind `patched()`.
import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { gunzipSync } from 'node:zlib';
import { test } from 'node:test';
import { Worker } from '@temporalio/worker';
import { workflowBundlePath } from '../../../bin/workflow-bundle.ts';

const dir = join(import.meta.dirname, 'histories');

test('histories recorded before issue 22 replay under the current workflows', { timeout: 180_000 }, async () => {
  const files = readdirSync(dir).filter((f) => f.endsWith('.json.gz'));
  assert.ok(files.length >= 6, `histories in ${dir}`);
  const codePath = await workflowBundlePath();
  for (const file of files) {
    // The JSON form (the Temporal UI's and CLI's export): the worker reads it as it is.
    const history: unknown = JSON.parse(gunzipSync(readFileSync(join(dir, file))).toString('utf8'));
    await Worker.runReplayHistory({ workflowBundle: { codePath } }, history, file);
  }
});
