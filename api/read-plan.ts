// The read rule: a read is answered from the mirror only when the mirror can answer it exactly as
// the upstream would; otherwise it is forwarded as it came, with `{Prefix}-Warnings` saying why.
// This file decides which, from everything the request carries: its query (repeated parameters
// included), its headers and the body of a GET. It reads no database: the route resolves Project-Id
// and the scopes, and mirror/reads/records-read.ts evaluates what is planned here.
import type { IncomingHttpHeaders } from 'node:http';
import { z } from 'zod';
import { BadRequestError } from '../lib/errors.ts';
import { equalityParametersOf, listControlParameters, mirrorListExtensions } from '../lib/list-parameters.ts';
import type { ResourceDef } from '../lib/resources.ts';
import type { RecordFilter, RecordOrder } from '../mirror/reads/record-filters.ts';
import { checkFilters, checkOrder, NotEvaluated, quoted, type Sourced } from './filters.ts';

/** A read the mirror answers, or the reason it is forwarded. */
type Plan<T> = { serve: T } | { forward: string };

/** A list read as the mirror evaluates it. */
export interface ListPlan {
  page: number;
  /** As asked; undefined: the source system's default page size. */
  perPage: number | undefined;
  includeDeleted: boolean;
  modifiedAfter: Date | undefined;
  /** The caller's filters (all forms, in the rule's order), then the resource's equality parameters. */
  filters: RecordFilter[];
  /** Whether any filter came from a filter form (the upstream refuses those on some resources). */
  hasFilterForms: boolean;
  orderBy: RecordOrder[];
}

export interface ReadRequest {
  /** The request target as it came (path and query). */
  url: string;
  headers: IncomingHttpHeaders;
  /** The body of the GET as it came (undefined or empty: none). */
  body: Buffer | undefined;
  def: ResourceDef;
  /** The API version the mirror's upstream calls carry (a caller's other version is forwarded). */
  apiVersion?: string;
}

/**
 * Request headers that cannot change what the upstream answers, or that the mirror evaluates itself
 * (credentials are checked by auth; Project-Id and the source-data headers by the routes). Any other
 * header (Company-Id, Return-Source-Id, a source system's *-Expand, conditional and range headers, a
 * header the contract adds later) makes the read one the mirror forwards.
 */
const evaluatedOrInert = new Set([
  // Credentials: the mirror authenticates them; the upstream gets the forwarder's own.
  'account-token',
  'session',
  'client-id',
  'client-secret',
  'authorization',
  'proxy-authorization',
  'cookie',
  'x-mirror-internal',
  // Evaluated by the read routes.
  'project-id',
  'include-source-data',
  'include-source-data-path',
  'exclude-source-data',
  // Transport and content negotiation of a JSON API; the framing of a GET's body (read below).
  'host',
  'connection',
  'keep-alive',
  'te',
  'accept',
  'accept-encoding',
  'accept-language',
  'accept-charset',
  'user-agent',
  'content-type',
  'content-length',
  'transfer-encoding',
  'expect',
  'cache-control',
  'pragma',
  'priority',
  'dnt',
  'origin',
  'referer',
  'upgrade-insecure-requests',
  'forwarded',
  'via',
  'x-real-ip',
  'x-request-id',
  'x-correlation-id',
  'traceparent',
  'tracestate',
  'baggage',
]);

/** Why a request's headers make it a read the mirror forwards (undefined: none does). */
function headersNotEvaluated(headers: IncomingHttpHeaders, debugIdHeader: string, apiVersion?: string): string | undefined {
  let debugId: string | undefined;
  // Node hands header names lower-cased; the loop runs on every read, so it allocates nothing for
  // the headers that pass.
  for (const name in headers) {
    const value = headers[name];
    if (value === undefined || evaluatedOrInert.has(name)) continue;
    if (name.startsWith('x-forwarded-') || name.startsWith('sec-fetch-') || name.startsWith('sec-ch-')) continue;
    if (name === (debugId ??= debugIdHeader.toLowerCase())) continue;
    const one = Array.isArray(value) ? value.join(', ') : value;
    // The version the mirror's own calls carry answers as the mirror does; another may not.
    if (name === 'api-version' && apiVersion !== undefined && one.trim() === apiVersion) continue;
    // A synchronous read (an async one never reaches the read routes: api/async.ts takes it first).
    if (name === 'async-request' && ['false', '0', ''].includes(one.trim().toLowerCase())) continue;
    if (name === 'content-encoding' && one.trim().toLowerCase() === 'identity') continue;
    return `header ${headerName(name)} is not evaluated by the mirror`;
  }
  return undefined;
}

