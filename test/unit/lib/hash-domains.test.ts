// The signing key's keyed hashes are domain-separated: every use hashes
// `<its prefix><value>`, no prefix begins another, and an account token's lookup hash is not the
// unprefixed hash older versions stored.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { internalToken } from '../../../api/auth.ts';
import { sessionSecretHash } from '../../../api/sessions.ts';
import { domainHash, generateKey, decodeKey, hashDomains, keyedHash } from '../../../lib/crypto.ts';
import { AccountStore } from '../../../mirror/control/accounts.ts';
import type { PrismaClient } from '../../../mirror/db/prisma.ts';

describe('hash domains of the signing key', () => {
  const key = decodeKey(generateKey());

  it('gives every use its own prefix, none beginning another', () => {
    const prefixes = Object.values(hashDomains);
    assert.equal(new Set(prefixes).size, prefixes.length);
    for (const a of prefixes) for (const b of prefixes) if (a !== b) assert.ok(!b.startsWith(a), `${a} begins ${b}`);
    assert.equal(hashDomains.accountToken, 'account-token:');
  });

  it('hashes account tokens in their own domain, apart from the legacy unprefixed hash', () => {
    const store = new AccountStore({} as PrismaClient, { encryptionKey: key, hashKey: key });
    const token = 'tok-123';
    assert.equal(store.tokenHash(token), keyedHash(key, `account-token:${token}`));
    assert.equal(store.tokenHash(token), domainHash(key, 'accountToken', token));
    assert.equal(store.legacyTokenHash(token), keyedHash(key, token));
    assert.notEqual(store.tokenHash(token), store.legacyTokenHash(token));
  });

  it('keeps the internal credential and session hashes in theirs (their values unchanged)', () => {
    const id = '0b4c2a52-5d0e-4a4c-9d6e-1f2a3b4c5d6e';
    assert.equal(internalToken(key, id), `${id}.${keyedHash(key, `internal:${id}`)}`);
    assert.equal(sessionSecretHash(key, 's'), keyedHash(key, 'session:s'));
    // An account token shaped like an internal credential's input hashes to something else.
    const store = new AccountStore({} as PrismaClient, { encryptionKey: key, hashKey: key });
    assert.notEqual(store.tokenHash(`internal:${id}`), internalToken(key, id).split('.')[1]);
  });
});
