// The read rule's plan: which reads the mirror answers itself (with the filters, order keys and
// equality parameters of every form, in the rule's order) and which it forwards, saying why. No I/O.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { planGet, planList, planPagesOnly, type ListPlan, type ReadRequest } from '../../../api/read-plan.ts';
import { BadRequestError } from '../../../lib/errors.ts';
import { resourceDef } from '../../../lib/resources.ts';
import { CompiledFilters, filtersSql, orderSql } from '../../../mirror/reads/record-filters.ts';

const debugId = 'Svc-Debug-Id';
const base = { 'account-token': 'x', 'client-id': 'c', 'client-secret': 's', host: 'mirror', 'user-agent': 'ua', accept: 'application/json' };

function req(url: string, extra: Partial<ReadRequest> & { h?: Record<string, string> } = {}): ReadRequest {
  return { url, headers: { ...base, ...extra.h }, body: extra.body, def: extra.def ?? resourceDef('vendors')!, apiVersion: '2021-11-21' };
}

function served(r: ReadRequest): ListPlan {
  const plan = planList(r, debugId);
  assert.ok('serve' in plan, `expected the mirror to serve ${r.url}, it forwards: ${'forward' in plan ? plan.forward : ''}`);
  return plan.serve;
}

function forwarded(r: ReadRequest): string {
  const plan = planList(r, debugId);
  assert.ok('forward' in plan, `expected ${r.url} to be forwarded`);
  return plan.forward;
}

const q = (v: unknown) => encodeURIComponent(JSON.stringify(v));
const f = (field: string, operator: string, value: unknown) => ({ field, operator, value });

