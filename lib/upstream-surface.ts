// The upstream's unified API surface, and the forwarder's path rule over it: the upstream path a
// forwarded request may reach is rebuilt from the request's parsed and validated segments, never
// taken from the raw URL (which an HTTP client normalises: `\` becomes `/`, `..` is resolved), and it
// must be a path of the surface that the caller's credential may reach. Pure: unit-tested over a
// table of hostile paths (test/unit/lib/upstream-surface.test.ts).
import { resourceDef, resources } from './resources.ts';
import { requiredScope, sessionAllows } from './session-scopes.ts';

export type CollectionOperation = 'list' | 'get' | 'create' | 'update' | 'delete' | 'bulk-patch' | 'post-item' | 'endpoint';

/**
 * Facts: every collection path of the real service's published request collection (exported
 * 2024-09-10), with the operations it showed (list = GET collection, get = GET item, create = POST
 * collection, update = PUT item, delete = DELETE item, bulk-patch = PATCH collection, post-item = POST
 * item, endpoint = the path itself). `{id}` stands for exactly one segment. Kept here because the
 * mirror must not read its reference files at run time; a unit test compares it with the reference
 * file when that file is at hand.
 */
export const realServiceCollections: readonly (readonly [path: string, operations: readonly CollectionOperation[]])[] = [
  ['/activities', ['create', 'delete', 'get', 'list', 'update']],
  ['/activities/{id}/attachments', ['create']],
  ['/actual-production-quantities', ['create', 'delete', 'get', 'list', 'update']],
  ['/admin/accounts', ['endpoint']],
  ['/admin/accounts/{id}', ['endpoint']],
  ['/admin/accounts/{id}/events', ['endpoint']],
  ['/admin/accounts/{id}/requests', ['endpoint']],
  ['/admin/accounts/{id}/revoke-tokens', ['endpoint']],
  ['/admin/accounts/{id}/sessions', ['endpoint']],
  ['/admin/link-tokens', ['endpoint']],
  ['/ap-invoices', ['create', 'delete', 'get', 'list', 'update']],
  ['/ap-invoices/{id}/line-items', ['create', 'delete', 'get', 'list', 'update']],
  ['/ap-payments', ['create', 'delete', 'get', 'list', 'update']],
  ['/ap-payments/{id}/line-items', ['create', 'delete', 'get', 'list', 'update']],
  ['/appointments', ['get', 'list']],
  ['/ar-invoices', ['create', 'delete', 'get', 'list', 'update']],
  ['/ar-invoices/{id}/line-items', ['create', 'delete', 'get', 'list', 'update']],
  ['/ar-payments', ['create', 'delete', 'get', 'list', 'update']],
  ['/ar-payments/{id}/line-items', ['create', 'delete', 'get', 'list', 'update']],
  ['/assets', ['create', 'get', 'list', 'update']],
  ['/async-requests/{id}', ['endpoint']],
  ['/bank-accounts', ['get', 'list']],
  ['/batches', ['create', 'get', 'list', 'update']],
  ['/budget-line-items', ['bulk-patch', 'create', 'delete', 'get', 'list', 'update']],
  ['/budget-production-quantities', ['create', 'delete', 'get', 'list', 'update']],
  ['/budget-transfers', ['create', 'delete', 'get', 'list']],
  ['/budget-transfers/{id}/line-items', ['get', 'list']],
  ['/cache/{id}', ['endpoint']],
  ['/cache/repopulate', ['endpoint']],
  ['/cache/repopulate/latest', ['endpoint']],
  ['/change-events', ['create', 'delete', 'get', 'list', 'update']],
  ['/change-events/{id}/attachments', ['create']],
  ['/change-events/{id}/line-items', ['create', 'delete', 'get', 'list', 'update']],
  ['/change-orders', ['bulk-patch', 'create', 'delete', 'get', 'list', 'update']],
  ['/change-orders/{id}/line-items', ['create', 'delete', 'get', 'list', 'update']],
  ['/checklist-templates', ['get', 'list']],
  ['/checklists', ['get', 'list']],
  ['/contacts', ['create', 'delete', 'get', 'list', 'update']],
  ['/coordination-issues', ['create', 'delete', 'get', 'list', 'update']],
  ['/coordination-issues/{id}/attachments', ['create']],
  ['/coordination-issues/{id}/viewpoints', ['create']],
  ['/cost-codes', ['create', 'delete', 'get', 'list', 'update']],
  ['/cost-projections', ['create', 'delete', 'get', 'list', 'update']],
  ['/cost-types', ['create', 'delete', 'get', 'list', 'update']],
  ['/customers', ['create', 'delete', 'get', 'list', 'update']],
  ['/customers/{id}/contacts', ['create', 'delete', 'get', 'list', 'update']],
  ['/departments', ['get', 'list']],
  ['/drawing-areas', ['get', 'list']],
  ['/drawings', ['get', 'list']],
  ['/drawings/{id}/versions', ['get', 'list']],
  ['/employees', ['create', 'delete', 'get', 'list', 'update']],
  ['/estimates', ['create', 'delete', 'get', 'list', 'update']],
  ['/estimates/{id}/line-items', ['create', 'delete', 'get', 'list', 'update']],
  ['/expenses', ['create', 'delete', 'get', 'list', 'update']],
  ['/expenses/{id}/line-items', ['create', 'delete', 'get', 'list', 'update']],
  ['/file-transfers/{id}', ['endpoint']],
  ['/files', ['delete', 'get', 'update']],
  ['/files/{id}/transfer', ['endpoint']],
  ['/files/{id}/versions', ['create', 'get', 'list']],
  ['/folders', ['create', 'delete', 'get', 'update']],
  ['/folders/{id}/files', ['create', 'list']],
  ['/folders/{id}/transfer', ['endpoint']],
  ['/inventory-locations', ['create', 'delete', 'get', 'list', 'update']],
  ['/issues', ['list']],
  ['/item-receipts', ['create', 'delete', 'get', 'list', 'update']],
  ['/item-receipts/{id}/line-items', ['create', 'delete', 'get', 'list', 'update']],
  ['/items', ['create', 'delete', 'get', 'list', 'update']],
  ['/job-costs', ['create', 'delete', 'get', 'list', 'update']],
  ['/jobs', ['get', 'list']],
  ['/leads', ['get', 'list']],
  ['/ledger-accounts', ['create', 'get', 'list', 'update']],
  ['/ledger-journal-entries', ['create', 'delete', 'get', 'list', 'update']],
  ['/ledger-journal-entries/{id}/line-items', ['create', 'delete', 'get', 'list', 'update']],
  ['/ledger-journals', ['get', 'list', 'post-item', 'update']],
  ['/link/account', ['endpoint']],
  ['/link/account/create', ['endpoint']],
  ['/link/companies', ['endpoint']],
  ['/link/company', ['endpoint']],
  ['/link/connection', ['endpoint']],
  ['/link/debug/session', ['endpoint']],
  ['/link/edit', ['endpoint']],
  ['/link/rate-limits', ['endpoint']],
  ['/link/revoke-tokens', ['endpoint']],
  ['/link/sessions', ['endpoint']],
  ['/link/sessions/{id}/expire', ['endpoint']],
  ['/link/sessions/{id}/extend', ['endpoint']],
  ['/link/source-system', ['endpoint']],
  ['/link/source-systems', ['endpoint']],
  ['/link/token/create', ['endpoint']],
  ['/link/token/exchange', ['endpoint']],
  ['/link/user', ['endpoint']],
  ['/locations', ['get', 'list']],
  ['/observations', ['create', 'delete', 'get', 'list', 'update']],
  ['/observations/{id}/attachments', ['create']],
  ['/opportunities', ['create', 'delete', 'get', 'list', 'update']],
  ['/photos', ['create', 'delete', 'get', 'list', 'update']],
  ['/ping', ['endpoint']],
  ['/prime-contracts', ['create', 'delete', 'get', 'list', 'update']],
  ['/prime-contracts/{id}/change-orders', ['list']],
  ['/prime-contracts/{id}/line-items', ['create', 'delete', 'get', 'list', 'update']],
  ['/projects', ['create', 'delete', 'get', 'list', 'update']],
  ['/purchase-orders', ['bulk-patch', 'create', 'delete', 'get', 'list', 'update']],
  ['/purchase-orders/{id}/compliances', ['create', 'delete', 'get', 'list', 'update']],
  ['/purchase-orders/{id}/line-items', ['create', 'delete', 'get', 'list', 'update']],
  ['/purchase-orders/compliances', ['list']],
  ['/rfis', ['create', 'get', 'list']],
  ['/rfis/{id}/attachments', ['create']],
  ['/rfis/{id}/responses', ['create']],
  ['/root-folder', ['endpoint']],
  ['/service-sites', ['create', 'delete', 'get', 'list', 'update']],
  ['/specification-sections', ['get', 'list']],
  ['/specification-sections/{id}/versions', ['get', 'list']],
  ['/sub-jobs', ['get', 'list']],
  ['/subcontract-claims', ['create', 'delete', 'get', 'list', 'update']],
  ['/subcontract-claims/{id}/line-items', ['create', 'delete', 'get', 'list', 'update']],
  ['/subcontracts', ['create', 'delete', 'get', 'list', 'update']],
  ['/subcontracts/{id}/change-orders', ['list']],
  ['/subcontracts/{id}/compliances', ['create', 'delete', 'get', 'list', 'update']],
  ['/subcontracts/{id}/line-items', ['create', 'delete', 'get', 'list', 'update']],
  ['/subcontracts/compliances', ['list']],
  ['/submittal-packages', ['create', 'delete', 'get', 'list', 'update']],
  ['/submittals', ['create', 'delete', 'get', 'list', 'update']],
  ['/submittals/{id}/attachments', ['create']],
  ['/submittals/{id}/submittal-reviewers/{id}/attachments', ['create']],
  ['/tax-codes', ['create', 'delete', 'get', 'list', 'update']],
  ['/timecard-entries', ['create', 'delete', 'get', 'list', 'update']],
  ['/transmittals', ['get', 'list']],
  ['/units-of-measure', ['get', 'list']],
  ['/vendors', ['bulk-patch', 'create', 'delete', 'get', 'list', 'update']],
  ['/vendors/{id}/compliances', ['create', 'delete', 'get', 'list', 'update']],
  ['/vendors/{id}/contacts', ['get', 'list']],
  ['/vendors/compliances', ['list']],
  ['/wbs', ['create', 'get', 'list']],
  ['/wbs-segments', ['create', 'delete', 'get', 'list', 'update']],
  ['/wbs-segments/{id}/items', ['create', 'delete', 'get', 'list', 'update']],
  ['/webhooks', ['endpoint']],
  ['/webhooks/{id}', ['endpoint']],
  ['/work-logs', ['list']],
  ['/work-orders', ['create', 'delete', 'get', 'list', 'update']],
];