/** A header's name as a caller would write it (Company-Id), for the warning. */
function headerName(name: string): string {
  return name
    .replace(/[^\x21-\x7e]/g, '?')
    .slice(0, 64)
    .replace(/(^|-)([a-z])/g, (_m, dash: string, c: string) => dash + c.toUpperCase());
}

/** Parameters a list takes once each: paging and the mirror's own extensions (the forms are read apart). */
const known = new Set<string>([...listControlParameters, ...mirrorListExtensions]);

/** The query's parameters in order, decoded (`filters%5B%5D` is `filters[]`). */
function queryPairs(url: string): [string, string][] {
  const q = url.indexOf('?');
  if (q < 0) return [];
  return [...new URLSearchParams(url.slice(q + 1))];
}

function jsonOf(text: string, what: string, shape: string): unknown {
  try {
    return JSON.parse(text) as unknown;
  } catch {
    throw new BadRequestError(`${what} must be ${shape} (it is not JSON).`);
  }
}

/** A positive integer parameter, as upstream reads it (digits only). */
function integer(name: string, value: string, min: number, max: number): number {
  const n = /^\d+$/.test(value) ? Number(value) : NaN;
  if (!Number.isSafeInteger(n) || n < min || n > max)
    throw new BadRequestError(`Invalid query: ${name} must be an integer from ${min}${max === Number.MAX_SAFE_INTEGER ? '' : ` to ${max}`}.`, {
      details: [{ path: name, message: 'not an integer in range' }],
    });
  return n;
}

const isoDateTime = z.iso.datetime({ offset: true });

const jsonType = /^application\/(?:[\w.+-]+\+)?json\s*(?:;|$)/i;

/**
 * The GET body of a list: `{"filters": [...], "order_by": [...]}` as JSON. A key the rule does not
 * name is forwarded (the upstream says what it makes of it); so is a body the mirror cannot read.
 */
function bodyParts(r: ReadRequest): { filters: Sourced[]; order: Sourced[] } {
  const none = { filters: [], order: [] };
  if (!r.body || r.body.length === 0) return none;
  const type = [r.headers['content-type']].flat()[0] ?? '';
  if (!jsonType.test(type)) throw new NotEvaluated(`a GET body of type ${quoted(type.split(';')[0]!.trim() || 'none')} is not evaluated by the mirror`);
  const encoding = [r.headers['content-encoding']].flat()[0];
  if (encoding !== undefined && encoding.trim().toLowerCase() !== 'identity') throw new NotEvaluated('a compressed GET body is not evaluated by the mirror');
  const json = jsonOf(r.body.toString('utf8'), 'The body of a list read', 'a JSON object {"filters": [...], "order_by": [...]}');
  if (typeof json !== 'object' || json === null || Array.isArray(json))
    throw new BadRequestError('The body of a list read must be a JSON object {"filters": [...], "order_by": [...]}.');
  const body = json as Record<string, unknown>;
  const unknown = Object.keys(body).find((k) => k !== 'filters' && k !== 'order_by');
  if (unknown !== undefined) throw new NotEvaluated(`body key ${quoted(unknown)} is not evaluated by the mirror`);
  const items = (key: 'filters' | 'order_by'): Sourced[] => {
    const v = body[key];
    if (v === undefined) return [];
    if (!Array.isArray(v))
      throw new BadRequestError(`body.${key} must be an array of ${key === 'filters' ? '{field, operator, value}' : '{field, dir}'} objects.`);
    return (v as unknown[]).map((item, i) => ({ at: `body.${key}.${i}`, item }));
  };
  return { filters: items('filters'), order: items('order_by') };
}

/**
 * Plans of list reads by their resource and request target (without a body), as the rest of the rule
 * decided them (the headers are checked on every read): an application reads the same lists again
 * and again, and parsing and checking a read's filters was ~20 us of a filtered page's ~350 us of API
 * CPU (bench [11]). Only plans are kept, never an error; a plan is not changed after it is made (the
 * route copies it to add to it). At most `maxCachedPlans`, of targets up to `maxCachedTarget`
 * characters; when full, it starts again.
 */
