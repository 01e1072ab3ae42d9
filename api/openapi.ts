// The mirror's API as an OpenAPI 3.1 document, built from the live route table (every route the app
// registers is collected as it is added) and zod schemas: the catalog of lib/resources.ts for the
// unified resources, the schemas the route modules export, and the contract's shapes below. Served at
// /openapi.json, and rendered for people at /docs (api/openapi-page.ts).
import type { FastifyInstance } from 'fastify';
import { z } from 'zod';
import { resourceDef, resources, type ResourceDef } from '../lib/resources.ts';
import { apiVersion } from './auth.ts';
import { docsPage } from './openapi-page.ts';
import { aggregatesQuerySchema, aggregatesResponseSchema } from './routes/aggregates.ts';
import { inboundEventSchema } from './routes/webhooks-inbound.ts';

export interface RouteEntry {
  method: string;
  /** Fastify's pattern, e.g. `/projects/:id`. */
  url: string;
}

type Security = 'public' | 'client' | 'account' | 'operator' | 'webhook';

interface Operation {
  summary: string;
  description?: string;
  tag: string;
  security: Security;
  query?: z.ZodObject;
  headers?: { name: string; description: string; required?: boolean }[];
  body?: z.ZodType;
  bodyContentType?: string;
  responses: Record<string, { description: string; schema?: z.ZodType; contentType?: string }>;
}

// The contract's shapes the route modules do not export.
const errorSchema = z.object({ message: z.string(), code: z.string(), details: z.array(z.object({ path: z.string().optional(), message: z.string() })) }).meta({ id: 'Error' });
const metaSchema = z.object({ current_page: z.number().int(), has_more_results: z.boolean().nullable() }).meta({ id: 'ListMeta' });
const listQuerySchema = z.object({
  page: z.coerce.number().int().min(1).default(1).describe('Page number, from 1.'),
  per_page: z.coerce.number().int().min(1).max(1000).default(100).describe('Records per page, 1 to 1000.'),
  include_deleted: z.enum(['true', 'false']).optional().describe('Also list records the upstream deleted (the mirror keeps them, soft-deleted).'),
  modified_after: z.iso.datetime({ offset: true }).optional().describe('Only records the mirror changed after this time.'),
  filters: z.string().optional().describe('JSON array of `{field, operator, value}` on `source_create_time` / `source_update_time`.'),
});
const changesQuerySchema = z.object({
  cursor: z.string().max(512).optional().describe('`next_cursor` of the previous page; absent for the start of the feed.'),
  limit: z.coerce.number().int().min(1).max(1000).default(100),
});
const changesResponseSchema = z.object({
  data: z.array(z.object({ event: z.enum(['CREATE', 'UPDATE', 'DELETE']), id: z.string(), scope: z.string(), mirrored_at: z.iso.datetime(), object: z.record(z.string(), z.unknown()) })),
  meta: z.object({ next_cursor: z.string(), has_more_results: z.boolean() }),
});
const linkedAccountSchema = z
  .looseObject({
    id: z.string(),
    account_token: z.string(),
    reference_id: z.string(),
    status: z.string(),
    source_system: z.object({ slug: z.string(), name: z.string() }),
    linked_company: z.unknown().optional(),
    linked_user: z.unknown().optional(),
  })
  .meta({ id: 'LinkedAccount' });
const webhookCreateSchema = z.object({
  callback_url: z.url({ protocol: /^https?$/ }),
  authorization_header: z.string().max(4096).optional(),
  event: z.enum(['CREATE', 'UPDATE', 'DELETE']),
  type: z.string().min(1).max(64).describe("A resource's singular name: file, project, ap-invoice, ..."),
});
const webhookSchema = z
  .object({
    id: z.string(),
    source_id: z.string(),
    callback_url: z.string(),
    event: z.string(),
    project_id: z.string().optional(),
    target: z.string(),
    type: z.string(),
    delivery: z.object({ delivered: z.number().int(), failures: z.number().int(), last_error: z.string().nullable(), last_delivered_at: z.string().nullable() }),
  })
  .meta({ id: 'Webhook' });
