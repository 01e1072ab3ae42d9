// `GET /mirror/aggregates/:resource`: counts, sums, averages, minimums and maximums over the caller's
// mirrored records of a resource, optionally grouped by one field; an extension of the mirror's own
// (the upstream has no such read), like the changes feed. It takes the list reads' filter forms
// (`filters=` JSON arrays, repeated `filters[]=` JSON objects, a JSON body `{"filters": [...]}` on the
// GET), `include_deleted`, `modified_after` and `Project-Id` as lists do, and reads only the caller's
// account. There is no upstream to forward to: anything it cannot evaluate is a 400 naming it.
import type { FastifyInstance, FastifyRequest, FastifySchema } from 'fastify';
import { z } from 'zod';
import { isMirrored, knownProfile, scopeKindIn } from '../../connectors/source-systems/index.ts';
import { BadRequestError, NotFoundError } from '../../lib/errors.ts';
import { formatScope, resourceDef, resources, type ResourceDef } from '../../lib/resources.ts';
import type { AccountSummary } from '../../mirror/control/accounts.ts';
import { aggregateFunctions, aggregateRecords, type Measure } from '../../mirror/reads/aggregates.ts';
import type { Pool } from '../../mirror/db/pool.ts';
import type { ReadRouter } from '../../mirror/reads/read-router.ts';
import { sourceDataPrefix, timeColumns, type RecordFilter } from '../../mirror/reads/record-filters.ts';
import { credentialsFirst, header, type Authenticator } from '../auth.ts';
import { checkFilters, NotEvaluated, quoted, type Sourced } from '../filters.ts';
import { ProjectIds } from '../project-ids.ts';
import { readGetBody } from '../resource-reads.ts';
import { errorAnswer, headersOf, json, pathParams, projectHeader, typedRoutes } from '../route-schema.ts';

interface AggregateRouteDeps {
  pool: Pool;
  /** Picks the server of each read: a replica that holds the account's writes, else the primary. */
  router?: ReadRouter;
  auth: Authenticator;
  headerPrefix: string;
  projects?: ProjectIds;
  /** A resource's fields with a text expression index (MIRROR_INDEXED_FIELDS; lib/indexed-fields.ts textIndexed). */
  indexed?: (resource: string) => ReadonlySet<string>;
}

/** Most aggregated fields in one request, all functions together: each is one more expression per record. */
const maxMeasures = 20;
/** Most groups in one answer; past it `has_more_results` is true (narrow with filters). */
const maxGroups = 1000;

const fieldList = (fn: string) =>
  z
    .union([z.string(), z.array(z.string())])
    .transform((v) =>
      [v]
        .flat()
        .flatMap((s) => s.split(','))
        .map((s) => s.trim()),
    )
    .refine((fields) => fields.every((f) => f !== ''), `${fn} takes field names, comma-separated (e.g. ${fn}=amount,source_data.Balance)`)
    .optional()
    .describe(
      `Fields whose ${fn === 'sum' ? 'sum' : fn === 'avg' ? 'average' : fn === 'min' ? 'minimum' : 'maximum'} is answered: comma-separated, or the parameter repeated. Numbers, and strings that are decimal numbers; other values are left out.${fn === 'min' || fn === 'max' ? ' `source_create_time` / `source_update_time`: the earliest / latest instant.' : ''}`,
    );
const once = (name: string) => z.string({ message: `${name} is given once, as text` });

const parameters = 'count, sum, avg, min, max, group_by, limit, include_deleted, modified_after, filters, filters[]';

