// The age bound a read asks for (Cache-Control, Pragma), and the bounded memory of the upstream's
// answers about single objects: a not-found answer stands for its window, concurrent lookups of one
// object share one request, and the memory never holds more than its bound.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { freshEnough, maxAgeOf, ObjectLookups } from '../../../api/read-freshness.ts';

describe('maxAgeOf', () => {
  it('reads max-age and no-cache, the smallest bound of several', () => {
    assert.equal(maxAgeOf({}), undefined);
    assert.equal(maxAgeOf({ 'cache-control': 'max-age=60' }), 60);
    assert.equal(maxAgeOf({ 'cache-control': 'Max-Age="30"' }), 30);
    assert.equal(maxAgeOf({ 'cache-control': 'no-cache' }), 0);
    assert.equal(maxAgeOf({ 'cache-control': 'max-age=60, no-cache' }), 0);
    assert.equal(maxAgeOf({ 'cache-control': 'max-age=600, max-age=20' }), 20);
  });

  it('takes a malformed max-age as 0 and ignores directives that do not bound the age', () => {
    assert.equal(maxAgeOf({ 'cache-control': 'max-age=soon' }), 0);
    assert.equal(maxAgeOf({ 'cache-control': 'max-age=-5' }), 0);
    assert.equal(maxAgeOf({ 'cache-control': 'no-store, max-stale=100' }), undefined);
  });

  it('counts Pragma: no-cache only without a Cache-Control header', () => {
    assert.equal(maxAgeOf({ pragma: 'no-cache' }), 0);
    assert.equal(maxAgeOf({ pragma: 'no-cache', 'cache-control': 'max-age=90' }), 90);
  });
});

describe('freshEnough', () => {
  it('accepts anything without a bound and nothing never verified with one', () => {
    assert.equal(freshEnough(null, undefined), true);
    assert.equal(freshEnough(null, 60), false);
    assert.equal(freshEnough(1_000, 60, 61_000), true);
    assert.equal(freshEnough(1_000, 60, 61_001), false);
    assert.equal(freshEnough(1_000, 0, 1_001), false);
  });
});

describe('ObjectLookups', () => {
  const key = (ref: string) => ({ accountId: 'a', resource: 'vendors', scope: '', ref });

  it('remembers a not-found answer for its window, a found one with its time', () => {
    let now = 0;
    const lookups = new ObjectLookups({ notFoundMs: 1000, now: () => now });
    lookups.remember(key('x'), false);
    lookups.remember(key('y'), true, 0);
    now = 999;
    assert.deepEqual(lookups.recent(key('x')), { found: false, at: 0 });
    now = 1000;
    assert.equal(lookups.recent(key('x')), undefined, 'the window is over: the upstream is asked again');
    assert.deepEqual(lookups.recent(key('y')), { found: true, at: 0 });
    assert.equal(lookups.recent({ ...key('y'), accountId: 'b' }), undefined, 'another account never sees the answer');
  });

  it('shares one lookup among concurrent reads of an object', async () => {
    const lookups = new ObjectLookups();
    let calls = 0;
    let release!: () => void;
    const gate = new Promise<void>((resolve) => (release = resolve));
    const lookup = async () => {
      calls++;
      await gate;
      return 'answer';
    };
    const all = Promise.all([lookups.once(key('x'), lookup), lookups.once(key('x'), lookup), lookups.once(key('z'), lookup)]);
    release();
    assert.deepEqual(await all, ['answer', 'answer', 'answer']);
    assert.equal(calls, 2, 'one per object');
    await lookups.once(key('x'), lookup);
    assert.equal(calls, 3, 'a lookup after the last one ended asks again');
  });

  it('holds at most its bound, forgetting the oldest first', () => {
    const lookups = new ObjectLookups({ maxEntries: 3 });
    for (const ref of ['a', 'b', 'c', 'd']) lookups.remember(key(ref), false);
    assert.equal(lookups.size, 3);
    assert.equal(lookups.recent(key('a')), undefined);
    assert.ok(lookups.recent(key('d')));
  });
});