/** Operations on one object of a collection, reached at `{path}/{id}`. */
const itemOperations: ReadonlySet<CollectionOperation> = new Set(['get', 'update', 'delete', 'post-item']);

/**
 * Upstream paths the mirror's routes forward that the collection export does not show: the
 * pass-through variants (contract 4.3) and one link session by id (served by the upstream's link
 * session API beside its extend and expire calls).
 */
const forwardedBeyondCollection = ['/passthrough', '/passthrough-download', '/passthrough-multipart', '/passthrough-upload', '/link/sessions/{id}'];

/** The operator's own APIs (the real service's `/admin/*`, the sandbox's `/_admin/*`): never through the mirror. */
const adminRoots: ReadonlySet<string> = new Set(['admin', '_admin']);

/**
 * The surface: the collection's paths (and their objects) without `/admin/*`, the contract's
 * resources as the mirror reads them (lists, objects, children through their parents), and the
 * paths above. Each template is its segments, `{id}` matching any one segment.
 */
export const upstreamSurface: readonly string[] = (() => {
  const out = new Set<string>();
  for (const [path, operations] of realServiceCollections) {
    if (adminRoots.has(path.split('/')[1] ?? '')) continue;
    out.add(path);
    if (operations.some((o) => itemOperations.has(o))) out.add(`${path}/{id}`);
  }
  for (const r of resources) {
    const base = r.scope === 'child' ? `${resourceDef(r.parent!)!.path}/{id}/${r.path}` : r.path;
    out.add(base);
    out.add(`${base}/{id}`);
  }
  for (const p of forwardedBeyondCollection) out.add(p);
  return [...out].sort();
})();