const forwardedSchema = z.unknown().describe("The upstream's answer, forwarded unchanged.");

const resourceSchemas = new Map<string, z.ZodType>();
/** A unified object: the catalog's fields, plus whatever else the upstream sent (kept as is). */
function objectSchema(def: ResourceDef): z.ZodType {
  let s = resourceSchemas.get(def.name);
  if (!s) {
    const shape: Record<string, z.ZodType> = {};
    for (const f of def.fields) {
      if (f === 'id') shape[f] = z.string();
      else if (f === 'source_id') shape[f] = z.string().nullable();
      else if (f === 'source_create_time' || f === 'source_update_time') shape[f] = z.string().nullable().describe('ISO 8601');
      else shape[f] = z.unknown().optional();
    }
    shape.source_data = z.unknown().optional().describe('With `Include-Source-Data: true`: the source system\'s own object.');
    const title = def.name.replace(/(^|-)([a-z])/g, (_m, _d: string, c: string) => c.toUpperCase());
    s = z.looseObject(shape).meta({ id: title });
    resourceSchemas.set(def.name, s);
  }
  return s;
}

const sourceDataHeaders = [
  { name: 'Include-Source-Data', description: '`true`, or a comma list of source field names: adds `source_data`.' },
  { name: 'Exclude-Source-Data', description: 'Comma list of source field names to leave out of `source_data`.' },
];
const asyncHeader = { name: 'Async-Request', description: '`true`: answer 202 at once and run the request in the background (see /async-requests/{id}).' };

function resourceOperation(def: ResourceDef, kind: 'list' | 'get', projectScoped: boolean): Operation {
  const parent = def.parent ? resourceDef(def.parent) : undefined;
  const headers = [
    ...(projectScoped ? [{ name: 'Project-Id', description: 'The project (its id, `source_id:<id>`, or `*` for every project) for project-scoped resources.' }] : []),
    ...sourceDataHeaders,
    asyncHeader,
  ];
  const what = def.name.replace(/-/g, ' ');
  return kind === 'list'
    ? {
        summary: `List ${what}${parent ? ` of a ${parent.name.replace(/s$/, '').replace(/-/g, ' ')}` : ''}`,
        description: 'Served from the mirror in the upstream\'s shape, with exact `has_more_results`. A scope the mirror never synced is answered by the upstream (with a warning header) while its sync starts.',
        tag: def.name,
        security: 'account',
        query: listQuerySchema,
        headers,
        responses: { '200': { description: 'A page of records.', schema: z.object({ data: z.array(objectSchema(def)), meta: metaSchema }) } },
      }
    : {
        summary: `Get one of the ${what} by id or \`source_id:<id>\``,
        tag: def.name,
        security: 'account',
        headers,
        responses: { '200': { description: 'The record.', schema: objectSchema(def) }, '404': { description: 'No such record in this account.', schema: errorSchema } },
      };
}