const cachedPlans = new Map<string, Plan<ListPlan>>();
const maxCachedPlans = 2000;
const maxCachedTarget = 2048;

/**
 * A target whose query has one `page` pair, of digits (no other pair's name reads as `page` either,
 * percent-decoded): the target without that pair and the page's digits. Every page of a list then
 * shares one kept plan (a reader at random pages of a 200k list asked 2,000 targets, more than the
 * plans kept: most of its reads parsed their plan again).
 */
function pageApart(url: string): { rest: string; page: string } | undefined {
  const q = url.indexOf('?');
  if (q < 0) return undefined;
  let found: { at: number; end: number; page: string } | undefined;
  for (let at = q; at < url.length;) {
    const next = url.indexOf('&', at + 1);
    const end = next < 0 ? url.length : next;
    const eq = url.indexOf('=', at + 1);
    const nameEnd = eq < 0 || eq > end ? end : eq;
    let name = url.slice(at + 1, nameEnd);
    if (name.includes('%') || name.includes('+')) {
      try {
        name = decodeURIComponent(name.replaceAll('+', ' '));
      } catch {
        return undefined;
      }
    }
    if (name === 'page') {
      const digits = url.slice(nameEnd + 1, end);
      if (found || nameEnd === end || !/^\d{1,16}$/.test(digits)) return undefined;
      found = { at, end, page: digits };
    }
    at = end;
  }
  if (!found) return undefined;
  // `/x?page=2&a=1` -> `/x?a=1`, `/x?a=1&page=2` -> `/x?a=1`, `/x?page=2` -> `/x?`.
  const { at, end, page } = found;
  return { rest: url[at] === '?' ? url.slice(0, at + 1) + url.slice(end + 1) : url.slice(0, at) + url.slice(end), page };
}

/** The plan of a list read (`GET /{collection}`, `GET /{parent}/{id}/{children}`). */
export function planList(r: ReadRequest, debugIdHeader: string): Plan<ListPlan> {
  const why = headersNotEvaluated(r.headers, debugIdHeader, r.apiVersion);
  if (why) return { forward: why };
  const keep = (!r.body || r.body.length === 0) && r.url.length <= maxCachedTarget;
  const apart = keep ? pageApart(r.url) : undefined;
  const key = keep ? `${r.def.name}\u0000${apart ? `${apart.rest}\u0000page` : r.url}` : undefined;
  const cached = key === undefined ? undefined : cachedPlans.get(key);
  if (cached) {
    if (apart === undefined || !('serve' in cached)) return cached;
    // The page checked as the whole target's parse checks it.
    const page = integer('page', apart.page, 1, Number.MAX_SAFE_INTEGER);
    return page === cached.serve.page ? cached : { serve: { ...cached.serve, page } };
  }
  let plan: Plan<ListPlan>;
  try {
    plan = { serve: listPlan(r) };
  } catch (error) {
    if (error instanceof NotEvaluated) plan = { forward: error.reason };
    else throw error;
  }
  if (key !== undefined) {
    if (cachedPlans.size >= maxCachedPlans) cachedPlans.clear();
    cachedPlans.set(key, plan);
  }
  return plan;
}