/** The query (the filter forms are read again in order from the raw query, with the body's). */
const aggregatesQuerySchema = z.strictObject(
  {
    count: z
      .enum(['', 'true', 'false'], { message: 'count is a flag: `count`, `count=true` or `count=false`' })
      .optional()
      .describe('Answer the number of records (per group). Answered also when no other aggregate is asked.'),
    sum: fieldList('sum'),
    avg: fieldList('avg'),
    min: fieldList('min'),
    max: fieldList('max'),
    group_by: once('group_by')
      .min(1, 'group_by names a field')
      .optional()
      .describe(
        'One field (a unified field, a time field, or `source_data.<key>`): one answer per distinct value; a JSON null and a missing field are the group `null`.',
      ),
    limit: z.coerce
      .number({ message: 'limit is a number' })
      .int('limit is an integer')
      .min(1)
      .max(maxGroups)
      .default(100)
      .describe(`Most groups answered, 1 to ${maxGroups} (groups in ascending order of their value).`),
    include_deleted: z
      .enum(['true', 'false'], { message: 'include_deleted is true or false' })
      .optional()
      .describe('Also count records the upstream deleted (as lists).'),
    modified_after: z.iso
      .datetime({ offset: true, message: 'modified_after is an ISO 8601 timestamp with a zone (e.g. 2024-05-01T12:00:00Z)' })
      .optional()
      .describe('Only records the mirror changed after this time.'),
    filters: z
      .string()
      .optional()
      .describe(
        'JSON array of `{field, operator, value}`, as list reads take it (also repeated `filters[]=<JSON object>`, or a JSON body `{"filters": [...]}` on the GET).',
      ),
    'filters[]': z
      .union([z.string(), z.array(z.string())])
      .optional()
      .describe('One `{field, operator, value}` JSON object; repeat it for more.'),
  },
  {
    error: (issue) =>
      issue.code === 'unrecognized_keys' ? `unknown parameter ${issue.keys.map((k) => quoted(k)).join(', ')} (aggregates take ${parameters})` : undefined,
  },
);

const measureSchema = z.object({
  sum: z.record(z.string(), z.number().nullable()).optional(),
  avg: z.record(z.string(), z.number().nullable()).optional(),
  min: z.record(z.string(), z.union([z.number(), z.string()]).nullable()).optional(),
  max: z.record(z.string(), z.union([z.number(), z.string()]).nullable()).optional(),
});
const aggregatesResponseSchema = z.object({
  data: z.array(
    z
      .object({ group: z.unknown().optional().describe("The group's value (only with group_by)."), count: z.number().int().optional() })
      .extend(measureSchema.shape),
  ),
  meta: z.object({ group_by: z.string().nullable(), has_more_results: z.boolean() }),
});

function jsonOf(text: string, what: string, shape: string): unknown {
  try {
    return JSON.parse(text) as unknown;
  } catch {
    throw new BadRequestError(`${what} must be ${shape} (it is not JSON).`, { details: [{ path: what, message: 'not JSON' }] });
  }
}

const jsonType = /^application\/(?:[\w.+-]+\+)?json\s*(?:;|$)/i;

/** The filter items of all three forms, in the list reads' order: `filters=`, `filters[]=`, the body. */
function filterItems(request: FastifyRequest, pairs: [string, string][]): Sourced[] {
  const arrays: Sourced[] = [];
  const listed: Sourced[] = [];
  for (const [name, value] of pairs) {
    if (name === 'filters') {
      if (value === '') continue;
      const json = jsonOf(value, 'filters', 'a JSON array of {field, operator, value} objects');
      if (!Array.isArray(json))
        throw new BadRequestError('filters must be a JSON array of {field, operator, value} objects.', {
          details: [{ path: 'filters', message: 'not an array' }],
        });
      for (const item of json) arrays.push({ at: `filters.${arrays.length}`, item });
    } else if (name === 'filters[]') {
      const at = `filters[]#${listed.length + 1}`;
      listed.push({ at, item: jsonOf(value, at, 'a JSON object {field, operator, value}') });
    }
  }
  const body: Sourced[] = [];
  const raw = Buffer.isBuffer(request.body) ? request.body : undefined;
  if (raw && raw.length > 0) {
    const type = [request.headers['content-type']].flat()[0] ?? '';
    if (!jsonType.test(type))
      throw new BadRequestError(
        `The body of an aggregates read is JSON (Content-Type: application/json), not ${quoted(type.split(';')[0]!.trim() || 'none')}.`,
      );
    const encoding = [request.headers['content-encoding']].flat()[0];
    if (encoding !== undefined && encoding.trim().toLowerCase() !== 'identity') throw new BadRequestError('The body of an aggregates read is not compressed.');
    const json = jsonOf(raw.toString('utf8'), 'The body', 'a JSON object {"filters": [...]}');
    if (typeof json !== 'object' || json === null || Array.isArray(json))
      throw new BadRequestError('The body of an aggregates read must be a JSON object {"filters": [...]}.');
    const unknown = Object.keys(json).find((k) => k !== 'filters');
    if (unknown !== undefined)
      throw new BadRequestError(`body.${quoted(unknown).slice(1, -1)}: an aggregates read takes only "filters" in its body.`, {
        details: [{ path: `body.${unknown.slice(0, 64)}`, message: 'unknown key' }],
      });
    const items = (json as { filters?: unknown }).filters;
    if (items !== undefined) {
      if (!Array.isArray(items)) throw new BadRequestError('body.filters must be an array of {field, operator, value} objects.');
      (items as unknown[]).forEach((item, i) => body.push({ at: `body.filters.${i}`, item }));
    }
  }
  return [...arrays, ...listed, ...body];
}

