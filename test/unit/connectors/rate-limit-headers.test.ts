import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { readRateLimits, resetAtOf } from '../../../connectors/rate-limit-headers.ts';

describe('readRateLimits', () => {
  it('reads the service window and every source-system window, with a configurable prefix', () => {
    const r = readRateLimits(
      {
        'svc-ratelimit-total': '150',
        'svc-ratelimit-remaining': '149',
        'buildpro-ratelimit-total': '60',
        'buildpro-ratelimit-remaining': '12',
        'buildpro-ratelimit-resetsattimestamp': '1700000000',
        'content-type': 'application/json',
      },
      'Svc',
    );
    assert.deepEqual(r.service, { total: 150, remaining: 149 });
    assert.deepEqual(r.sourceSystems, { buildpro: { total: 60, remaining: 12, resetsAt: 1_700_000_000_000 } });
    const branded = readRateLimits({ 'agave-ratelimit-total': '600', 'agave-ratelimit-remaining': '5' }, 'Agave');
    assert.deepEqual(branded.service, { total: 600, remaining: 5 });
    assert.deepEqual(branded.sourceSystems, {});
  });
  it('ignores incomplete or non-numeric headers', () => {
    const r = readRateLimits({ 'svc-ratelimit-total': 'abc', 'svc-ratelimit-remaining': '1', 'x-ratelimit-total': '5' }, 'Svc');
    assert.equal(r.service, undefined);
    assert.deepEqual(r.sourceSystems, {});
  });
  it('waits for the latest future reset, else a window', () => {
    const now = 1_000_000;
    assert.equal(
      resetAtOf({ sourceSystems: { a: { total: 1, remaining: 0, resetsAt: now + 5000 }, b: { total: 1, remaining: 0, resetsAt: now + 9000 } } }, now),
      now + 9000,
    );
    assert.equal(resetAtOf({ sourceSystems: {} }, now, 60_000), now + 60_000);
  });
});