const fixed: Record<string, Operation> = {
  'GET /healthz': { summary: 'Liveness, and the release the API runs', tag: 'operator', security: 'public', responses: { '200': { description: 'The process answers, with its package version and git commit (null when unknown).', schema: z.object({ ok: z.boolean(), version: z.string(), commit: z.string().nullable() }) } } },
  'GET /openapi.json': { summary: 'This document', tag: 'operator', security: 'public', responses: { '200': { description: 'OpenAPI 3.1' } } },
  'GET /docs': { summary: 'This document, rendered for people', tag: 'operator', security: 'public', responses: { '200': { description: 'HTML', contentType: 'text/html' } } },
  'GET /status': {
    summary: 'Status page (HTML)',
    description: 'Accounts, streams syncing now, freshness, rate budgets, recent errors, inbox and delivery backlog, links into the Temporal UI. `?fragment=1` answers only the main part (the page refreshes itself with it).',
    tag: 'operator',
    security: 'operator',
    responses: { '200': { description: 'HTML', contentType: 'text/html' }, '401': { description: 'No operator credentials.', schema: errorSchema } },
  },
  'GET /status.json': { summary: 'What the status page shows, as JSON', tag: 'operator', security: 'operator', responses: { '200': { description: 'The overview.' } } },
  'GET /metrics': {
    summary: 'Prometheus metrics',
    description: 'Upstream requests and 429s per source system and API latency (this process), records written, pages, stream lag, governor budgets, inbox, outbound deliveries (from Postgres).',
    tag: 'operator',
    security: 'operator',
    responses: { '200': { description: 'Prometheus text format 0.0.4', contentType: 'text/plain' } },
  },
  'GET /mirror/changes/:resource': {
    summary: "A resource's change feed (beyond the upstream's API)",
    description: 'Every record the mirror created, updated or deleted, in order, followed with an opaque cursor.',
    tag: 'mirror',
    security: 'account',
    query: changesQuerySchema,
    responses: { '200': { description: 'A page of changes.', schema: changesResponseSchema } },
  },
  'GET /mirror/aggregates/:resource': {
    summary: "Counts, sums, averages, minimums and maximums of a resource's records, grouped by a field (beyond the upstream's API)",
    description:
      'Over the caller\'s records only, live ones unless `include_deleted=true`, with the same filter forms as list reads (`filters=`, `filters[]=`, a JSON body `{"filters": [...]}` on the GET) and `Project-Id` as lists take it. Numeric aggregates read JSON numbers and strings that are decimal numbers (`"1250.00"`); any other value is left out (the sum of no value is null). Example: `?count&sum=balance&avg=balance&group_by=status` answers `{"data": [{"group": "active", "count": 120, "sum": {"balance": 1250.5}, "avg": {"balance": 10.42}}], "meta": {"group_by": "status", "has_more_results": false}}`. A field, operator or aggregate it cannot evaluate is a 400 that names it.',
    tag: 'mirror',
    security: 'account',
    query: aggregatesQuerySchema,
    headers: [{ name: 'Project-Id', description: 'The project (its id, `source_id:<id>`, or `*`): required for project-scoped resources; narrows account-level resources whose records carry `project_id`.' }],
    responses: { '200': { description: 'One entry per group (one entry when not grouped).', schema: aggregatesResponseSchema }, '400': { description: 'A parameter, field, operator or aggregate it cannot evaluate, named.', schema: errorSchema } },
  },
  'POST /mirror/accounts': {
    summary: 'Adopt an account linked before the mirror, by its account token',
    tag: 'link',
    security: 'client',
    body: z.object({ account_token: z.string().min(1) }),
    responses: { '201': { description: 'Registered; its first sync started.', schema: z.object({ id: z.string(), reference_id: z.string(), source_system: z.string(), status: z.string() }) } },
  },
  'POST /link/token/create': {
    summary: 'Create a link token (forwarded upstream)',
    tag: 'link',
    security: 'client',
    body: z.object({ reference_id: z.string().min(1).max(255) }),
    responses: { '200': { description: 'The link token for the Link page.', schema: z.object({ link_token: z.string() }) } },
  },
  'POST /link/token/exchange': {
    summary: 'Exchange a public token for an account token',
    description: 'Forwarded upstream; the mirror registers the account (token encrypted at rest), starts its first full sync and its periodic schedules.',
    tag: 'link',
    security: 'client',
    body: z.object({ public_token: z.string().min(1) }),
    responses: { '200': { description: 'The linked account.', schema: linkedAccountSchema } },
  },
  'GET /storage/:resource/:id/:field': {
    summary: "A file behind one of the mirror's signed links (url, preview_url, file_url)",
    description: 'Streamed from the upstream (a stored URL that expired is refreshed transparently); `Range` and `If-None-Match` honoured; `Content-Disposition` inline for previews, attachment for downloads; CORS open. The links come in the records the mirror serves and expire after an hour; every access is recorded.',
    tag: 'storage',
    security: 'public',
    responses: {
      '200': { description: 'The bytes.', contentType: 'application/octet-stream' },
      '206': { description: 'The requested range.', contentType: 'application/octet-stream' },
      '304': { description: 'Not modified (If-None-Match).' },
      '403': { description: 'A link with a bad signature, or expired.', schema: errorSchema },
    },
  },
  'GET /link/account': { summary: 'The linked account (forwarded)', tag: 'link', security: 'account', responses: { '200': { description: 'Forwarded.', schema: forwardedSchema } } },
  'POST /link/sessions': {
    summary: 'Create a link session (forwarded; the mirror then accepts its Session header alone)',
    description: 'Body as upstream: `name`, `ttl` (seconds, as a string), and a `mode` (`file-picker`, `construction-file-picker`) or explicit `scopes`. A request with only `API-Version` and `Session` then reads the mirror within the scopes until the session expires.',
    tag: 'link',
    security: 'account',
    body: z.looseObject({ name: z.string(), ttl: z.string(), mode: z.string().optional(), scopes: z.array(z.string()).optional() }),
    responses: { '201': { description: 'The session, with its secret (`session`), shown once.', schema: forwardedSchema } },
  },
  'GET /link/sessions': { summary: "The account's live link sessions (forwarded)", tag: 'link', security: 'account', responses: { '200': { description: 'Forwarded.', schema: forwardedSchema } } },
  'GET /link/sessions/:id': { summary: 'One link session (forwarded)', tag: 'link', security: 'account', responses: { '200': { description: 'Forwarded.', schema: forwardedSchema } } },
  'POST /link/sessions/:id/extend': { summary: 'Extend a link session (forwarded; the mirror follows the new expiry)', tag: 'link', security: 'account', body: z.looseObject({ ttl: z.string() }), responses: { '200': { description: 'Forwarded.', schema: forwardedSchema } } },
  'POST /link/sessions/:id/expire': { summary: 'Expire a link session now (forwarded; the mirror refuses it from then on)', tag: 'link', security: 'account', responses: { '200': { description: 'Forwarded.', schema: forwardedSchema } } },
  'GET /link/companies': { summary: "The linked account's companies (forwarded)", tag: 'link', security: 'account', responses: { '200': { description: 'Forwarded.', schema: forwardedSchema } } },
  'POST /passthrough': { summary: 'Pass-through request to the source system (forwarded, streamed)', tag: 'pass-through', security: 'account', bodyContentType: '*/*', body: z.unknown(), responses: { '200': { description: 'Forwarded.', schema: forwardedSchema } } },
  'POST /passthrough-download': { summary: 'Pass-through download (forwarded, streamed)', tag: 'pass-through', security: 'account', bodyContentType: '*/*', body: z.unknown(), responses: { '200': { description: 'The bytes.', contentType: 'application/octet-stream' } } },
  'POST /passthrough-multipart': { summary: 'Pass-through multipart upload (forwarded, streamed)', tag: 'pass-through', security: 'account', bodyContentType: 'multipart/form-data', body: z.unknown(), responses: { '200': { description: 'Forwarded.', schema: forwardedSchema } } },
  'POST /passthrough-upload': { summary: 'Pass-through binary upload (forwarded, streamed)', tag: 'pass-through', security: 'account', bodyContentType: 'application/octet-stream', body: z.unknown(), responses: { '200': { description: 'Forwarded.', schema: forwardedSchema } } },
  'POST /webhooks': {
    summary: 'Subscribe to changes of a resource',
    description: 'Every change the mirror applies to a matching record is delivered, in order and at least once, to `callback_url` with your `authorization_header`.',
    tag: 'webhooks',
    security: 'account',
    headers: [{ name: 'Project-Id', description: 'Only changes in this project.' }],
    body: webhookCreateSchema,
    responses: { '201': { description: 'The subscription.', schema: webhookSchema }, '400': { description: 'Invalid body.', schema: errorSchema } },
  },
  'GET /webhooks': { summary: 'List subscriptions', tag: 'webhooks', security: 'account', responses: { '200': { description: 'Subscriptions.', schema: z.object({ data: z.array(webhookSchema), meta: metaSchema }) } } },
  'GET /webhooks/:id': { summary: 'One subscription', tag: 'webhooks', security: 'account', responses: { '200': { description: 'The subscription.', schema: webhookSchema } } },
  'DELETE /webhooks/:id': { summary: 'Delete a subscription', tag: 'webhooks', security: 'account', responses: { '200': { description: 'The deleted subscription.', schema: webhookSchema } } },
  'POST /webhooks/inbound/:registrationId': {
    summary: "The upstream's webhook deliveries (not for applications)",
    description: 'Registered upstream by the mirror; `Authorization` must be the secret of that registration.',
    tag: 'webhooks',
    security: 'webhook',
    body: inboundEventSchema,
    responses: { '200': { description: 'Stored in the inbox (or a duplicate).', schema: z.object({ received: z.boolean(), duplicate: z.boolean() }) }, '401': { description: 'Unknown registration or wrong secret.', schema: errorSchema } },
  },
  'GET /async-requests/:id': {
    summary: 'State (and, once executed, the answer) of an async request',
    tag: 'async',
    security: 'account',
    responses: { '200': { description: 'The stored answer once executed; empty with the state headers while pending or running.' }, '404': { description: 'Unknown or another account\'s.', schema: errorSchema } },
  },
};

