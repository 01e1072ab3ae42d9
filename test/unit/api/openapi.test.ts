// The OpenAPI document covers every route the app registers, with the contract's parameters and
// schemas that resolve; /docs renders it without anything from outside. It is generated from the
// routes' own schemas, so it cannot drift from them: each operation has exactly the parameters and
// body of its route's schema, a route without a schema is caught, and a route's schema validates its
// input. No I/O: nothing connects.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { Client, Connection } from '@temporalio/client';
import Fastify, { type FastifyInstance } from 'fastify';
import { z } from 'zod';
import { buildApp } from '../../../api/app.ts';
import { registerErrorHandling } from '../../../api/errors.ts';
import { openApiPath, registerOpenApi, routeTable } from '../../../api/openapi.ts';
import { useZodSchemas } from '../../../api/route-schema.ts';
import { SyncControl } from '../../../api/sync-control.ts';
import { UpstreamClient } from '../../../connectors/upstream-client.ts';
import { createLogger } from '../../../lib/logger.ts';
import { resources } from '../../../lib/resources.ts';
import { AccountStore } from '../../../mirror/control/accounts.ts';
import { createPool } from '../../../mirror/db/pool.ts';
import { createPrisma } from '../../../mirror/db/prisma.ts';

type Doc = {
  openapi: string;
  paths: Record<
    string,
    Record<
      string,
      {
        summary: string;
        tags: string[];
        parameters?: { name: string; in: string }[];
        responses: Record<string, { content?: Record<string, { schema: unknown }> }>;
        requestBody?: unknown;
      }
    >
  >;
  components: { schemas: Record<string, unknown>; securitySchemes: Record<string, unknown> };
};

const keysOf = (schema: unknown): string[] => (schema instanceof z.ZodObject ? Object.keys(schema.shape).sort() : []);
const names = (params: { name: string; in: string }[] | undefined, place: string) =>
  (params ?? [])
    .filter((p) => p.in === place)
    .map((p) => p.name.toLowerCase())
    .sort();

/**
 * Where the document and the app's route table (collected by Fastify's onRoute hook) disagree: a
 * route without an operation or an operation without a route, a route without its schema, path
 * parameters other than the route's, query parameters, headers or a body other than its schema's.
 */
function drift(app: FastifyInstance, doc: Doc): string[] {
  const problems: string[] = [];
  const routes = routeTable(app).filter((r) => r.method !== 'HEAD' && !r.url.includes('*'));
  for (const r of routes) {
    const at = `${r.method} ${r.url}`;
    const op = doc.paths[openApiPath(r.url)]?.[r.method.toLowerCase()];
    if (!op) {
      problems.push(`${at}: no operation`);
      continue;
    }
    const s = r.schema;
    if (!s?.summary || !s.tags?.length || !s.access) problems.push(`${at}: no schema describes it`);
    const inUrl = [...r.url.matchAll(/:([A-Za-z0-9_]+)/g)].map((m) => m[1]!.toLowerCase()).sort();
    if (String(keysOf(s?.params).map((k) => k.toLowerCase())) !== String(inUrl))
      problems.push(`${at}: its params schema names ${keysOf(s?.params).join(', ') || 'nothing'}, its path ${inUrl.join(', ') || 'nothing'}`);
    for (const [place, part] of [
      ['path', s?.params],
      ['query', s?.querystring],
      ['header', s?.headers],
    ] as const) {
      const want = keysOf(part).map((k) => k.toLowerCase());
      if (String(names(op.parameters, place)) !== String(want))
        problems.push(`${at}: ${place} parameters ${names(op.parameters, place).join(', ')} in the document, ${want.join(', ')} in the schema`);
    }
    if ((op.requestBody !== undefined) !== (s?.body !== undefined)) problems.push(`${at}: a body in ${op.requestBody ? 'the document' : 'the schema'} only`);
  }
  for (const [path, ops] of Object.entries(doc.paths)) {
    for (const method of Object.keys(ops)) {
      if (!routes.some((r) => r.method === method.toUpperCase() && openApiPath(r.url) === path))
        problems.push(`${method.toUpperCase()} ${path}: an operation without a route`);
    }
  }
  return problems;
}

