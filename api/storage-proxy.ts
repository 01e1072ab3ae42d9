// The storage proxy's links. The `url`/`preview_url` fields of files, drawings, documents, photos and
// specification sections are served as the mirror's own signed URLs: an HMAC over the record they
// name (account, resource, scope, id, field) and an expiry. A link carries no secret (no token);
// it is good until it expires, for whoever holds it, like the upstream's own storage URLs. The
// expiry is rounded to a bucket, so a record keeps the same links for a while and stays cacheable.
// Links are built on the mirror's own base (PUBLIC_BASE_URL, else its listen address), never on a
// request's Host header; and behind a link only the upstream's storage URLs are ever fetched.
import { createHmac, timingSafeEqual } from 'node:crypto';
import type { AddressInfo } from 'node:net';
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

const linkLifetimeMs = 60 * 60_000;
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

type LinkCheck = { ok: true; link: StorageLink } | { ok: false; reason: string };

/** Checks a link's signature (in constant time) and expiry. */
export function verifyLink(
  key: Buffer,
  parts: { resource: string; id: string; field: string; account?: string; scope?: string; expiresAt?: string; signature?: string },
  now = Date.now(),
): LinkCheck {
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

interface RewriteContext {
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

/**
 * The base of the mirror's links: the configured public URL when there is one, else the address the
 * API listens on (known only once it listens: port 0 in tests and `demo --once`). Never a request's
 * Host or X-Forwarded-* header: those are the caller's to choose, and a link built on them points
 * wherever the caller likes (poisoning every cache that keeps the answer).
 */
export function linkBase(server: { address(): AddressInfo | string | null }, configured?: string): () => string {
  if (configured) {
    const base = configured.replace(/\/+$/, '');
    return () => base;
  }
  let known: string | undefined;
  return () => {
    if (known) return known;
    const a = server.address();
    if (!a || typeof a === 'string') return 'http://127.0.0.1:4000';
    // A wildcard address is reached through loopback on this machine (as PUBLIC_BASE_URL's default).
    const host = a.address === '0.0.0.0' || a.address === '::' ? '127.0.0.1' : a.family === 'IPv6' ? `[${a.address}]` : a.address;
    known = `http://${host}:${a.port}`;
    return known;
  };
}

/** Where the upstream's storage URLs live: one origin and the path its `/download` and `/preview` sit under. */
interface StorageLocation {
  origin: string;
  /** Without a trailing slash: '' for storage at the origin's root. */
  path: string;
}

/** Unset UPSTREAM_STORAGE_URL: the upstream base URL's `/storage` (the sandbox's `{storage_url}`). */
export function defaultStorageUrls(upstreamBaseUrl: string): string[] {
  return [`${upstreamBaseUrl.replace(/\/+$/, '')}/storage`];
}

export function storageLocations(urls: readonly string[]): StorageLocation[] {
  return urls.map((u) => {
    const url = new URL(u);
    return { origin: url.origin, path: url.pathname.replace(/\/+$/, '') };
  });
}

type StorageUrlCheck = { ok: true; url: string } | { ok: false; reason: string };

const maxStorageUrlLength = 8192;

/** A path segment that a server decoding it once or twice could read as `.`, `..` or a separator. */
function unsafeSegment(segment: string): boolean {
  let s = segment;
  for (let i = 0; i < 3; i++) {
    if (s === '.' || s === '..' || s.includes('/') || s.includes('\\')) return true;
    let decoded: string;
    try {
      decoded = decodeURIComponent(s);
    } catch {
      // Bad percent-encoding as written is refused; once decoded, a literal `%` ends the decoding.
      return i === 0;
    }
    if (decoded === s) return false;
    s = decoded;
  }
  // Still changing after three decodings: nobody's file name.
  return true;
}

/**
 * Whether a URL a record holds is one the upstream's storage issued, so the proxy may fetch it:
 * http(s) on one of the storage origins (scheme, host and port), no user info, exactly
 * `{storage path}/download/<file>` or `/preview/<file>`, and written so that neither the URL parser
 * nor the storage server could read it as another path (no dot segments, encoded or not, no
 * backslashes, no encoded separators, nothing the parser would rewrite). Anything else, whoever
 * stored it (a write, an upstream answer), is refused: the mirror fetching it would reach whatever
 * address it names and stream the answer back to the caller.
 */
export function checkStorageUrl(value: unknown, locations: readonly StorageLocation[]): StorageUrlCheck {
  if (typeof value !== 'string' || value === '') return { ok: false, reason: 'no URL' };
  if (value.length > maxStorageUrlLength) return { ok: false, reason: 'overlong URL' };
  // Printable ASCII only: no whitespace or control characters (which parsers drop or split on), no
  // backslash (which URL parsers turn into a slash), no raw non-ASCII.
  if (!/^[\x21-\x7e]+$/.test(value) || value.includes('\\')) return { ok: false, reason: 'characters a storage URL never has' };
  const m = /^(https?):\/\/([^/?#]+)(\/[^?#]*)(\?[^#]*)?$/i.exec(value);
  if (!m) return { ok: false, reason: 'not an absolute http(s) URL with a path and no fragment' };
  const authority = m[2]!;
  const rawPath = m[3]!;
  if (authority.includes('@')) return { ok: false, reason: 'user info in the URL' };
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    return { ok: false, reason: 'not a URL' };
  }
  if ((url.protocol !== 'http:' && url.protocol !== 'https:') || url.username || url.password) return { ok: false, reason: 'not a plain http(s) URL' };
  // The parser resolved dot segments (`..`, `%2e%2e`) or re-encoded something: the path the server
  // would see is not the one written.
  if (url.pathname !== rawPath) return { ok: false, reason: 'a path the URL parser rewrites' };
  const segments = rawPath.split('/').slice(1);
  if (segments.some(unsafeSegment)) return { ok: false, reason: 'dot segments or encoded separators in the path' };
  for (const loc of locations) {
    if (url.origin !== loc.origin) continue;
    if (!rawPath.startsWith(`${loc.path}/`)) continue;
    if (/^\/(?:download|preview)\/[^/]+$/.test(rawPath.slice(loc.path.length))) return { ok: true, url: url.href };
  }
  return { ok: false, reason: 'not under the upstream storage URL (UPSTREAM_STORAGE_URL)' };
}