/** The key of an operation: `METHOD /path` (as the route table names it). */
const routeKey = (method: string, path: string): string => `${method} ${path}`;

function catalogOperations(): Map<string, Operation> {
  const ops = new Map<string, Operation>();
  for (const def of resources) {
    if (def.scope === 'child') {
      const parent = resourceDef(def.parent!)!;
      const projectScoped = parent.scope === 'project';
      ops.set(`GET ${parent.path}/:parentId/${def.path}`, resourceOperation(def, 'list', projectScoped));
      ops.set(`GET ${parent.path}/:parentId/${def.path}/:id`, resourceOperation(def, 'get', projectScoped));
      const base = `${parent.path}/:parentId/${def.path}`;
      const write = writeOperation(def, projectScoped);
      const what = `${def.name.replace(/-/g, ' ')} of one of the ${parent.name.replace(/-/g, ' ')}`;
      ops.set(`POST ${base}`, { ...write, summary: `Create one of the ${what} upstream` });
      for (const m of ['PATCH', 'PUT']) ops.set(`${m} ${base}/:id`, { ...write, summary: `Update one of the ${what} upstream (${m})` });
      ops.set(routeKey('DELETE', `${base}/:id`), deleteOperation(def, projectScoped, `Delete one of the ${what} upstream`));
    } else {
      ops.set(`GET ${def.path}`, resourceOperation(def, 'list', def.scope === 'project'));
      ops.set(`GET ${def.path}/:id`, resourceOperation(def, 'get', def.scope === 'project'));
      const write = writeOperation(def);
      ops.set(`POST ${def.path}`, { ...write, summary: `Create one of the ${def.name.replace(/-/g, ' ')} upstream` });
      for (const m of ['PATCH', 'PUT']) ops.set(`${m} ${def.path}/:id`, { ...write, summary: `Update one of the ${def.name.replace(/-/g, ' ')} upstream (${m})` });
      ops.set(routeKey('DELETE', `${def.path}/:id`), deleteOperation(def, def.scope === 'project', `Delete one of the ${def.name.replace(/-/g, ' ')} upstream`));
      ops.set(`PATCH ${def.path}`, bulkOperation(def));
    }
  }
  ops.set('POST /folders/:id/files', {
    ...writeOperation(resourceDef('files')!),
    summary: 'Upload a new file into a folder upstream (multipart/form-data, streamed)',
    bodyContentType: 'multipart/form-data',
    body: z.looseObject({}).describe('Form fields as the upstream takes them (`name`, `content_type`) and the file in a part named `contents`.'),
  });
  const folders = resourceDef('folders')!;
  const folderHeaders = [{ name: 'Project-Id', description: 'The project (its id or `source_id:<id>`).', required: true }, ...sourceDataHeaders];
  const folderWithChildren = objectSchema(folders);
  ops.set('GET /root-folder', { summary: "The project's root folder, with its files and subfolders", tag: 'folders', security: 'account', headers: folderHeaders, responses: { '200': { description: 'The folder, with `files` and `folders`.', schema: folderWithChildren }, '404': { description: 'No root folder mirrored for this project.', schema: errorSchema } } });
  ops.set('GET /folders/:id', { summary: 'One folder by id or `source_id:<id>`, with its files and subfolders', tag: 'folders', security: 'account', headers: folderHeaders, responses: { '200': { description: 'The folder, with `files` and `folders`.', schema: folderWithChildren }, '404': { description: 'No such folder in this account.', schema: errorSchema } } });
  for (const sub of ['files', 'folders'] as const) {
    ops.set(`GET /folders/:id/${sub}`, { summary: `The ${sub} of a folder`, tag: 'folders', security: 'account', query: listQuerySchema, headers: folderHeaders, responses: { '200': { description: 'A page of records.', schema: z.object({ data: z.array(objectSchema(resourceDef(sub)!)), meta: metaSchema }) } } });
  }
  return ops;
}

