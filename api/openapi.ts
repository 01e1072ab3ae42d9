// The mirror's API as an OpenAPI 3.1 document, generated from the routes the app registers: each
// route's own schema (api/route-schema.ts: zod params, query, headers, body and answers, with the
// words of its operation) is collected as the route is added, so the document cannot say anything the
// routes do not. Served at /openapi.json, and rendered for people at /docs (api/openapi-page.ts).
import type { FastifyInstance, FastifySchema } from 'fastify';
import { z } from 'zod';
import { apiVersion } from './auth.ts';
import { docsPage } from './openapi-page.ts';
import { answer, errorSchema, json, type Security } from './route-schema.ts';

interface RouteEntry {
  method: string;
  /** Fastify's pattern, e.g. `/projects/:id`. */
  url: string;
  schema?: FastifySchema;
}

/** A header's name as callers write it (`project-id` -> `Project-Id`). */
function headerName(name: string): string {
  return name.replace(/(^|-)([a-z])/g, (_m, dash: string, c: string) => dash + c.toUpperCase());
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

/** Turns zod schemas into the document's JSON Schemas, collecting the named ones for its components. */
class SchemaCollector {
  readonly schemas: Record<string, unknown> = {};

  toJson(schema: z.ZodType, io: 'input' | 'output'): Record<string, unknown> {
    // Named schemas (`.meta({ id })`) land in $defs: they move to components, referenced from there.
    const text = JSON.stringify(z.toJSONSchema(schema, { io, unrepresentable: 'any', reused: 'inline' })).replaceAll('"#/$defs/', '"#/components/schemas/');
    const json = JSON.parse(text) as Record<string, unknown>;
    if (json.$defs) Object.assign(this.schemas, json.$defs);
    delete json.$defs;
    delete json.$schema;
    return json;
  }

  /** The properties of a zod object as OpenAPI parameters of one place (path, query, header). */
  parametersOf(schema: unknown, place: 'path' | 'query' | 'header'): unknown[] {
    if (!(schema instanceof z.ZodType)) return [];
    const o = this.toJson(schema, 'input') as { properties?: Record<string, Record<string, unknown>>; required?: string[] };
    return Object.entries(o.properties ?? {}).map(([name, property]) => {
      const { description, ...rest } = property;
      return {
        name: place === 'header' ? headerName(name) : name,
        in: place,
        required: place === 'path' || (o.required?.includes(name) ?? false),
        ...(description ? { description } : {}),
        schema: rest,
      };
    });
  }

  contentOf(content: Record<string, { schema?: unknown }>): Record<string, unknown> {
    return Object.fromEntries(
      Object.entries(content).map(([type, c]) => [type, c.schema instanceof z.ZodType ? { schema: this.toJson(c.schema, 'output') } : {}]),
    );
  }
}

/** A route's answers by status; a route that takes credentials also answers 401. */
function responsesOf(s: FastifySchema | undefined, security: Security, collector: SchemaCollector): Record<string, unknown> {
  const responses: Record<string, unknown> = {};
  for (const [status, r] of Object.entries((s?.response ?? {}) as Record<string, unknown>)) {
    const entry = r instanceof z.ZodType ? json(r.description ?? 'OK', r) : (r as ReturnType<typeof answer>);
    responses[status] = { description: entry.description, ...(entry.content ? { content: collector.contentOf(entry.content) } : {}) };
  }
  if (security !== 'public' && !responses['401'])
    responses['401'] = { description: 'Missing or invalid credentials.', content: { 'application/json': { schema: collector.toJson(errorSchema, 'output') } } };
  if (Object.keys(responses).length === 0) responses['200'] = { description: 'OK' };
  return responses;
}

/** One route's operation, from its schema alone. */
function operationOf(route: RouteEntry, method: string, tag: string, collector: SchemaCollector): Record<string, unknown> {
  const s = route.schema;
  // A route added without its description is marked, never invented (the OpenAPI test finds it).
  const described = s?.summary !== undefined && s.tags !== undefined && s.access !== undefined;
  const parameters = [
    ...collector.parametersOf(s?.params, 'path'),
    ...collector.parametersOf(s?.querystring, 'query'),
    ...collector.parametersOf(s?.headers, 'header'),
  ];
  const security = s?.access ?? 'account';
  const responses = responsesOf(s, security, collector);
  return {
    operationId: `${method.toLowerCase()}${openApiPath(route.url)
      .replace(/[{}]/g, '')
      .replace(/[^A-Za-z0-9]+(.)?/g, (_m, c: string | undefined) => (c ? c.toUpperCase() : ''))}`,
    summary: s?.summary ?? `${method} ${route.url}`,
    ...(s?.description ? { description: s.description } : {}),
    tags: [tag],
    security: securityOf[security],
    ...(parameters.length ? { parameters } : {}),
    ...(s?.body instanceof z.ZodType
      ? { requestBody: { required: true, content: { [s.consumes?.[0] ?? 'application/json']: { schema: collector.toJson(s.body, 'input') } } } }
      : {}),
    responses,
    ...(described ? {} : { 'x-undescribed': true }),
  };
}

/** The operations of the routes by path (sorted), and the tags they use. */
function pathsOf(routes: readonly RouteEntry[], collector: SchemaCollector): { paths: Record<string, Record<string, unknown>>; tags: Set<string> } {
  const paths: Record<string, Record<string, unknown>> = {};
  const tags = new Set<string>();
  const seen = new Set<string>();
  for (const route of routes) {
    const method = route.method.toUpperCase();
    // The catch-all that forwards the rest of the upstream's surface is the document's description, not a path.
    if (method === 'HEAD' || route.url.includes('*')) continue;
    const key = `${method} ${route.url}`;
    if (seen.has(key)) continue;
    seen.add(key);
    const tag = route.schema?.tags?.[0] ?? 'undescribed';
    tags.add(tag);
    const path = openApiPath(route.url);
    paths[path] = { ...paths[path], [method.toLowerCase()]: operationOf(route, method, tag, collector) };
  }
  return { paths: Object.fromEntries(Object.entries(paths).sort(([a], [b]) => a.localeCompare(b))), tags };
}

const securitySchemes = {
  ApiVersion: { type: 'apiKey', in: 'header', name: 'API-Version', description: `Always ${apiVersion}.` },
  ClientId: { type: 'apiKey', in: 'header', name: 'Client-Id', description: "The mirror's client id (MIRROR_CLIENT_ID)." },
  ClientSecret: { type: 'apiKey', in: 'header', name: 'Client-Secret', description: "The mirror's client secret (MIRROR_CLIENT_SECRET)." },
  AccountToken: { type: 'apiKey', in: 'header', name: 'Account-Token', description: "The linked account's token, as the upstream issued it." },
  OperatorBasic: {
    type: 'http',
    scheme: 'basic',
    description: 'Client-Id and Client-Secret as user and password, or user `operator` and OPERATOR_TOKEN.',
  },
  OperatorBearer: { type: 'http', scheme: 'bearer', description: 'OPERATOR_TOKEN.' },
  WebhookSecret: { type: 'apiKey', in: 'header', name: 'Authorization', description: 'The secret the mirror registered with the webhook.' },
};

function buildOpenApiDocument(routes: readonly RouteEntry[], options: { title?: string; version?: string; serverUrl?: string } = {}): Record<string, unknown> {
  const collector = new SchemaCollector();
  const { paths, tags } = pathsOf(routes, collector);
  return {
    openapi: '3.1.0',
    info: {
      title: options.title ?? 'Construction and accounting mirror',
      version: options.version ?? apiVersion,
      description:
        "The mirror serves the unified API's paths in the contract's own shape from Postgres (send the same headers as to the upstream, `API-Version: " +
        apiVersion +
        "`), forwards what cannot be mirrored, and adds operator pages. Every other path of the upstream's API (resources the mirror does not hold, methods it does not apply, link calls, `/ping`) is forwarded as it came, headers and body included, and answered by the upstream with a `{Prefix}-Warnings` header saying so.",
    },
    ...(options.serverUrl ? { servers: [{ url: options.serverUrl }] } : {}),
    tags: [...tags].sort().map((name) => ({ name })),
    paths,
    components: { schemas: collector.schemas, securitySchemes },
  };
}

const tables = new WeakMap<FastifyInstance, readonly RouteEntry[]>();

/** The routes an app registered, as the document collected them (method, pattern, schema). */
export function routeTable(app: FastifyInstance): readonly RouteEntry[] {
  return tables.get(app) ?? [];
}

/**
 * Collects the route table as routes are added: register this before the other route modules.
 * Serves /openapi.json and /docs.
 */
export function registerOpenApi(app: FastifyInstance, options: { title?: string } = {}): void {
  const routes: RouteEntry[] = [];
  tables.set(app, routes);
  app.addHook('onRoute', (r) => {
    for (const method of Array.isArray(r.method) ? r.method : [r.method]) routes.push({ method, url: r.url, ...(r.schema ? { schema: r.schema } : {}) });
  });
  let document: string | undefined;
  app.get(
    '/openapi.json',
    {
      schema: {
        summary: 'This document',
        tags: ['operator'],
        access: 'public',
        response: { 200: json('OpenAPI 3.1', z.looseObject({ openapi: z.string() })) },
      },
    },
    async (_request, reply) => {
      document ??= JSON.stringify(buildOpenApiDocument(routes, options));
      return reply.type('application/json; charset=utf-8').send(document);
    },
  );
  app.get(
    '/docs',
    { schema: { summary: 'This document, rendered for people', tags: ['operator'], access: 'public', response: { 200: answer('HTML', 'text/html') } } },
    async (_request, reply) => reply.type('text/html; charset=utf-8').send(docsPage()),
  );
}