describe('read plan: lists', () => {
  it('a plain page is served with no filter and no order', () => {
    const p = served(req('/vendors?page=2&per_page=7'));
    assert.deepEqual(p, { page: 2, perPage: 7, includeDeleted: false, modifiedAfter: undefined, filters: [], hasFilterForms: false, orderBy: [] });
    assert.equal(served(req('/vendors')).perPage, undefined, "no per_page: the source system's default");
  });

  it('filters from the three forms, ANDed in the rule order: query arrays, [] params, body', () => {
    const body = Buffer.from(JSON.stringify({ filters: [f('email', 'ILIKE', '%@x.com')], order_by: [{ field: 'id', dir: 'desc' }] }));
    const url = `/vendors?filters%5B%5D=${q(f('name', '=', 'b'))}&filters=${q([f('name', '!=', 'a')])}&filters[]=${q(f('status', 'in', ['active', true]))}&order_by[]=${q({ field: 'name' })}&order_by=${q([{ field: 'source_update_time', dir: ' Desc ' }])}`;
    const p = served(req(url, { body, h: { 'content-type': 'application/json; charset=utf-8', 'content-length': String(body.length) } }));
    assert.deepEqual(p.filters, [f('name', '!=', 'a'), f('name', '=', 'b'), f('status', 'IN', ['active', true]), f('email', 'ILIKE', '%@x.com')]);
    assert.deepEqual(p.orderBy, [
      { field: 'source_update_time', dir: 'DESC' },
      { field: 'name', dir: 'ASC' },
      { field: 'id', dir: 'DESC' },
    ]);
    assert.equal(p.hasFilterForms, true);
  });

  it('repeated filters= arrays are concatenated; empty ones are none', () => {
    const p = served(req(`/vendors?filters=${q([f('name', '=', 'a')])}&filters=&filters=${q([f('id', '=', 'b')])}`));
    assert.deepEqual(p.filters, [f('name', '=', 'a'), f('id', '=', 'b')]);
  });

  it("equality parameters of the resource's table are filters; repeated ones are ANDed; they are not filter forms", () => {
    const p = served(req('/activities?type=note&type=call', { def: resourceDef('activities')! }));
    assert.deepEqual(p.filters, [f('type', '=', 'note'), f('type', '=', 'call')]);
    assert.equal(p.hasFilterForms, false);
  });

  it('time values are read as instants, zoneless ones as UTC, and passed on as UTC text', () => {
    const p = served(
      req(
        `/vendors?filters=${q([f('source_update_time', '>', '2024-05-01T12:00:00+02:00'), f('source_create_time', 'between', ['2024-01-01', '2024-01-02T00:00:00.123456'])])}`,
      ),
    );
    assert.deepEqual(p.filters, [
      f('source_update_time', '>', '2024-05-01T10:00:00.000Z'),
      f('source_create_time', 'BETWEEN', ['2024-01-01T00:00:00.000Z', '2024-01-02T00:00:00.123456Z']),
    ]);
  });

  it('source_data.<key> is served; a nested key, an unknown field, expand and unknown parameters are forwarded', () => {
    assert.deepEqual(served(req(`/vendors?filters=${q([f('source_data.VendorName', 'LIKE', 'A%')])}`)).filters, [f('source_data.VendorName', 'LIKE', 'A%')]);
    assert.match(forwarded(req(`/vendors?filters=${q([f('source_data.a.b', '=', 1)])}`)), /nested source_data key/);
    assert.match(forwarded(req(`/vendors?order_by[]=${q({ field: 'tax_number' })}`)), /field "tax_number" of vendors is not evaluated/);
    assert.match(forwarded(req('/vendors?expand=contacts')), /"expand"/);
    assert.match(forwarded(req('/vendors?status=active')), /parameter "status" is not evaluated by the mirror/);
    assert.match(forwarded(req('/drawings?drawing_area_id=7', { def: resourceDef('drawings')! })), /parameter "drawing_area_id"/);
    assert.match(forwarded(req('/vendors?page=1&page=2')), /"page" sent more than once/);
  });

  it('headers: evaluated and inert ones are served; Company-Id, Return-Source-Id, another API version are forwarded', () => {
    served(
      req('/vendors', {
        h: {
          'project-id': 'p',
          'include-source-data': 'true',
          traceparent: '00-1-2-01',
          'x-forwarded-for': '1.2.3.4',
          'svc-debug-id': 'd',
          'api-version': '2021-11-21',
        },
      }),
    );
    assert.equal(forwarded(req('/vendors', { h: { 'company-id': 'c1' } })), 'header Company-Id is not evaluated by the mirror');
    assert.equal(forwarded(req('/vendors', { h: { 'return-source-id': 'true' } })), 'header Return-Source-Id is not evaluated by the mirror');
    assert.match(forwarded(req('/vendors', { h: { 'api-version': '2030-01-01' } })), /Api-Version/);
    assert.match(forwarded(req('/vendors', { h: { 'if-none-match': '"x"' } })), /If-None-Match/);
  });

  it('bodies: another key or another type is forwarded; malformed JSON and wrong shapes are 400s that say what to fix', () => {
    const json = { 'content-type': 'application/json' };
    assert.match(forwarded(req('/vendors', { body: Buffer.from('{"filters":[],"limit":5}'), h: json })), /body key "limit"/);
    assert.match(forwarded(req('/vendors', { body: Buffer.from('filters=x'), h: { 'content-type': 'text/plain' } })), /type "text\/plain"/);
    served(req('/vendors', { body: Buffer.alloc(0), h: json }));
    for (const [body, message] of [
      ['{"filters":', /not JSON/],
      ['[1]', /must be a JSON object/],
      ['{"filters":{"field":"name"}}', /body.filters must be an array/],
      ['{"filters":[{"field":"name","operator":"=","value":null}]}', /body.filters.0/],
      ['{"filters":[{"field":"name","operator":"~","value":"a"}]}', /operator must be one of/],
      ['{"filters":[{"field":"name","operator":"=","value":"a","x":1}]}', /body.filters.0/],
      ['{"filters":[{"field":"name","operator":"IN","value":[]}]}', /non-empty array/],
      ['{"filters":[{"field":"name","operator":"BETWEEN","value":[1]}]}', /exactly two/],
      ['{"filters":[{"field":"name","operator":"LIKE","value":"a\\\\"}]}', /lone backslash/],
      ['{"filters":[{"field":"source_update_time","operator":"LIKE","value":"2024%"}]}', /is a time/],
      ['{"filters":[{"field":"source_update_time","operator":"=","value":"yesterday"}]}', /ISO 8601/],
      ['{"filters":[{"field":"source_data.","operator":"=","value":"a"}]}', /key of the source object/],
      ['{"order_by":[{"field":"name","dir":"up"}]}', /dir is ASC or DESC/],
      [JSON.stringify({ filters: Array.from({ length: 21 }, () => f('name', '=', 'a')) }), /At most 20 filters/],
      [JSON.stringify({ order_by: Array.from({ length: 6 }, () => ({ field: 'name' })) }), /At most 5 order_by keys/],
    ] as const) {
      assert.throws(
        () => planList(req('/vendors', { body: Buffer.from(body), h: json }), debugId),
        (e: unknown) => e instanceof BadRequestError && message.test(e.message),
        body,
      );
    }
    assert.throws(() => planList(req('/vendors?filters=nope'), debugId), /filters must be a JSON array/);
    assert.throws(() => planList(req('/vendors?filters[]=%5B%5D'), debugId), BadRequestError);
    assert.throws(() => planList(req('/vendors?per_page=1001'), debugId), /per_page must be an integer from 1 to 1000/);
    assert.throws(() => planList(req('/vendors?page=1.5'), debugId), /page must be an integer/);
  });
});