/** A write, forwarded upstream; the object it returns is applied to the mirror before the answer. */
function writeOperation(def: ResourceDef, projectScoped = def.scope === 'project'): Operation {
  return {
    summary: '',
    description:
      "Forwarded to the upstream with the contract's headers (`Ignore-Prohibited-Fields`, `Project-Id`); the upstream's answer is relayed unchanged, and the object it returned is in the mirror before the answer is sent. A refused write changes nothing.",
    tag: def.name,
    security: 'account',
    headers: [
      ...(projectScoped ? [{ name: 'Project-Id', description: 'The project the record belongs to.', required: true }] : []),
      { name: 'Ignore-Prohibited-Fields', description: '`true` drops fields the source system does not support instead of refusing the write.' },
      asyncHeader,
    ],
    body: z.looseObject({}).describe("The record's fields, as the upstream takes them (optional `source_data`)."),
    responses: {
      '200': { description: 'The updated record (the upstream\'s answer).', schema: objectSchema(def) },
      '201': { description: 'The created record (the upstream\'s answer; a one-item list for budget line items).' },
      '400': { description: "The upstream's refusal, with its message.", schema: errorSchema },
    },
  };
}

/** A delete, forwarded upstream; on its success the record is soft-deleted in the mirror before the answer. */
function deleteOperation(def: ResourceDef, projectScoped: boolean, summary: string): Operation {
  return {
    summary,
    description:
      "Forwarded to the upstream; its answer is relayed unchanged. On its success the record (and what is listed under it) is marked deleted in the mirror before the answer is sent, as a pass's delete detection marks it: reads no longer serve it, `include_deleted=true` and the change feed show it. A refused delete changes nothing.",
    tag: def.name,
    security: 'account',
    headers: [...(projectScoped ? [{ name: 'Project-Id', description: 'The project the record belongs to.', required: true }] : []), asyncHeader],
    responses: {
      '204': { description: "Deleted (the upstream's answer)." },
      '404': { description: "The upstream's answer: no such record, or the source system does not delete it.", schema: errorSchema },
    },
  };
}