const templates: readonly (readonly string[])[] = upstreamSurface.map((t) => t.split('/').slice(1));

/** How the caller authenticated, as far as the upstream paths it may reach go. */
export type UpstreamCredential =
  /** Client credentials alone: only the link-token calls. */
  | { kind: 'client' }
  /** A linked account (its Account-Token, or the worker running a stored request as the account). */
  | { kind: 'account' }
  /** A link session: reads (GET, HEAD) of the areas its scopes name. */
  | { kind: 'session'; scopes: readonly string[] };

interface UpstreamPathInput {
  method: string;
  /** The request target as received: path and query, never normalised. */
  rawUrl: string;
  credential: UpstreamCredential;
}

export type UpstreamPathRefusal = { ok: false; status: 400 | 403 | 404; reason: string };
type UpstreamPathResult = { ok: true; path: string } | UpstreamPathRefusal;

/** Longest id or name segment, decoded (upstream ids are UUIDs or `source_id:` values, far shorter). */
export const maxSegmentLength = 256;
/** Longest path and query as received. */
const maxPathLength = 2048;
const maxQueryLength = 8192;
/** More segments than the deepest template (`/submittals/{id}/submittal-reviewers/{id}/attachments`). */
const maxSegments = 8;

const forwardedMethods: ReadonlySet<string> = new Set(['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE']);
const clientPaths: ReadonlySet<string> = new Set(['/link/token/create', '/link/token/exchange']);