/** A field an aggregate or group_by names: a time field, a field of the resource's catalog entry, or `source_data.<key>`. */
function checkField(field: string, at: string, def: ResourceDef): void {
  if (field.startsWith(sourceDataPrefix)) {
    const key = field.slice(sourceDataPrefix.length);
    if (key === '')
      throw new BadRequestError(`${at}: name a key of the source object, e.g. source_data.Balance.`, {
        details: [{ path: at, message: 'empty source_data key' }],
      });
    if (key.includes('.'))
      throw new BadRequestError(`${at}: ${quoted(field)} is a nested source_data key; aggregates take top-level keys only.`, {
        details: [{ path: at, message: 'nested source_data key' }],
      });
    return;
  }
  if (!def.fields.includes(field)) {
    throw new BadRequestError(`${at}: ${quoted(field)} is not a field of ${def.name}; name one of ${def.fields.join(', ')}, or source_data.<key>.`, {
      details: [{ path: at, message: 'unknown field' }],
    });
  }
}

/** The scopes the request reads, Project-Id applied as lists apply it (see resources.ts scopesFor). */
async function scopesOf(
  projects: ProjectIds,
  account: AccountSummary,
  def: ResourceDef,
  request: FastifyRequest,
  pool: Pool,
): Promise<{ scopes: string[] | 'all'; scopePrefix?: string; narrowing?: RecordFilter }> {
  const value = header(request, 'project-id')?.trim() || undefined;
  const profile = knownProfile(account.sourceSystem);
  const narrowByProjectId = async (): Promise<RecordFilter | undefined> => {
    if (value === undefined || value === '*') return undefined;
    if (!def.fields.includes('project_id'))
      throw new BadRequestError(`Project-Id does not narrow ${def.name}: its records carry no project_id (send no Project-Id, or *).`);
    return { field: 'project_id', operator: '=', value: await projects.resolve(account, value, pool) };
  };
  /** One project's scope, or undefined for `*` (every project). */
  const oneProject = async (what: string): Promise<string | undefined> => {
    if (value === undefined) throw new BadRequestError(`${what}: send a Project-Id header (a project id, source_id:<id>, or * for every project).`);
    if (value === '*') return undefined;
    return formatScope([['project', await projects.resolve(account, value, pool)]]);
  };
  if (def.scope === 'child') {
    // Every parent's children at once (the parent in each record's scope): of one project when the
    // parent is project-scoped.
    const parent = resourceDef(def.parent!)!;
    if (scopeKindIn(profile, parent.name, parent.scope) === 'project') {
      const project = await oneProject(`${def.name} are under ${parent.name}, which are project-scoped`);
      return project === undefined ? { scopes: 'all' } : { scopes: 'all', scopePrefix: `${project}/` };
    }
    const narrowing = await narrowByProjectId();
    return narrowing ? { scopes: 'all', narrowing } : { scopes: 'all' };
  }
  if (scopeKindIn(profile, def.name, def.scope) === 'project') {
    const project = await oneProject(`${def.name} is project-scoped`);
    return { scopes: project === undefined ? 'all' : [project] };
  }
  const narrowing = await narrowByProjectId();
  return narrowing ? { scopes: [''], narrowing } : { scopes: [''] };
}

const aggregatesSchema = {
  summary: "Counts, sums, averages, minimums and maximums of a resource's records, grouped by a field (beyond the upstream's API)",
  description:
    'Over the caller\'s records only, live ones unless `include_deleted=true`, with the same filter forms as list reads (`filters=`, `filters[]=`, a JSON body `{"filters": [...]}` on the GET) and `Project-Id` as lists take it. Numeric aggregates read JSON numbers and strings that are decimal numbers (`"1250.00"`); any other value is left out (the sum of no value is null). Example: `?count&sum=balance&avg=balance&group_by=status` answers `{"data": [{"group": "active", "count": 120, "sum": {"balance": 1250.5}, "avg": {"balance": 10.42}}], "meta": {"group_by": "status", "has_more_results": false}}`. A field, operator or aggregate it cannot evaluate is a 400 that names it.',
  tags: ['mirror'],
  access: 'account',
  params: pathParams('resource'),
  querystring: aggregatesQuerySchema,
  headers: headersOf(
    projectHeader(
      'The project (its id, `source_id:<id>`, or `*`): required for project-scoped resources; narrows account-level resources whose records carry `project_id`.',
    ),
  ),
  response: {
    200: json('One entry per group (one entry when not grouped).', aggregatesResponseSchema),
    400: errorAnswer('A parameter, field, operator or aggregate it cannot evaluate, named.'),
    404: errorAnswer('No such resource in the catalog.'),
  },
} satisfies FastifySchema;