describe('OpenAPI document', () => {
  let app: FastifyInstance;
  let doc: Doc;
  let routeCount = 0;

  before(async () => {
    const url = 'postgresql://nobody@127.0.0.1:1/none';
    const key = Buffer.alloc(32, 7);
    const prisma = createPrisma(url);
    const upstream = new UpstreamClient({ baseUrl: 'http://127.0.0.1:1', clientId: 'x'.repeat(36), clientSecret: 'y'.repeat(40) });
    const sync = new SyncControl(new Client({ connection: Connection.lazy({ address: '127.0.0.1:1' }) }), 'q');
    app = await buildApp({
      pool: createPool(url),
      prisma,
      accounts: new AccountStore(prisma, { encryptionKey: key, hashKey: key }),
      logger: createLogger({ level: 'silent' }),
      upstream: {
        client: upstream,
        target: { baseUrl: 'http://127.0.0.1:1', clientId: 'x'.repeat(36), clientSecret: 'y'.repeat(40), apiVersion: '2021-11-21', headerPrefix: 'Svc' },
      },
      sync,
      hashKey: key,
      encryptionKey: key,
    });
    // How many routes Fastify's own table holds (each method of each node, HEAD aside), counted
    // independently of how the document collects them.
    // The catch-all (`*`) that forwards the rest of the upstream's surface is described in the document's text, not as a path.
    for (const line of app
      .printRoutes({ commonPrefix: false })
      .split('\n')
      .filter((l) => !l.includes('── *'))) {
      for (const m of line.matchAll(/\(([A-Z, ]+)\)/g)) routeCount += m[1]!.split(', ').filter((x) => x !== 'HEAD').length;
    }
    const res = await app.inject({ method: 'GET', url: '/openapi.json' });
    assert.equal(res.statusCode, 200);
    doc = res.json();
  });
  after(async () => {
    await app?.close();
  });

  it('is OpenAPI 3.1 and documents every route of the app, and only those', () => {
    assert.equal(doc.openapi, '3.1.0');
    const operations = Object.entries(doc.paths).flatMap(([path, ops]) => Object.entries(ops).map(([method, op]) => ({ path, method, op })));
    assert.ok(routeCount > 40, `the app has its routes (${routeCount})`);
    assert.equal(operations.length, routeCount, 'one operation per route');
    for (const { path, method, op } of operations) {
      const url = path.replace(/\{([^}]+)\}/g, ':$1');
      assert.ok(app.hasRoute({ method: method.toUpperCase(), url }), `${method} ${path} is a route of the app`);
      assert.notEqual(op.tags[0], 'other', `${method} ${path} has a description of its own`);
    }
  });

  it('cannot drift: each operation is its route, with exactly the parameters and body of its schema', () => {
    assert.ok(routeTable(app).length > 40, 'the route table is collected');
    assert.deepEqual(drift(app, doc), []);
  });

  it('documents a new route from its schema alone, validates its input with it, and catches a route without one', async () => {
    const small = Fastify();
    registerErrorHandling(small);
    useZodSchemas(small);
    registerOpenApi(small);
    const widget = {
      summary: 'One widget',
      tags: ['widgets'],
      access: 'account',
      params: z.object({ id: z.string() }),
      querystring: z.object({ colour: z.enum(['red', 'blue']).optional() }),
    } as const;
    small.get('/widgets/:id', { schema: widget }, async () => ({ ok: true }));
    // Deliberately broken: no schema at all, and a params schema that names another parameter.
    small.get('/gadgets/:id', async () => ({ ok: true }));
    small.get('/things/:thingId', { schema: { ...widget, summary: 'One thing', params: z.object({ id: z.string() }) } }, async () => ({ ok: true }));
    await small.ready();
    const smallDoc = (await small.inject({ method: 'GET', url: '/openapi.json' })).json<Doc>();
    const widgets = smallDoc.paths['/widgets/{id}']!.get!;
    assert.equal(widgets.summary, 'One widget');
    assert.deepEqual(names(widgets.parameters, 'query'), ['colour'], 'the query parameter comes from the schema, with no second entry anywhere');
    assert.deepEqual(drift(small, smallDoc), [
      'GET /gadgets/:id: no schema describes it',
      'GET /gadgets/:id: its params schema names nothing, its path id',
      'GET /things/:thingId: its params schema names id, its path thingid',
    ]);
    const bad = await small.inject({ method: 'GET', url: '/widgets/1?colour=green' });
    assert.equal(bad.statusCode, 400);
    const body = bad.json<{ message: string; code: string; details: { path?: string; message: string }[] }>();
    assert.equal(body.code, 'invalid_request');
    assert.match(body.message, /^Invalid query: colour: /, 'names the part and the parameter to fix');
    assert.equal(body.details[0]?.path, 'colour');
    assert.equal((await small.inject({ method: 'GET', url: '/widgets/1?colour=red' })).statusCode, 200);
    await small.close();
  });

  it('describes each resource of the catalog with its list parameters and object schema', () => {
    for (const def of resources.filter((d) => d.scope !== 'child')) {
      const list = doc.paths[def.path]?.get;
      assert.ok(list, `${def.path} listed`);
      const names = (list.parameters ?? []).map((p) => `${p.in}:${p.name}`);
      for (const want of ['query:page', 'query:per_page', 'header:Include-Source-Data']) assert.ok(names.includes(want), `${def.path} has ${want}`);
      if (def.scope === 'project') assert.ok(names.includes('header:Project-Id'), `${def.path} names Project-Id`);
    }
    const text = JSON.stringify(doc);
    for (const ref of text.matchAll(/"\$ref":"#\/components\/schemas\/([^"]+)"/g)) assert.ok(doc.components.schemas[ref[1]!], `$ref ${ref[1]} resolves`);
    assert.ok(doc.components.schemas.Projects, 'named resource schemas land in components');
    assert.ok(doc.components.securitySchemes.AccountToken && doc.components.securitySchemes.OperatorBasic);
  });

  it('serves a self-contained reference page at /docs', async () => {
    const res = await app.inject({ method: 'GET', url: '/docs' });
    assert.equal(res.statusCode, 200);
    assert.match(String(res.headers['content-type']), /text\/html/);
    assert.match(res.body, /fetch\('\/openapi\.json'\)/);
    assert.doesNotMatch(res.body, /<script[^>]+src=|<link[^>]+href="http/, 'loads nothing from elsewhere');
  });
});