const refuse = (status: 400 | 403 | 404, reason: string): UpstreamPathRefusal => ({ ok: false, status, reason });

/** Printable ASCII only (0x21-0x7e): no space, control character, DEL or raw non-ASCII byte. */
const unprintable = /[^\x21-\x7e]/;
/** C0 and C1 control characters and DEL (NUL, CR, LF, ...), however they were encoded. */
function hasControlChar(value: string): boolean {
  for (let i = 0; i < value.length; i++) {
    const c = value.charCodeAt(i);
    if (c < 0x20 || (c >= 0x7f && c <= 0x9f)) return true;
  }
  return false;
}
const badEscape = /%(?![0-9a-fA-F]{2})/;

/** Why a short, printable excerpt of the caller's input (never echoes control characters). */
function shown(value: string): string {
  const printable = value.replace(/[^\x20-\x7e]/g, '?');
  return printable.length > 60 ? `${printable.slice(0, 60)}...` : printable;
}

/**
 * The request target split into decoded path segments and the raw query, or a 400 saying what is
 * wrong with it. Shared by the routes that forward (to refuse a hostile id before anything else) and
 * by `upstreamPath`.
 */
export function parseTarget(rawUrl: string): { ok: true; segments: string[]; query: string; trailingSlash: boolean } | UpstreamPathRefusal {
  if (!rawUrl.startsWith('/')) return refuse(400, 'The request target must be a path starting with /; absolute URLs (http://...) are not forwarded.');
  if (rawUrl.startsWith('//')) return refuse(400, 'The request target starts with // (a host, not a path): send a path with a single leading /.');
  if (rawUrl.includes('#')) return refuse(400, 'The request target carries a fragment (#): fragments are not sent to a server; remove it or encode # as %23.');
  const q = rawUrl.indexOf('?');
  const rawPath = q < 0 ? rawUrl : rawUrl.slice(0, q);
  const query = q < 0 ? '' : rawUrl.slice(q + 1);
  if (rawPath.length > maxPathLength) return refuse(400, `The path is ${rawPath.length} characters long, over the ${maxPathLength} forwarded.`);
  if (query.length > maxQueryLength) return refuse(400, `The query string is ${query.length} characters long, over the ${maxQueryLength} forwarded.`);
  if (rawPath.includes('\\')) return refuse(400, 'The path contains a backslash (\\): ids may not contain one; percent-encoding it (%5C) is refused too.');
  if (unprintable.test(rawPath))
    return refuse(
      400,
      'The path contains a space, a control character or a raw non-ASCII byte: percent-encode the id (control characters are refused even encoded).',
    );
  if (unprintable.test(query)) return refuse(400, 'The query string contains a space, a control character or a raw non-ASCII byte: percent-encode it.');
  if (badEscape.test(query)) return refuse(400, 'The query string has a % not followed by two hex digits: encode % itself as %25.');
  // One trailing slash names the same path (the real service's own collection sends `/webhooks/`); it
  // is kept on what is forwarded, so the upstream sees the target as the caller wrote it.
  const trailingSlash = rawPath.length > 1 && rawPath.endsWith('/') && !rawPath.endsWith('//');
  const raw = (trailingSlash ? rawPath.slice(1, -1) : rawPath.slice(1)).split('/');
  if (raw.length > maxSegments) return refuse(400, `The path has ${raw.length} segments; no path of the upstream's API has more than ${maxSegments}.`);
  const segments: string[] = [];
  for (const s of raw) {
    if (s === '') return refuse(400, 'The path has an empty segment (//): remove it.');
    const lower = s.toLowerCase();
    if (lower.includes('%25')) return refuse(400, `The path segment "${shown(s)}" is percent-encoded twice (%25): encode an id once.`);
    if (lower.includes('%2f')) return refuse(400, `The path segment "${shown(s)}" contains an encoded / (%2F): an id may not contain a path separator.`);
    if (lower.includes('%5c')) return refuse(400, `The path segment "${shown(s)}" contains an encoded backslash (%5C): an id may not contain one.`);
    let decoded: string;
    try {
      decoded = decodeURIComponent(s);
    } catch {
      return refuse(400, `The path segment "${shown(s)}" is not valid percent-encoded UTF-8: encode the id with encodeURIComponent.`);
    }
    if (hasControlChar(decoded)) return refuse(400, `The path segment "${shown(s)}" decodes to a control character (NUL, CR, LF, ...): ids never contain one.`);
    if (/^\.+$/.test(decoded))
      return refuse(400, `The path segment "${shown(s)}" is a dot segment (. or .., raw or encoded): paths are not resolved through the mirror.`);
    if (decoded.length > maxSegmentLength)
      return refuse(400, `A path segment is ${decoded.length} characters long, over the ${maxSegmentLength} an id may have.`);
    segments.push(decoded);
  }
  return { ok: true, segments, query, trailingSlash };
}

