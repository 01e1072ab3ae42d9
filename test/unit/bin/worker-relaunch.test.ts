import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { apiProcessSettings, missingSettings, workerProcessSettings } from '../../../bin/worker-relaunch.js';

describe('worker process settings', () => {
  it('asks for one malloc arena and the V8 flags by default', () => {
    const s = workerProcessSettings({});
    assert.deepEqual(s.env, { MALLOC_ARENA_MAX: '1' });
    assert.deepEqual(s.nodeArgs, ['--max-semi-space-size=4', '--heap-growing-percent=50']);
  });

  it('keeps what the environment says', () => {
    assert.deepEqual(workerProcessSettings({ MALLOC_ARENA_MAX: '4', MIRROR_WORKER_V8_FLAGS: '' }), { env: { MALLOC_ARENA_MAX: '4' }, nodeArgs: [] });
    assert.deepEqual(workerProcessSettings({ MIRROR_WORKER_V8_FLAGS: ' --max-semi-space-size=8 ' }).nodeArgs, ['--max-semi-space-size=8']);
  });

  it('lacks nothing once started with them, whatever values the command line gave', () => {
    assert.deepEqual(missingSettings([], {}), { env: { MALLOC_ARENA_MAX: '1' }, nodeArgs: ['--max-semi-space-size=4', '--heap-growing-percent=50'] });
    assert.deepEqual(missingSettings(['--max_semi_space_size=16', '--heap-growing-percent=50'], { MALLOC_ARENA_MAX: '2' }), { env: {}, nodeArgs: [] });
    assert.deepEqual(missingSettings(['--cpu-prof'], { MALLOC_ARENA_MAX: '1' }).nodeArgs, ['--max-semi-space-size=4', '--heap-growing-percent=50']);
  });

  it('gives an API process a larger young generation, and only that', () => {
    assert.deepEqual(apiProcessSettings({}), { nodeArgs: ['--max-semi-space-size=32'], env: {} });
    assert.deepEqual(apiProcessSettings({ MIRROR_API_V8_FLAGS: '' }).nodeArgs, []);
    assert.deepEqual(missingSettings([], {}, 'api'), { nodeArgs: ['--max-semi-space-size=32'], env: {} });
    assert.deepEqual(missingSettings(['--max-semi-space-size=64'], {}, 'api'), { nodeArgs: [], env: {} });
  });
});
