// The OpenAPI document covers every route the app registers, with the contract's parameters and
// schemas that resolve; /docs renders it without anything from outside. No I/O: nothing connects.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { Client, Connection } from '@temporalio/client';
import type { FastifyInstance } from 'fastify';
import { buildApp } from '../../../api/app.ts';
import { SyncControl } from '../../../api/sync-control.ts';
import { UpstreamClient } from '../../../connectors/upstream-client.ts';
import { createLogger } from '../../../lib/logger.ts';
import { resources } from '../../../lib/resources.ts';
import { AccountStore } from '../../../mirror/accounts.ts';
import { createPool } from '../../../mirror/pool.ts';
import { createPrisma } from '../../../mirror/prisma.ts';

type Doc = {
  openapi: string;
  paths: Record<string, Record<string, { summary: string; tags: string[]; parameters?: { name: string; in: string }[]; responses: Record<string, { content?: Record<string, { schema: unknown }> }>; requestBody?: unknown }>>;
  components: { schemas: Record<string, unknown>; securitySchemes: Record<string, unknown> };
};

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
      upstream: { client: upstream, target: { baseUrl: 'http://127.0.0.1:1', clientId: 'x'.repeat(36), clientSecret: 'y'.repeat(40), apiVersion: '2021-11-21', headerPrefix: 'Svc' } },
      sync,
      hashKey: key,
      encryptionKey: key,
    });
    // How many routes Fastify's own table holds (each method of each node, HEAD aside), counted
    // independently of how the document collects them.
    // The catch-all (`*`) that forwards the rest of the upstream's surface is described in the document's text, not as a path.
    for (const line of app.printRoutes({ commonPrefix: false }).split('\n').filter((l) => !l.includes('── *'))) {
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