function onSurface(segments: readonly string[]): boolean {
  return templates.some((t) => t.length === segments.length && t.every((part, i) => part === '{id}' || part === segments[i]));
}

/**
 * The upstream path (and query) a forwarded request may be sent to, rebuilt from its segments each
 * decoded once and encoded again with encodeURIComponent; or the 4xx that says why not: 400 for a
 * malformed or hostile target, 404 for a path off the upstream's unified API, 403 for a path the
 * credential may not reach (the admin APIs for anyone).
 */
export function upstreamPath(input: UpstreamPathInput): UpstreamPathResult {
  const method = input.method.toUpperCase();
  if (!forwardedMethods.has(method))
    return refuse(400, `The method ${shown(method)} is not forwarded; the upstream's API takes ${[...forwardedMethods].join(', ')}.`);
  const parsed = parseTarget(input.rawUrl);
  if (!parsed.ok) return parsed;
  const path = `/${parsed.segments.map(encodeURIComponent).join('/')}`;
  if (adminRoots.has(parsed.segments[0]!)) return refuse(403, "The upstream's administration API is never reachable through the mirror.");
  if (!onSurface(parsed.segments)) return refuse(404, `${method} ${shown(path)} is not a path of the upstream's unified API; the mirror forwards only those.`);
  const credential = input.credential;
  if (credential.kind === 'client' && !(method === 'POST' && clientPaths.has(path)) && !(method === 'GET' && path === '/ping')) {
    return refuse(
      403,
      "Client credentials alone reach only POST /link/token/create and /link/token/exchange, and GET /ping: send the linked account's Account-Token.",
    );
  }
  if (credential.kind === 'session') {
    if (method !== 'GET' && method !== 'HEAD') return refuse(403, `A link session only reads (GET): ${method} needs the account's Account-Token.`);
    const scope = requiredScope(method, path);
    if (!sessionAllows(credential.scopes, scope))
      return refuse(403, `Session lacks the scope ${shown(scope)} (it has ${credential.scopes.map(shown).join(', ') || 'none'}).`);
  }
  const sent = parsed.trailingSlash ? `${path}/` : path;
  return { ok: true, path: parsed.query ? `${sent}?${encodeQuery(parsed.query)}` : sent };
}

/**
 * The query as sent on: kept as the caller wrote it, but with the characters URL parsers disagree on
 * (`"`, `'`, `\`, `{`, `|`, ...) percent-encoded, so the upstream receives exactly this string.
 */
function encodeQuery(query: string): string {
  return query.replace(/[^A-Za-z0-9\-._~!$&()*+,;=:@/?%[\]]/g, (c) => `%${c.charCodeAt(0).toString(16).toUpperCase().padStart(2, '0')}`);
}