describe('read plan: plans kept for repeated reads', () => {
  const target = `/vendors?page=2&filters=${q([f('name', 'LIKE', 'A%')])}`;

  it('a repeated read gets the plan made for it before, not parsed again', () => {
    const first = planList(req(target), debugId);
    assert.ok('serve' in first);
    assert.equal(planList(req(target), debugId), first, 'the same plan');
    // Another resource, target or body is another plan.
    assert.notEqual(planList(req(target, { def: resourceDef('customers')! }), debugId), first);
    assert.notEqual(planList(req(`${target}&per_page=5`), debugId), first);
    const withBody = req(target, { body: Buffer.from('{"filters": []}'), h: { 'content-type': 'application/json' } });
    assert.notEqual(planList(withBody, debugId), first);
  });

  it('every page of a list shares its plan: the same filters, each its own page, checked as ever', () => {
    const page = (n: string, rest = `filters=${q([f('name', 'LIKE', 'B%')])}`) => planList(req(`/vendors?${rest}&page=${n}`), debugId);
    const two = page('2');
    assert.ok('serve' in two);
    for (const [n, expected] of [
      ['7', 7],
      ['1999', 1999],
      ['2', 2],
      ['007', 7],
    ] as const) {
      const plan = page(n);
      assert.ok('serve' in plan);
      assert.equal(plan.serve.page, expected, `page=${n}`);
      assert.equal(plan.serve.filters, two.serve.filters, `page=${n}: the kept plan's filters`);
    }
    assert.equal(page('2'), two, 'the same page: the same plan');
    // The page first, last, between, alone.
    const at = (target: string) => {
      const plan = planList(req(target), debugId);
      assert.ok('serve' in plan, target);
      return [plan.serve.page, plan.serve.perPage];
    };
    assert.deepEqual(at('/vendors?page=4&per_page=5'), [4, 5]);
    assert.deepEqual(at('/vendors?per_page=5&page=6'), [6, 5]);
    assert.deepEqual(at('/vendors?per_page=5&page=8&include_deleted=false'), [8, 5]);
    assert.deepEqual(at('/vendors?page=9'), [9, undefined]);
    assert.deepEqual(at('/vendors?page=3'), [3, undefined]);
    assert.deepEqual(at('/vendors?'), [1, undefined]);
    assert.deepEqual(at('/vendors?per_page=5'), [1, 5]);
    // Bad pages are still 400s, a page given twice (in any spelling) still forwarded.
    for (let i = 0; i < 2; i++) {
      assert.throws(() => page('0'), /page must be an integer/);
      assert.throws(() => page('99999999999999999'), /page must be an integer/);
      assert.throws(() => planList(req('/vendors?page=1.5'), debugId), /page must be an integer/);
      assert.equal(forwarded(req('/vendors?page=2&page=3')), 'parameter "page" sent more than once is not evaluated by the mirror');
      assert.equal(forwarded(req('/vendors?page=2&pag%65=3')), 'parameter "page" sent more than once is not evaluated by the mirror');
      assert.equal(forwarded(req('/vendors?page&page=3')), 'parameter "page" sent more than once is not evaluated by the mirror');
      assert.equal(forwarded(req('/vendors?page=4&colour=red')), 'parameter "colour" is not evaluated by the mirror');
    }
  });

  it("still checks every read's headers, and never keeps an error", () => {
    served(req(target));
    assert.equal(forwarded(req(target, { h: { 'company-id': 'c1' } })), 'header Company-Id is not evaluated by the mirror');
    const bad = `/vendors?filters=${q([f('name', 'NEAR', 'A')])}`;
    for (let i = 0; i < 2; i++) assert.throws(() => planList(req(bad), debugId), BadRequestError);
    const unknown = `/vendors?colour=red`;
    for (let i = 0; i < 2; i++) assert.equal(forwarded(req(unknown)), 'parameter "colour" is not evaluated by the mirror');
  });
});

