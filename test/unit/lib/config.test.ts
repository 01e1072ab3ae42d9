import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { incrementalMinutes, parseConfig } from '../../../lib/config.ts';
import { generateKey } from '../../../lib/crypto.ts';
import { ConfigError } from '../../../lib/errors.ts';

const valid = {
  UPSTREAM_CLIENT_ID: '0123456789abcdef0123456789abcdef0123',
  UPSTREAM_CLIENT_SECRET: 'a'.repeat(40),
  MIRROR_CLIENT_ID: 'fedcba9876543210fedcba9876543210fedc',
  MIRROR_CLIENT_SECRET: 'b'.repeat(40),
  MIRROR_ENCRYPTION_KEY: generateKey(),
  MIRROR_SIGNING_KEY: generateKey(),
};

describe('parseConfig', () => {
  it('applies defaults', () => {
    const c = parseConfig(valid);
    assert.equal(c.UPSTREAM_HEADER_PREFIX, 'Svc');
    assert.equal(c.API_PORT, 4000);
    assert.match(c.DATABASE_URL, /mirror$/);
  });
  it('refuses to start with a list of everything that is wrong, saying what to set', () => {
    try {
      parseConfig({ ...valid, UPSTREAM_CLIENT_SECRET: 'short', MIRROR_ENCRYPTION_KEY: 'nope', API_PORT: '99999' });
      assert.fail('expected a ConfigError');
    } catch (error) {
      assert.ok(error instanceof ConfigError);
      assert.match(error.message, /UPSTREAM_CLIENT_SECRET/);
      assert.match(error.message, /MIRROR_ENCRYPTION_KEY/);
      assert.match(error.message, /API_PORT/);
      assert.match(error.message, /mirror setup/);
      assert.equal(error.details.length, 3);
      assert.ok(!error.message.includes('short'), 'the bad secret itself is not echoed');
    }
  });
  it('reads replicas as a comma-separated list of postgres URLs, refusing others without echoing them', () => {
    const none = parseConfig(valid);
    assert.deepEqual(none.DATABASE_REPLICA_URLS, []);
    assert.equal(none.MIRROR_REPLICA_MAX_LAG_MS, 5000);
    const two = parseConfig({
      ...valid,
      DATABASE_REPLICA_URLS: ' postgresql://reader:pw@10.0.0.2:5432/mirror, postgres://10.0.0.3/mirror ,',
      MIRROR_REPLICA_MAX_LAG_MS: '250',
    });
    assert.deepEqual(two.DATABASE_REPLICA_URLS, ['postgresql://reader:pw@10.0.0.2:5432/mirror', 'postgres://10.0.0.3/mirror']);
    assert.equal(two.MIRROR_REPLICA_MAX_LAG_MS, 250);
    assert.throws(
      () => parseConfig({ ...valid, DATABASE_REPLICA_URLS: 'http://reader:hunter2@replica/mirror', MIRROR_REPLICA_MAX_LAG_MS: '-1' }),
      (error: unknown) =>
        error instanceof ConfigError &&
        /DATABASE_REPLICA_URLS.*postgres/.test(error.message) &&
        /MIRROR_REPLICA_MAX_LAG_MS/.test(error.message) &&
        !error.message.includes('hunter2'),
    );
  });
});

describe('incrementalMinutes', () => {
  it('derives the incremental passes period from the freshness target unless it is set', () => {
    // The default target (1 h): every 15 minutes, as before.
    assert.equal(incrementalMinutes(parseConfig(valid)), 15);
    // A quarter of a shorter target, so lists can be kept within it; never under a minute.
    assert.equal(incrementalMinutes(parseConfig({ ...valid, SYNC_FRESHNESS_TARGET: '20m' })), 5);
    assert.equal(incrementalMinutes(parseConfig({ ...valid, SYNC_FRESHNESS_TARGET: '90s' })), 1);
    // Never over 15 minutes for a longer target; an explicit period stands.
    assert.equal(incrementalMinutes(parseConfig({ ...valid, SYNC_FRESHNESS_TARGET: '4h' })), 15);
    assert.equal(incrementalMinutes(parseConfig({ ...valid, SYNC_FRESHNESS_TARGET: '20m', SYNC_INCREMENTAL_MINUTES: '30' })), 30);
  });
});
