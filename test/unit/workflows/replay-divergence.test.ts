// A workflow whose commands were reordered (test/workflows/reordered/: the delivery loop with its timer
// moved before its activity, as an unguarded change would) fails to replay a recorded history, and the
// failure says which file, which workflow and which event of the history diverged.
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { test } from 'node:test';
import { bundleWorkflowCode } from '@temporalio/worker';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { historyFiles, replayFiles, ReplayDivergence } from '../../workflows/replay.ts';

test('a reordered workflow fails the replay, naming the file, the workflow and the event', { timeout: 180_000 }, async () => {
  const file = historyFiles().find((f) => /\/subscription-delivery-1\.json\.gz$/.test(f));
  assert.ok(file, 'a recorded delivery history');
  const { code } = await bundleWorkflowCode({ workflowsPath: join(import.meta.dirname, '../../workflows/reordered/index.ts'), logger: undefined });
  const dir = mkdtempSync(join(tmpdir(), 'mirror-reordered-'));
  try {
    const codePath = join(dir, 'workflows.js');
    writeFileSync(codePath, code);
    const failures = await replayFiles(codePath, [file]);
    assert.equal(failures.length, 1, 'the reordered workflow does not replay the history');
    const failure = failures[0]!;
    assert.ok(failure instanceof ReplayDivergence);
    assert.equal(failure.file, file);
    assert.equal(failure.workflowType, 'subscriptionDeliveryWorkflow');
    // The history's first command is the delivery activity; the reordered code starts a timer instead.
    assert.equal(failure.eventId, '5');
    assert.match(
      failure.message,
      new RegExp(
        `^The history ${file.replace(/[.]/g, '\\.')} of subscriptionDeliveryWorkflow no longer replays: the current code diverges at event 5 ACTIVITY_TASK_SCHEDULED \\(deliverChanges\\)\\.`,
      ),
    );
    assert.match(failure.message, /patched\(\)/);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
