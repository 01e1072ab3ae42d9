// Secret handling: tokens encrypted at rest (AES-256-GCM), keyed hashes for lookups, HMAC signatures,
// and constant-time comparison. Keys are 32 random bytes, base64 in the environment.
import { createCipheriv, createDecipheriv, createHash, createHmac, randomBytes, timingSafeEqual } from 'node:crypto';

const VERSION = 1;

export function decodeKey(base64: string): Buffer {
  const key = Buffer.from(base64, 'base64');
  if (key.length !== 32) throw new Error('a key must be 32 bytes, base64-encoded');
  return key;
}

export function generateKey(): string {
  return randomBytes(32).toString('base64');
}

/** version (1 byte) | iv (12) | tag (16) | ciphertext */
export function encryptSecret(key: Buffer, plaintext: string): Buffer {
  const iv = randomBytes(12);
  const cipher = createCipheriv('aes-256-gcm', key, iv);
  const body = Buffer.concat([cipher.update(plaintext, 'utf8'), cipher.final()]);
  return Buffer.concat([Buffer.from([VERSION]), iv, cipher.getAuthTag(), body]);
}

export function decryptSecret(key: Buffer, sealed: Uint8Array): string {
  const buf = Buffer.from(sealed);
  if (buf[0] !== VERSION) throw new Error('unknown ciphertext version');
  const decipher = createDecipheriv('aes-256-gcm', key, buf.subarray(1, 13));
  decipher.setAuthTag(buf.subarray(13, 29));
  return Buffer.concat([decipher.update(buf.subarray(29)), decipher.final()]).toString('utf8');
}

/**
 * A keyed hash (HMAC-SHA256, hex) so a secret can be looked up without being stored. Every use of one
 * key goes through {@link domainHash} with a prefix of its own; unprefixed, only to find hashes stored
 * before the domains existed.
 */
export function keyedHash(key: Buffer, value: string): string {
  return createHmac('sha256', key).update(value).digest('hex');
}

/**
 * The uses of the signing key (MIRROR_SIGNING_KEY), each hashing `<prefix><value>`: a value made for
 * one use never stands for another's (an account token that reads `internal:<id>` is not the
 * internal credential of <id>). No prefix begins another. `storageLink` is the storage proxy's MAC
 * (api/storage-proxy.ts, base64url); `webhookAuthorization` is for the upstream webhooks' secrets.
 */
export const hashDomains = {
  accountToken: 'account-token:',
  internal: 'internal:',
  session: 'session:',
  webhookAuthorization: 'webhook-authorization:',
  storageLink: 'storage|',
} as const;
type HashDomain = keyof typeof hashDomains;

/** The keyed hash of `value` in one use's domain. */
export function domainHash(key: Buffer, domain: HashDomain, value: string): string {
  return keyedHash(key, `${hashDomains[domain]}${value}`);
}

export function sha256Hex(value: string): string {
  return createHash('sha256').update(value).digest('hex');
}

/** Constant-time equality of two strings (compares digests so lengths do not leak). */
export function safeEqual(a: string, b: string): boolean {
  const da = createHash('sha256').update(a).digest();
  const db = createHash('sha256').update(b).digest();
  return timingSafeEqual(da, db);
}

export function randomSecret(length: number, alphabet = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789'): string {
  const bytes = randomBytes(length);
  let out = '';
  for (let i = 0; i < length; i++) out += alphabet[bytes[i]! % alphabet.length];
  return out;
}
