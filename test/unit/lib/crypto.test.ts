import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { decodeKey, decryptSecret, encryptSecret, generateKey, keyedHash, safeEqual } from '../../../lib/crypto.ts';

describe('secrets at rest', () => {
  it('round-trips a token and fails with another key or a tampered ciphertext', () => {
    const key = decodeKey(generateKey());
    const sealed = encryptSecret(key, 'account-token-123');
    assert.ok(!sealed.toString('utf8').includes('account-token-123'));
    assert.equal(decryptSecret(key, sealed), 'account-token-123');
    assert.throws(() => decryptSecret(decodeKey(generateKey()), sealed));
    const tampered = Buffer.from(sealed);
    tampered[tampered.length - 1]! ^= 1;
    assert.throws(() => decryptSecret(key, tampered));
  });
  it('hashes with a key and compares in constant time', () => {
    const k1 = decodeKey(generateKey());
    const k2 = decodeKey(generateKey());
    assert.equal(keyedHash(k1, 'x'), keyedHash(k1, 'x'));
    assert.notEqual(keyedHash(k1, 'x'), keyedHash(k2, 'x'));
    assert.equal(safeEqual('abc', 'abc'), true);
    assert.equal(safeEqual('abc', 'abcd'), false);
  });
});