/** A bulk create and update, forwarded upstream; each item it created or updated is applied to the mirror before the answer. */
function bulkOperation(def: ResourceDef): Operation {
  return {
    summary: `Create and update many of the ${def.name.replace(/-/g, ' ')} upstream at once`,
    description:
      '`{creates: [...], updates: [{id, ...}]}`, forwarded to the upstream; its answer (one result per item) is relayed unchanged, and each item it created or updated is in the mirror before the answer is sent. A failed item, or a refused request, changes nothing.',
    tag: def.name,
    security: 'account',
    headers: [...(def.scope === 'project' ? [{ name: 'Project-Id', description: 'The project the records belong to.', required: true }] : []), asyncHeader],
    body: z.object({ creates: z.array(z.looseObject({})).optional(), updates: z.array(z.looseObject({ id: z.string() })).optional() }),
    responses: {
      '200': { description: 'One result per item, creates first: `{operation, index, status, object}` or `{..., status, error}`.' },
      '400': { description: "The upstream's refusal of the whole request, with its message.", schema: errorSchema },
    },
  };
}

const securityOf: Record<Security, Record<string, string[]>[]> = {
  public: [],
  client: [{ ApiVersion: [], ClientId: [], ClientSecret: [] }],
  account: [{ ApiVersion: [], ClientId: [], ClientSecret: [], AccountToken: [] }],
  operator: [{ OperatorBasic: [] }, { OperatorBearer: [] }, { ClientId: [], ClientSecret: [] }],
  webhook: [{ WebhookSecret: [] }],
};