/** A list read's plan from its target and body (its headers checked by the caller). */
function listPlan(r: ReadRequest): ListPlan {
  const equality = equalityParametersOf(r.def.name);
  const single = new Map<string, string>();
  const arrays: Sourced[] = [];
  const listed: Sourced[] = [];
  const orderArrays: Sourced[] = [];
  const orderListed: Sourced[] = [];
  const equalities: RecordFilter[] = [];
  for (const [name, value] of queryPairs(r.url)) {
    if (name === 'filters[]' || name === 'order_by[]') {
      const to = name === 'filters[]' ? listed : orderListed;
      const at = `${name}#${to.length + 1}`;
      to.push({ at, item: jsonOf(value, at, name === 'filters[]' ? 'a JSON object {field, operator, value}' : 'a JSON object {field, dir}') });
    } else if (name === 'filters' || name === 'order_by') {
      // Each `filters=` is a JSON array; several are concatenated in order. Empty: none.
      if (value === '') continue;
      const json = jsonOf(value, name, `a JSON array of ${name === 'filters' ? '{field, operator, value}' : '{field, dir}'} objects`);
      if (!Array.isArray(json))
        throw new BadRequestError(`${name} must be a JSON array of ${name === 'filters' ? '{field, operator, value}' : '{field, dir}'} objects.`);
      const to = name === 'filters' ? arrays : orderArrays;
      for (const item of json) to.push({ at: `${name}.${to.length}`, item });
    } else if (equality.includes(name)) {
      // Repeated, each is one more equality (ANDed).
      equalities.push({ field: name, operator: '=', value });
    } else if (known.has(name)) {
      if (single.has(name)) throw new NotEvaluated(`parameter ${quoted(name)} sent more than once is not evaluated by the mirror`);
      single.set(name, value);
    } else if (name === 'expand') {
      throw new NotEvaluated('parameter "expand" (it changes the answer\'s shape) is not evaluated by the mirror');
    } else {
      throw new NotEvaluated(`parameter ${quoted(name)} is not evaluated by the mirror`);
    }
  }
  const body = bodyParts(r);
  const filterItems = [...arrays, ...listed, ...body.filters];
  const orderItems = [...orderArrays, ...orderListed, ...body.order];
  const filters = checkFilters(filterItems, r.def);
  const orderBy = checkOrder(orderItems, r.def);
  const page = single.get('page');
  const perPage = single.get('per_page');
  const includeDeleted = single.get('include_deleted');
  if (includeDeleted !== undefined && includeDeleted !== 'true' && includeDeleted !== 'false')
    throw new BadRequestError('Invalid query: include_deleted must be true or false.', {
      details: [{ path: 'include_deleted', message: 'not true or false' }],
    });
  const modifiedAfter = single.get('modified_after');
  if (modifiedAfter !== undefined && !isoDateTime.safeParse(modifiedAfter).success)
    throw new BadRequestError('Invalid query: modified_after must be an ISO 8601 timestamp with a zone (e.g. 2024-05-01T12:00:00Z).', {
      details: [{ path: 'modified_after', message: 'not an ISO 8601 timestamp' }],
    });
  return {
    page: page === undefined || page === '' ? 1 : integer('page', page, 1, Number.MAX_SAFE_INTEGER),
    perPage: perPage === undefined || perPage === '' ? undefined : integer('per_page', perPage, 1, 1000),
    includeDeleted: includeDeleted === 'true',
    modifiedAfter: modifiedAfter === undefined ? undefined : new Date(modifiedAfter),
    filters: [...filters, ...equalities],
    hasFilterForms: filters.length > 0,
    orderBy,
  };
}

/**
 * The plan of an object read (`GET /{collection}/{id}`, a folder, `/root-folder`): the mirror reads
 * no parameter and no body of one, so any makes it a forwarded read.
 */
export function planGet(r: ReadRequest, debugIdHeader: string): Plan<undefined> {
  const why = headersNotEvaluated(r.headers, debugIdHeader, r.apiVersion);
  if (why) return { forward: why };
  const [first] = queryPairs(r.url);
  if (first)
    return {
      forward:
        first[0] === 'expand'
          ? 'parameter "expand" (it changes the answer\'s shape) is not evaluated by the mirror'
          : `parameter ${quoted(first[0])} is not evaluated by the mirror`,
    };
  if (r.body && r.body.length > 0) return { forward: 'a body on an object read is not evaluated by the mirror' };
  return { serve: undefined };
}

/** The plan of a folder's files or subfolders: pages only (the upstream takes no filter there). */
export function planPagesOnly(r: ReadRequest, debugIdHeader: string): Plan<{ page: number; perPage: number | undefined }> {
  const why = headersNotEvaluated(r.headers, debugIdHeader, r.apiVersion);
  if (why) return { forward: why };
  if (r.body && r.body.length > 0) return { forward: 'a body on this read is not evaluated by the mirror' };
  const seen = new Map<string, string>();
  for (const [name, value] of queryPairs(r.url)) {
    if ((name !== 'page' && name !== 'per_page') || seen.has(name)) return { forward: `parameter ${quoted(name)} is not evaluated by the mirror on this read` };
    seen.set(name, value);
  }
  const page = seen.get('page');
  const perPage = seen.get('per_page');
  return {
    serve: {
      page: page === undefined || page === '' ? 1 : integer('page', page, 1, Number.MAX_SAFE_INTEGER),
      perPage: perPage === undefined || perPage === '' ? undefined : integer('per_page', perPage, 1, 1000),
    },
  };
}