export function registerAggregateRoutes(fastify: FastifyInstance, deps: AggregateRouteDeps): void {
  const app = typedRoutes(fastify);
  const { pool, auth, headerPrefix } = deps;
  const projects = deps.projects ?? new ProjectIds({ pool });

  app.get(
    '/mirror/aggregates/:resource',
    { preValidation: [credentialsFirst(auth, 'account'), readGetBody], schema: aggregatesSchema },
    async (request, reply) => {
      const account = await auth.account(request);
      const def = resourceDef(request.params.resource);
      if (!def) throw new NotFoundError(`No resource ${quoted(request.params.resource)}; resources: ${resources.map((r) => r.name).join(', ')}.`);
      // Aggregates are the mirror's own: a resource it does not keep has no copy to count.
      if (!isMirrored(def.name))
        throw new NotFoundError(`${def.name} is not among the resources this mirror keeps (MIRROR_RESOURCES); aggregates are computed over the mirror's copy.`);
      // The filter forms in the order they came (the parsed query has lost it).
      const q = request.url.indexOf('?');
      const pairs = q < 0 ? [] : [...new URLSearchParams(request.url.slice(q + 1))];
      const o = request.query;

      const measures: Measure[] = [];
      for (const fn of aggregateFunctions) {
        for (const field of o[fn] ?? []) {
          checkField(field, fn, def);
          if (timeColumns[field] && (fn === 'sum' || fn === 'avg'))
            throw new BadRequestError(`${fn}: ${field} is a time; take its min or max.`, { details: [{ path: fn, message: 'a time field' }] });
          if (!measures.some((m) => m.fn === fn && m.field === field)) measures.push({ fn, field });
        }
      }
      if (measures.length > maxMeasures)
        throw new BadRequestError(`At most ${maxMeasures} aggregated fields in one read (sum, avg, min and max together); this read has ${measures.length}.`);
      if (o.group_by !== undefined) checkField(o.group_by, 'group_by', def);
      const count = o.count === undefined ? measures.length === 0 : o.count !== 'false';

      let filters: RecordFilter[];
      try {
        filters = checkFilters(filterItems(request, pairs), def);
      } catch (error) {
        // A list forwards what the mirror does not evaluate; here there is no one else to ask.
        if (error instanceof NotEvaluated)
          throw new BadRequestError(
            `Invalid filters: ${error.reason.replace(' is not evaluated by the mirror', ' is not one aggregates evaluate')} (filter on unified fields, id, source_create_time, source_update_time or source_data.<key>).`,
          );
        throw error;
      }
      const db = deps.router ? (await deps.router.readerFor(account.id)).pool : pool;
      const where = await scopesOf(projects, account, def, request, db);
      const result = await aggregateRecords(db, {
        accountId: account.id,
        resource: def.name,
        scopes: where.scopes,
        ...(where.scopePrefix !== undefined ? { scopePrefix: where.scopePrefix } : {}),
        includeDeleted: o.include_deleted === 'true',
        ...(o.modified_after ? { modifiedAfter: new Date(o.modified_after) } : {}),
        filters: where.narrowing ? [...filters, where.narrowing] : filters,
        measures,
        ...(o.group_by !== undefined ? { groupBy: o.group_by } : {}),
        limit: o.limit,
        ...(deps.indexed ? { indexed: deps.indexed(def.name) } : {}),
      });
      if (result.retrievedAt) void reply.header(`${headerPrefix}-Data-Retrieved-At`, result.retrievedAt.toISOString());
      else void reply.header(`${headerPrefix}-Warnings`, `nothing of ${def.name} is mirrored for this account yet: the aggregates cover no record`);
      const asked = new Set(measures.map((m) => m.fn));
      const data = result.groups.map((g) => {
        const out: Record<string, unknown> = {};
        if (o.group_by !== undefined) out.group = g.group;
        if (count) out.count = g.count;
        for (const fn of aggregateFunctions) if (asked.has(fn)) out[fn] = g.values[fn];
        return out;
      });
      return reply.send({ data, meta: { group_by: o.group_by ?? null, has_more_results: result.hasMore } });
    },
  );
}