/** Fastify's `:param` to OpenAPI's `{param}`. */
export function openApiPath(url: string): string {
  return url.replace(/:([A-Za-z0-9_]+)/g, '{$1}');
}

export function buildOpenApiDocument(routes: readonly RouteEntry[], options: { title?: string; version?: string; serverUrl?: string } = {}): Record<string, unknown> {
  const schemas: Record<string, unknown> = {};
  const toJson = (schema: z.ZodType, io: 'input' | 'output'): Record<string, unknown> => {
    // Named schemas (`.meta({ id })`) land in $defs: they move to components, referenced from there.
    const text = JSON.stringify(z.toJSONSchema(schema, { io, unrepresentable: 'any', reused: 'inline' })).replaceAll('"#/$defs/', '"#/components/schemas/');
    const json = JSON.parse(text) as Record<string, unknown>;
    if (json.$defs) Object.assign(schemas, json.$defs);
    delete json.$defs;
    delete json.$schema;
    return json;
  };

  const catalog = catalogOperations();
  const paths: Record<string, Record<string, unknown>> = {};
  const tags = new Set<string>();
  const seen = new Set<string>();
  for (const route of routes) {
    const method = route.method.toUpperCase();
    // The catch-all that forwards the rest of the upstream's surface is the document's description, not a path.
    if (method === 'HEAD' || method === 'OPTIONS' || route.url.includes('*')) continue;
    const key = `${method} ${route.url}`;
    if (seen.has(key)) continue;
    seen.add(key);
    const op: Operation = fixed[key] ?? catalog.get(key) ?? { summary: `${method} ${route.url}`, description: 'Not described yet.', tag: 'other', security: 'account', responses: { '200': { description: 'OK' } } };
    tags.add(op.tag);
    const parameters: unknown[] = [];
    for (const m of route.url.matchAll(/:([A-Za-z0-9_]+)/g)) parameters.push({ name: m[1], in: 'path', required: true, schema: { type: 'string' } });
    if (op.query) {
      const q = toJson(op.query, 'input') as { properties?: Record<string, Record<string, unknown>>; required?: string[] };
      for (const [name, schema] of Object.entries(q.properties ?? {})) {
        const { description, ...rest } = schema;
        parameters.push({ name, in: 'query', required: q.required?.includes(name) ?? false, ...(description ? { description } : {}), schema: rest });
      }
    }
    for (const h of op.headers ?? []) parameters.push({ name: h.name, in: 'header', required: h.required ?? false, description: h.description, schema: { type: 'string' } });
    const responses: Record<string, unknown> = {};
    for (const [status, r] of Object.entries(op.responses)) {
      responses[status] = {
        description: r.description,
        ...(r.schema ? { content: { [r.contentType ?? 'application/json']: { schema: toJson(r.schema, 'output') } } } : r.contentType ? { content: { [r.contentType]: {} } } : {}),
      };
    }
    if (op.security !== 'public' && !responses['401']) responses['401'] = { description: 'Missing or invalid credentials.', content: { 'application/json': { schema: toJson(errorSchema, 'output') } } };
    const operation: Record<string, unknown> = {
      operationId: `${method.toLowerCase()}${openApiPath(route.url).replace(/[{}]/g, '').replace(/[^A-Za-z0-9]+(.)?/g, (_m, c: string | undefined) => (c ? c.toUpperCase() : ''))}`,
      summary: op.summary,
      ...(op.description ? { description: op.description } : {}),
      tags: [op.tag],
      security: securityOf[op.security],
      ...(parameters.length ? { parameters } : {}),
      ...(op.body ? { requestBody: { required: true, content: { [op.bodyContentType ?? 'application/json']: { schema: toJson(op.body, 'input') } } } } : {}),
      responses,
    };
    const path = openApiPath(route.url);
    paths[path] = { ...paths[path], [method.toLowerCase()]: operation };
  }
  const sortedPaths = Object.fromEntries(Object.entries(paths).sort(([a], [b]) => a.localeCompare(b)));
  return {
    openapi: '3.1.0',
    info: {
      title: options.title ?? 'Construction and accounting mirror',
      version: options.version ?? apiVersion,
      description:
        "The mirror serves the unified API's paths in the contract's own shape from Postgres (send the same headers as to the upstream, `API-Version: " +
        apiVersion +
        '`), forwards what cannot be mirrored, and adds operator pages. Every other path of the upstream\'s API (resources the mirror does not hold, methods it does not apply, link calls, `/ping`) is forwarded as it came, headers and body included, and answered by the upstream with a `{Prefix}-Warnings` header saying so.',
    },
    ...(options.serverUrl ? { servers: [{ url: options.serverUrl }] } : {}),
    tags: [...tags].sort().map((name) => ({ name })),
    paths: sortedPaths,
    components: {
      schemas,
      securitySchemes: {
        ApiVersion: { type: 'apiKey', in: 'header', name: 'API-Version', description: `Always ${apiVersion}.` },
        ClientId: { type: 'apiKey', in: 'header', name: 'Client-Id', description: "The mirror's client id (MIRROR_CLIENT_ID)." },
        ClientSecret: { type: 'apiKey', in: 'header', name: 'Client-Secret', description: "The mirror's client secret (MIRROR_CLIENT_SECRET)." },
        AccountToken: { type: 'apiKey', in: 'header', name: 'Account-Token', description: "The linked account's token, as the upstream issued it." },
        OperatorBasic: { type: 'http', scheme: 'basic', description: 'Client-Id and Client-Secret as user and password, or user `operator` and OPERATOR_TOKEN.' },
        OperatorBearer: { type: 'http', scheme: 'bearer', description: 'OPERATOR_TOKEN.' },
        WebhookSecret: { type: 'apiKey', in: 'header', name: 'Authorization', description: 'The secret the mirror registered with the webhook.' },
      },
    },
  };
}

/**
 * Collects the route table as routes are added: register this before the other route modules.
 * Serves /openapi.json and /docs.
 */
export function registerOpenApi(app: FastifyInstance, options: { title?: string } = {}): void {
  const routes: RouteEntry[] = [];
  app.addHook('onRoute', (r) => {
    for (const method of Array.isArray(r.method) ? r.method : [r.method]) routes.push({ method, url: r.url });
  });
  let document: string | undefined;
  app.get('/openapi.json', async (_request, reply) => {
    document ??= JSON.stringify(buildOpenApiDocument(routes, options));
    return reply.type('application/json; charset=utf-8').send(document);
  });
  app.get('/docs', async (_request, reply) => reply.type('text/html; charset=utf-8').send(docsPage()));
}
