// What a list request asks for besides its page, in every form the real service's clients send:
// `filters=`/`order_by=` (a JSON array each), repeated `filters[]=`/`order_by[]=` (a JSON object
// each), a JSON body on the GET (`{"filters": [...], "order_by": [...]}`), and the resource's
// equality parameters (lib/list-parameters.ts). Forms combine: predicates ANDed, order keys in
// the order query arrays, `[]` parameters, body.
import type { FastifyRequest } from 'fastify';
import { BadRequestError, PayloadTooLargeError } from '../../lib/errors.ts';
import { equalityParametersOf, MAX_FILTERS, MAX_ORDER_KEYS } from '../../lib/list-parameters.ts';
import { compileFilter, compileOrderKey, type FieldResolver, type Filter, type OrderKey } from '../data/filters.ts';
import { headerValue } from '../http/validate.ts';

/** A list body carries a few filters: far below this. */
const MAX_LIST_BODY_BYTES = 1024 * 1024;

const bodyKeys = ['filters', 'order_by'];

/**
 * Route hook (preValidation) of the GET lists: reads a body sent with the GET, as text, into
 * `request.body` (Fastify reads no body on a GET). There, the async capture that runs next finds
 * it and replays it with the request.
 */
export async function readListBody(request: FastifyRequest): Promise<void> {
  if (request.body !== undefined) return;
  const length = request.headers['content-length'];
  if (request.headers['transfer-encoding'] === undefined && (length === undefined || length === '0')) return;
  if (length !== undefined && Number(length) > MAX_LIST_BODY_BYTES)
    throw new PayloadTooLargeError(`A list's body must be at most ${MAX_LIST_BODY_BYTES} bytes`);
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of request.raw) {
    const b = typeof chunk === 'string' ? Buffer.from(chunk) : (chunk as Buffer);
    size += b.length;
    if (size > MAX_LIST_BODY_BYTES) throw new PayloadTooLargeError(`A list's body must be at most ${MAX_LIST_BODY_BYTES} bytes`);
    chunks.push(b);
  }
  if (size > 0) request.body = Buffer.concat(chunks).toString('utf8');
}

function isJsonType(contentType: string | undefined): boolean {
  const type = (contentType ?? '').split(';')[0]!.trim().toLowerCase();
  return type === 'application/json' || /^application\/[^/]+\+json$/.test(type);
}

function jsonOf(text: string, where: string, expected: string): unknown {
  try {
    return JSON.parse(text) as unknown;
  } catch {
    throw new BadRequestError(`${where} must be ${expected} (not valid JSON)`);
  }
}

function occurrences(query: Record<string, unknown>, name: string): string[] {
  if (!Object.prototype.hasOwnProperty.call(query, name)) return [];
  const v = query[name];
  return (Array.isArray(v) ? v : [v]).map((x) => String(x));
}

/** The parsed body of a list GET: `filters` and `order_by` arrays, each possibly absent. */
function listBody(request: FastifyRequest): { filters: unknown[]; orderBy: unknown[] } {
  const body = request.body;
  const empty = { filters: [], orderBy: [] };
  if (body === undefined || body === null || body === '') return empty;
  if (!isJsonType(headerValue(request.headers, 'content-type'))) {
    throw new BadRequestError('A list request body must be JSON sent with Content-Type: application/json: {"filters": [...], "order_by": [...]}');
  }
  const value = typeof body === 'string' ? jsonOf(body, 'The body', 'a JSON object {"filters": [...], "order_by": [...]}') : body;
  if (typeof value !== 'object' || value === null || Array.isArray(value)) {
    throw new BadRequestError('The body of a list request must be a JSON object {"filters": [...], "order_by": [...]}');
  }
  const unknown = Object.keys(value).filter((k) => !bodyKeys.includes(k));
  if (unknown.length > 0)
    throw new BadRequestError(
      `The body of a list request has the unknown key ${unknown.map((k) => JSON.stringify(k)).join(', ')}; it may hold filters and order_by`,
    );
  const o = value as { filters?: unknown; order_by?: unknown };
  for (const k of bodyKeys) {
    const v = (o as Record<string, unknown>)[k];
    if (v !== undefined && !Array.isArray(v)) throw new BadRequestError(`The body's ${k} must be a JSON array`);
  }
  return { filters: (o.filters as unknown[] | undefined) ?? [], orderBy: (o.order_by as unknown[] | undefined) ?? [] };
}

/** The items of one form, with where each came from (for the 400s). */
function fromQuery(query: Record<string, unknown>, name: string, what: string): Array<{ raw: unknown; where: string }> {
  const out: Array<{ raw: unknown; where: string }> = [];
  for (const text of occurrences(query, name)) {
    if (text === '') continue;
    const arr = jsonOf(text, name, `a JSON array of ${what}`);
    if (!Array.isArray(arr)) throw new BadRequestError(`${name} must be a JSON array of ${what}`);
    arr.forEach((raw, i) => out.push({ raw, where: `${name}[${i}]` }));
  }
  occurrences(query, `${name}[]`).forEach((text, i) => {
    const raw = jsonOf(text, `${name}[] #${i + 1}`, `one JSON object ${what}`);
    if (typeof raw !== 'object' || raw === null || Array.isArray(raw)) throw new BadRequestError(`${name}[] #${i + 1} must be one JSON object ${what}`);
    out.push({ raw, where: `${name}[] #${i + 1}` });
  });
  return out;
}

interface ListQuery {
  /** The request's own filters, every form (what a source system may refuse). */
  filters: Filter[];
  /** The resource's equality parameters as filters. */
  parameters: Filter[];
  orderBy: OrderKey[];
}

/** Everything a list request asks for besides its page; a 400 that says what to fix otherwise. */
export function listQuery(request: FastifyRequest, resource: string, resolve: FieldResolver): ListQuery {
  const query = (request.query ?? {}) as Record<string, unknown>;
  const body = listBody(request);
  const rawFilters = [...fromQuery(query, 'filters', '{field, operator, value}'), ...body.filters.map((raw, i) => ({ raw, where: `body filters[${i}]` }))];
  const rawOrder = [...fromQuery(query, 'order_by', '{field, dir}'), ...body.orderBy.map((raw, i) => ({ raw, where: `body order_by[${i}]` }))];
  if (rawFilters.length > MAX_FILTERS) throw new BadRequestError(`At most ${MAX_FILTERS} filters per request (got ${rawFilters.length})`);
  if (rawOrder.length > MAX_ORDER_KEYS) throw new BadRequestError(`At most ${MAX_ORDER_KEYS} order_by keys per request (got ${rawOrder.length})`);
  const filters = rawFilters.map(({ raw, where }) => compileFilter(raw, where, resolve));
  const orderBy = rawOrder.map(({ raw, where }) => compileOrderKey(raw, where, resolve));
  const parameters: Filter[] = [];
  for (const name of equalityParametersOf(resource)) {
    for (const value of occurrences(query, name)) parameters.push(compileFilter({ field: name, operator: '=', value }, `parameter ${name}`, resolve));
  }
  return { filters, parameters, orderBy };
}