describe('read plan: objects and folder pages', () => {
  it('an object read with no parameter and no body is served; anything else is forwarded', () => {
    assert.deepEqual(planGet(req('/vendors/1'), debugId), { serve: undefined });
    assert.deepEqual(planGet(req('/vendors/1?expand=contacts'), debugId), {
      forward: 'parameter "expand" (it changes the answer\'s shape) is not evaluated by the mirror',
    });
    assert.deepEqual(planGet(req('/vendors/1', { h: { 'company-id': 'c' } }), debugId), { forward: 'header Company-Id is not evaluated by the mirror' });
    assert.ok('forward' in planGet(req('/vendors/1', { body: Buffer.from('{}'), h: { 'content-type': 'application/json' } }), debugId));
  });

  it("a folder's files take pages only", () => {
    assert.deepEqual(planPagesOnly(req('/folders/1/files?page=2'), debugId), { serve: { page: 2, perPage: undefined } });
    assert.ok('forward' in planPagesOnly(req(`/folders/1/files?filters=${q([f('name', '=', 'a')])}`), debugId));
  });
});

describe('record filters SQL', () => {
  it("puts every caller's text in parameters, never in the SQL", () => {
    const hostile = "x' OR '1'='1";
    const { sql, params } = filtersSql([f(hostile, '=', hostile), f(`source_data.${hostile}`, 'LIKE', hostile), f(hostile, 'IN', [hostile, 1])] as never, 5);
    assert.ok(!sql.includes("'1'='1"), sql);
    assert.ok(params.includes(hostile));
    const o = orderSql([{ field: hostile, dir: 'DESC' }], 9);
    assert.ok(!o.columns.some((c) => c.sql.includes("'1'='1")));
    assert.deepEqual(o.params, [hostile]);
  });

  it('tests the JSON type of a field only where an object or an array could compare true', () => {
    // What filter-forms.test.ts checks against the sandbox for every value; here, the cost: the
    // test looks the field up a second time for every record that compares true (bench [11]).
    const typed = (operator: string, value: unknown) => filtersSql([f('source_data.Status', operator, value)] as never, 1).sql.includes('jsonb_typeof');
    assert.equal(typed('=', 'Active'), false);
    assert.equal(typed('IN', ['Active', 'On hold', true]), false);
    assert.equal(typed('LIKE', 'Act%'), false);
    assert.equal(typed('ILIKE', 'act%'), false);
    assert.equal(typed('=', '{"a": 1}'), true);
    assert.equal(typed('IN', ['x', '[1]']), true);
    assert.equal(typed('LIKE', '%ive'), true);
    assert.equal(typed('LIKE', '\\{%'), true);
    assert.equal(typed('ILIKE', '_ctive'), true);
    assert.equal(typed('NOT LIKE', 'Act%'), true);
    assert.equal(typed('<', 'B'), true);
    assert.equal(typed('!=', 'Active'), true);
    // No key's lookup asks the type of the whole source object (an array's or a scalar's key is NULL either way).
    assert.ok(!filtersSql([f('source_data.Status', '<', 'B')] as never, 1).sql.includes('jsonb_typeof(source_data)'));
  });

  it("compiles a kept plan's filters once, and again for other placeholders, indexes or filters", () => {
    const compiled = new CompiledFilters();
    const filters = [f('source_data.Status', '=', 'Active'), f('name', 'LIKE', 'A%')] as never as Parameters<typeof filtersSql>[0] & unknown[];
    const first = compiled.sql(filters, 6);
    assert.equal(compiled.sql(filters, 6), first, 'the same compiled filters');
    // Compiled anew, as a fresh array of the same filters is.
    const at7 = compiled.sql(filters, 7);
    assert.notEqual(at7.sql, first.sql);
    assert.equal(at7.sql, compiled.sql([...filters], 7).sql);
    assert.notEqual(compiled.sql(filters, 6, new Set(['name'])).sql, first.sql);
    // An array that changed is compiled again (a plan's never does; a caller's own array might).
    filters.push(f('name', '!=', 'B'));
    const longer = compiled.sql(filters, 6);
    assert.equal(longer.params.length, 6);
    assert.ok(longer.sql.startsWith(first.sql.replace(/ AND .*/s, '')));
    filters[0] = f('source_data.Status', '=', 'Closed') as never;
    assert.deepEqual(compiled.sql(filters, 6).params, ['Status', 'Closed', 'name', 'A%', 'name', 'B']);
  });
});
