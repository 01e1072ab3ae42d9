// How a route describes itself, once: the zod schemas of its params, query, headers, body and
// answers (Fastify validates and serializes with them through fastify-type-provider-zod) and the
// words of its OpenAPI operation. api/openapi.ts builds the document from these and nothing else.
// Route modules register through typedRoutes(app), so each handler's request types are inferred from
// the same schemas instead of being spelled by hand.
import type {
  FastifyBaseLogger,
  FastifyInstance,
  FastifyRequest,
  FastifySchema,
  FastifySchemaCompiler,
  FastifySerializerCompiler,
  RawReplyDefaultExpression,
  RawRequestDefaultExpression,
  RawServerDefault,
  RouteGenericInterface,
} from 'fastify';
import { serializerCompiler, validatorCompiler, type ZodTypeProvider } from 'fastify-type-provider-zod';
import { z } from 'zod';
import type { ResourceDef } from '../lib/resources.ts';

/** Who may call a route: the credentials its operation names. */
export type Security = 'public' | 'client' | 'account' | 'operator' | 'webhook';

// `summary`, `description`, `tags` (its first is the document's section) and `consumes` (the body's
// content type when not JSON) are the keys @fastify/swagger's types already give FastifySchema.
declare module 'fastify' {
  interface FastifySchema {
    /** The credentials the route takes (mapped to the document's security schemes). */
    access?: Security;
  }
}

/** The app as route modules register on it: each handler's request is typed from its route's zod schemas. */
export type RouteApp = FastifyInstance<RawServerDefault, RawRequestDefaultExpression, RawReplyDefaultExpression, FastifyBaseLogger, ZodTypeProvider>;

/** Registers routes whose handlers take their request types from the routes' schemas. */
export function typedRoutes(app: FastifyInstance): RouteApp {
  return app.withTypeProvider<ZodTypeProvider>();
}

/** The request a handler of a route with the schema `S` receives (for a handler written apart from its route). */
export type RouteRequest<S extends FastifySchema> = FastifyRequest<RouteGenericInterface, RawServerDefault, RawRequestDefaultExpression, S, ZodTypeProvider>;

/**
 * Parts of a request a route reads as they came rather than as parsed values: a body streamed to the
 * upstream, the query and headers of a read the read rule (read-plan.ts) evaluates in order, repeats
 * included, to decide between answering and forwarding (a per-key validator would refuse with a 400
 * what the upstream must be asked). Documented from the same schema; never used to validate, so its
 * handlers see the part as `unknown` (what came), never as the schema's parsed type.
 */
const asItCame = new WeakSet<z.ZodType>();
export function readAsItCame(schema: z.ZodType): z.ZodType<unknown, unknown> {
  asItCame.add(schema);
  return schema;
}

const isZod = (schema: unknown): schema is z.ZodType => schema instanceof z.ZodType;

/** Validates a request part with its zod schema, unless the route reads that part as it came. */
const validate: FastifySchemaCompiler<unknown> = (route) =>
  isZod(route.schema) && !asItCame.has(route.schema) ? validatorCompiler(route as Parameters<typeof validatorCompiler>[0]) : () => true;

/**
 * Serializes an object answer with its zod schema. Strings, buffers and streams never reach a
 * serializer (Fastify sends them as they are): the reads' bytes assembled in Postgres go out untouched.
 * An answer described without a schema (HTML, bytes, no body) is sent as JSON as any other.
 */
const serialize: FastifySerializerCompiler<unknown> = (route) =>
  isZod(route.schema) ? serializerCompiler(route as Parameters<typeof serializerCompiler>[0]) : (data: unknown) => JSON.stringify(data);

/** Sets the zod compilers on the app: every route's schema validates its input and serializes its answer. */
export function useZodSchemas(app: FastifyInstance): void {
  app.setValidatorCompiler(validate);
  app.setSerializerCompiler(serialize);
}

/** An answer with a JSON body: its description and schema, as Fastify and the document both read it. */
export function json(description: string, schema: z.ZodType): { description: string; content: { 'application/json': { schema: z.ZodType } } } {
  return { description, content: { 'application/json': { schema } } };
}

/** An answer that is not JSON (HTML, bytes, Prometheus text) or has no body (204, 304). */
export function answer(description: string, contentType?: string): { description: string; content?: Record<string, { schema: z.ZodType }> } {
  if (!contentType) return { description };
  return { description, content: { [contentType]: { schema: contentType.startsWith('text/') ? z.string() : z.string().meta({ format: 'binary' }) } } };
}

/** The contract's error shape, every 4xx and 5xx (api/errors.ts). */
export const errorSchema = z
  .object({ message: z.string(), code: z.string(), details: z.array(z.object({ path: z.string().optional(), message: z.string() })) })
  .meta({ id: 'Error' });
export const errorAnswer = (description: string) => json(description, errorSchema);

export const metaSchema = z.object({ current_page: z.number().int(), has_more_results: z.boolean().nullable() }).meta({ id: 'ListMeta' });

/** What the upstream answered, relayed as it came. */
export const forwardedSchema = z.unknown().describe("The upstream's answer, forwarded unchanged.");

/** Path parameters of a route, every one a string (ids, `source_id:<id>`, names). */
export function pathParams<const K extends string>(...names: K[]): z.ZodObject<Record<K, z.ZodString>> {
  return z.object(Object.fromEntries(names.map((n) => [n, z.string()])) as Record<K, z.ZodString>);
}

/**
 * Request headers a route documents (lower case, as Node hands them; the document writes them as
 * callers do). Loose: every other header passes, untouched.
 */
export function headersOf(shape: Record<string, z.ZodType>): z.ZodObject {
  return z.looseObject(shape);
}

export const asyncHeader = {
  'async-request': z.string().optional().describe('`true`: answer 202 at once and run the request in the background (see /async-requests/{id}).'),
};
export const sourceDataHeaders = {
  'include-source-data': z.string().optional().describe('`true`, or a comma list of source field names: adds `source_data`.'),
  'exclude-source-data': z.string().optional().describe('Comma list of source field names to leave out of `source_data`.'),
};
export const projectHeader = (description: string) => ({ 'project-id': z.string().optional().describe(description) });

const resourceSchemas = new Map<string, z.ZodType>();
/** A unified object: the catalog's fields, plus whatever else the upstream sent (kept as is). */
export function objectSchema(def: ResourceDef): z.ZodType {
  let s = resourceSchemas.get(def.name);
  if (!s) {
    const shape: Record<string, z.ZodType> = {};
    for (const f of def.fields) {
      if (f === 'id') shape[f] = z.string();
      else if (f === 'source_id') shape[f] = z.string().nullable();
      else if (f === 'source_create_time' || f === 'source_update_time') shape[f] = z.string().nullable().describe('ISO 8601');
      else shape[f] = z.unknown().optional();
    }
    shape.source_data = z.unknown().optional().describe("With `Include-Source-Data: true`: the source system's own object.");
    const title = def.name.replace(/(^|-)([a-z])/g, (_m, _d: string, c: string) => c.toUpperCase());
    s = z.looseObject(shape).meta({ id: title });
    resourceSchemas.set(def.name, s);
  }
  return s;
}

/** A page of a resource's records, as every list answers it. */
export const pageSchema = (def: ResourceDef) => z.object({ data: z.array(objectSchema(def)), meta: metaSchema });
