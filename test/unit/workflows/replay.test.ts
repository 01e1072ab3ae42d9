// Workflows already running in users' deployments replay under new code. Every history recorded for a
// release (test/workflows/histories/<release>/, `npx mirror record-histories --release <name>`) must
// replay against the current workflows without a nondeterminism error: changes to the commands of a
// running workflow go behind `patched()` (CONTRIBUTING.md). Among them: passes recorded before
// lists across projects and before adaptive polling, and today's full and incremental passes, stream passes of
// several slices and of async pages, the change workflow across a continue-as-new, a delivery and an
// async request.
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { test } from 'node:test';
import { workflowBundlePath } from '../../../bin/workflow-bundle.ts';
import { historiesRoot, historyFiles, readHistory, replayFiles, workflowTypeOf } from '../../workflows/replay.ts';

test('every recorded history replays under the current workflows', { timeout: 300_000 }, async () => {
  const files = historyFiles();
  const releases = new Set(files.map((f) => f.split('/')[0]));
  assert.ok(releases.size >= 3 && files.length >= 20, `recorded histories in ${historiesRoot}: ${files.length} in ${releases.size} releases`);
  const types = new Set(files.map((f) => workflowTypeOf(readHistory(join(historiesRoot, f)))));
  for (const workflow of ['accountSyncWorkflow', 'streamSyncWorkflow', 'accountChangesWorkflow', 'subscriptionDeliveryWorkflow', 'asyncRequestWorkflow']) {
    assert.ok(types.has(workflow), `a recorded history of ${workflow}`);
  }
  const failures = await replayFiles(await workflowBundlePath(), files);
  assert.deepEqual(
    failures.map((f) => f.message),
    [],
    `${failures.length} of ${files.length} histories diverge`,
  );
});
