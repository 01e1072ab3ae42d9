import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { writeDepth } from '../../../activities/sync.ts';
import { activitySlots, workerPoolSize } from '../../../bin/temporal-worker.ts';

describe('workerPoolSize', () => {
  it('leaves connections over when every activity has all its pages waiting on the one before', () => {
    for (const SYNC_STREAM_CONCURRENCY of [1, 4, 16, 64]) {
      const config = { SYNC_STREAM_CONCURRENCY };
      const waiting = activitySlots(config) * (writeDepth - 1);
      assert.ok(workerPoolSize(config) >= waiting + 4, `${workerPoolSize(config)} connections for ${waiting} waiting pages`);
    }
    assert.equal(workerPoolSize({ SYNC_STREAM_CONCURRENCY: 4 }), 24);
  });
});
