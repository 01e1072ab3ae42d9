// The storage proxy's links. The `url`/`preview_url` fields of files, drawings, documents, photos and
// specification sections are served as the mirror's own signed URLs: an HMAC over the record they
// name (account, resource, scope, id, field) and an expiry. A link carries no secret (no token);
// it is good until it expires, for whoever holds it, like the upstream's own storage URLs. The
// expiry is rounded to a bucket, so a record keeps the same links for a while and stays cacheable.
import { createHmac, timingSafeEqual } from 'node:crypto';
import { resourceDef } from '../lib/resources.ts';

export interface StorageLink {
  accountId: string;
  resource: string;
  scope: string;
  id: string;
  field: string;
  /** Epoch seconds. */
  expiresAt: number;
}

export const linkLifetimeMs = 60 * 60_000;
const bucketMs = 10 * 60_000;

function mac(key: Buffer, l: StorageLink): string {
  return createHmac('sha256', key).update(`storage|${l.accountId}|${l.resource}|${l.scope}|${l.id}|${l.field}|${l.expiresAt}`).digest('base64url');
}

export function linkExpiry(now = Date.now()): number {
  return Math.ceil((Math.floor(now / bucketMs) * bucketMs + linkLifetimeMs) / 1000);
}

export function storageUrl(base: string, key: Buffer, l: StorageLink): string {
  const q = new URLSearchParams({ account: l.accountId, scope: l.scope, expires_at: String(l.expiresAt), signature: mac(key, l) });
  return `${base}/storage/${encodeURIComponent(l.resource)}/${encodeURIComponent(l.id)}/${encodeURIComponent(l.field)}?${q.toString()}`;
}

export type LinkCheck = { ok: true; link: StorageLink } | { ok: false; reason: string };

/** Checks a link's signature (in constant time) and expiry. */
export function verifyLink(key: Buffer, parts: { resource: string; id: string; field: string; account?: string; scope?: string; expiresAt?: string; signature?: string }, now = Date.now()): LinkCheck {
  const { account, scope, expiresAt, signature } = parts;
  if (!account || scope === undefined || !expiresAt || !signature || !/^\d{1,12}$/.test(expiresAt)) {
    return { ok: false, reason: 'This storage link is incomplete: use the url or preview_url the mirror answered, unchanged.' };
  }
  const def = resourceDef(parts.resource);
  if (!def?.urlFields?.includes(parts.field)) return { ok: false, reason: 'Invalid storage link signature.' };
  const link: StorageLink = { accountId: account, resource: parts.resource, scope, id: parts.id, field: parts.field, expiresAt: Number(expiresAt) };
  const given = Buffer.from(signature);
  const expected = Buffer.from(mac(key, link));
  if (given.length !== expected.length || !timingSafeEqual(given, expected)) return { ok: false, reason: 'Invalid storage link signature.' };
  if (link.expiresAt * 1000 <= now) return { ok: false, reason: 'This storage link has expired: read the record again for a fresh one.' };
  return { ok: true, link };
}

export interface RewriteContext {
  base: string;
  key: Buffer;
  accountId: string;
  expiresAt: number;
}

/** A record's JSON with its URL fields turned into the mirror's links (other fields untouched). */
export function rewriteStorageUrls(json: string, resource: string, scope: string, ctx: RewriteContext): string {
  const fields = resourceDef(resource)?.urlFields;
  if (!fields || fields.length === 0) return json;
  const o = JSON.parse(json) as Record<string, unknown>;
  let changed = false;
  for (const field of fields) {
    if (typeof o[field] !== 'string' || o[field] === '' || typeof o.id !== 'string') continue;
    o[field] = storageUrl(ctx.base, ctx.key, { accountId: ctx.accountId, resource, scope, id: o.id, field, expiresAt: ctx.expiresAt });
    changed = true;
  }
  return changed ? JSON.stringify(o) : json;
}
