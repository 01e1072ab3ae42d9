// Contract tests of the sandbox's list reads (the drop-in read rule): the three filter forms and
// order_by forms, filters on every kind of field, order with ties and DESC, paging after ordering,
// Project-Id narrowing of account-level lists, equality parameters, and the 400s of bad input.
import assert from 'node:assert/strict';
import { request as httpRequest } from 'node:http';
import { after, before, describe, test } from 'node:test';
import type { Sandbox } from '../../sandbox/server.ts';
import { admin, all, call, link, sleep, start, type Json, type Linked, type Rec } from './helpers.ts';

let sb: Sandbox;
let ledger: Linked;
let crm: Linked;
let build: Linked;
let erp: Linked;
let customers: Rec[];
before(async () => {
  sb = await start({ seed: 5, size: 60 });
  ledger = await link(sb, 'graphledger');
  crm = await link(sb, 'crmcloud');
  build = await link(sb, 'buildpro');
  erp = await link(sb, 'sqlerp');
  customers = await all(sb, '/customers', { ...ledger.headers, 'include-source-data': 'true' }, 1000);
});
after(async () => {
  await sb.close();
});

const q = (v: unknown) => encodeURIComponent(JSON.stringify(v));
const ids = (rs: Rec[]) => rs.map((r) => String(r.id));

/** A GET with a body (fetch refuses one), answered as `call` answers. */
function getWithBody(path: string, headers: Record<string, string>, body: string, contentType = 'application/json'): Promise<Json> {
  return new Promise((resolve, reject) => {
    const url = new URL(path, sb.url);
    const req = httpRequest(
      url,
      { method: 'GET', headers: { ...headers, 'content-type': contentType, 'content-length': String(Buffer.byteLength(body)) } },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () => {
          const text = Buffer.concat(chunks).toString('utf8');
          let parsed: unknown;
          try {
            parsed = JSON.parse(text);
          } catch {
            parsed = {};
          }
          const h = new Headers();
          for (const [k, v] of Object.entries(res.headers)) if (typeof v === 'string') h.set(k, v);
          resolve({ status: res.statusCode ?? 0, headers: h, body: parsed as Json['body'], text });
        });
      },
    );
    req.on('error', reject);
    req.end(body);
  });
}

async function list(path: string, headers: Record<string, string>, body?: unknown): Promise<Json> {
  return body === undefined ? call(sb, 'GET', path, { headers }) : getWithBody(path, headers, JSON.stringify(body));
}

describe('the three filter forms', () => {
  test('filters=[...], repeated filters[]= (plain and percent-encoded) and a JSON body answer the same, byte for byte', async () => {
    const status = String(customers[0]!.status);
    const type = String(customers[0]!.type);
    const f1 = { field: 'status', operator: '=', value: status };
    const f2 = { field: 'type', operator: '=', value: type };
    const expected = customers.filter((c) => c.status === status && c.type === type);
    assert.ok(expected.length > 0 && expected.length < customers.length);
    const query = await list(`/customers?per_page=100&filters=${q([f1, f2])}`, ledger.headers);
    const repeated = await list(`/customers?per_page=100&filters[]=${q(f1)}&filters[]=${q(f2)}`, ledger.headers);
    const encoded = await list(`/customers?per_page=100&filters%5B%5D=${q(f1)}&filters%5B%5D=${q(f2)}`, ledger.headers);
    const body = await list('/customers?per_page=100', ledger.headers, { filters: [f1, f2] });
    for (const r of [query, repeated, encoded, body]) assert.equal(r.status, 200, r.text);
    assert.deepEqual(ids(query.body.data), ids(expected));
    assert.equal(repeated.text, query.text);
    assert.equal(encoded.text, query.text);
    assert.equal(body.text, query.text);
  });

  test('forms combine: every predicate of every form is ANDed', async () => {
    const times = customers.map((c) => String(c.source_update_time)).sort();
    const pivot = times[20]!;
    const status = String(customers[3]!.status);
    const r = await list(
      `/customers?per_page=100&filters=${q([{ field: 'source_update_time', operator: '>', value: pivot }])}&filters[]=${q({ field: 'status', operator: '=', value: status })}`,
      ledger.headers,
      {
        filters: [{ field: 'balance', operator: '>=', value: 1000 }],
      },
    );
    assert.equal(r.status, 200, r.text);
    const expected = customers.filter((c) => String(c.source_update_time) > pivot && c.status === status && typeof c.balance === 'number' && c.balance >= 1000);
    assert.deepEqual(ids(r.body.data), ids(expected));
  });

  test('an Async-Request GET keeps its body', async () => {
    const status = String(customers[0]!.status);
    const r = await getWithBody(
      '/customers?per_page=100',
      { ...ledger.headers, 'async-request': 'true' },
      JSON.stringify({ filters: [{ field: 'status', operator: '=', value: status }] }),
    );
    assert.equal(r.status, 202);
    const id = r.headers.get('svc-async-request-id') ?? [...r.headers.entries()].find(([k]) => k.endsWith('async-request-id'))?.[1];
    assert.ok(id, [...r.headers.keys()].join(','));
    let answer: Json | undefined;
    for (let i = 0; i < 100; i++) {
      answer = await call(sb, 'GET', `/async-requests/${id}`, { headers: ledger.headers });
      if (answer.status !== 202) break;
      await sleep(20);
    }
    assert.equal(answer!.status, 200, answer!.text);
    assert.deepEqual(ids(answer!.body.data), ids(customers.filter((c) => c.status === status)));
  });
});

describe('filter semantics on every kind of field', () => {
  const run = async (filters: unknown[]) => {
    const r = await list(`/customers?per_page=1000&filters=${q(filters)}`, ledger.headers);
    assert.equal(r.status, 200, r.text);
    return ids(r.body.data);
  };

  test('id, unified text fields, numbers, and IN / NOT IN / BETWEEN', async () => {
    const some = customers.slice(3, 6).map((c) => String(c.id));
    assert.deepEqual(await run([{ field: 'id', operator: 'IN', value: some }]), some);
    assert.deepEqual(await run([{ field: 'id', operator: 'NOT IN', value: some }]), ids(customers.filter((c) => !some.includes(String(c.id)))));
    const balances = customers.map((c) => c.balance as number).sort((a, b) => a - b);
    const [lo, hi] = [balances[10]!, balances[40]!];
    assert.deepEqual(
      await run([{ field: 'balance', operator: 'BETWEEN', value: [lo, hi] }]),
      ids(customers.filter((c) => (c.balance as number) >= lo && (c.balance as number) <= hi)),
    );
    assert.deepEqual(
      await run([{ field: 'balance', operator: 'NOT BETWEEN', value: [lo, hi] }]),
      ids(customers.filter((c) => !((c.balance as number) >= lo && (c.balance as number) <= hi))),
    );
    const name = String(customers[7]!.name);
    assert.deepEqual(await run([{ field: 'name', operator: '<', value: name }]), ids(customers.filter((c) => String(c.name) < name)));
  });

  test('numbers compare numerically only with numeric values; a text value compares their JSON text', async () => {
    // 900 < 1000 as numbers, but "900" > "1000" as text.
    const numeric = await run([{ field: 'balance', operator: '>', value: 1000 }]);
    assert.deepEqual(numeric, ids(customers.filter((c) => (c.balance as number) > 1000)));
    const textual = await run([{ field: 'balance', operator: '>', value: '1000' }]);
    assert.deepEqual(textual, ids(customers.filter((c) => JSON.stringify(c.balance) > '1000')));
    assert.notDeepEqual(numeric, textual);
  });

  test('null and missing values: only != passes; NOT IN, NOT LIKE, NOT BETWEEN fail', async () => {
    const withParent = customers.filter((c) => c.parent_id !== null);
    const without = customers.filter((c) => c.parent_id === null);
    assert.ok(withParent.length > 0 && without.length > 0);
    const p = String(withParent[0]!.parent_id);
    assert.deepEqual(await run([{ field: 'parent_id', operator: '!=', value: p }]), ids(customers.filter((c) => c.parent_id !== p)));
    assert.deepEqual(await run([{ field: 'parent_id', operator: 'NOT IN', value: [p] }]), ids(withParent.filter((c) => c.parent_id !== p)));
    assert.deepEqual(await run([{ field: 'parent_id', operator: 'NOT LIKE', value: 'zzz%' }]), ids(withParent));
    assert.deepEqual(
      await run([{ field: 'parent_id', operator: 'NOT BETWEEN', value: ['0', '1'] }]),
      ids(withParent.filter((c) => !(String(c.parent_id) >= '0' && String(c.parent_id) <= '1'))),
    );
    // An array (addresses) is null to a filter.
    assert.deepEqual(await run([{ field: 'addresses', operator: '!=', value: 'x' }]), ids(customers));
    assert.deepEqual(await run([{ field: 'addresses', operator: '=', value: 'x' }]), []);
  });

  test('LIKE: % and _ wildcards, \\ escapes, whole-value match; ILIKE folds ASCII letters', async () => {
    const email = String(customers[2]!.email);
    const at = email.indexOf('@');
    assert.deepEqual(
      await run([{ field: 'email', operator: 'LIKE', value: `${email.slice(0, at)}%` }]),
      ids(customers.filter((c) => String(c.email).startsWith(email.slice(0, at)))),
    );
    assert.deepEqual(
      await run([{ field: 'email', operator: 'LIKE', value: `_${email.slice(1)}` }]),
      ids(customers.filter((c) => String(c.email).slice(1) === email.slice(1))),
    );
    assert.deepEqual(await run([{ field: 'email', operator: 'LIKE', value: email.slice(1) }]), [], 'LIKE matches the whole value');
    assert.deepEqual(await run([{ field: 'email', operator: 'ILIKE', value: email.toUpperCase() }]), ids(customers.filter((c) => c.email === email)));
    assert.deepEqual(await run([{ field: 'email', operator: 'LIKE', value: email.toUpperCase() }]), []);
    assert.deepEqual(await run([{ field: 'email', operator: 'NOT ILIKE', value: email.toUpperCase() }]), ids(customers.filter((c) => c.email !== email)));
    // "ap@" then any run: every email; with the % escaped, only a literal "%".
    assert.equal((await run([{ field: 'email', operator: 'LIKE', value: 'ap@%' }])).length, customers.length);
    assert.deepEqual(await run([{ field: 'email', operator: 'LIKE', value: 'ap@\\%' }]), []);
    assert.deepEqual(await run([{ field: 'email', operator: 'LIKE', value: 'ap\\@%' }]), ids(customers), '\\ before an ordinary character is that character');
  });

  test('source_data.<key>: a top-level key of the raw source object, whatever Include-Source-Data says', async () => {
    const raw = (c: Rec) => (c.source_data as { data: Rec }).data;
    const key = 'name';
    assert.equal(raw(customers[0]!)[key], customers[0]!.name, 'graphledger names source fields in camel case');
    const name = String(customers[4]!.name);
    // No Include-Source-Data header: the filter still reads the whole raw object.
    assert.deepEqual(await run([{ field: `source_data.${key}`, operator: '=', value: name }]), ids(customers.filter((c) => c.name === name)));
    assert.deepEqual(await run([{ field: 'source_data.__typename', operator: '=', value: String(raw(customers[0]!).__typename) }]), ids(customers));
    assert.deepEqual(await run([{ field: 'source_data.noSuchKey', operator: '=', value: 'x' }]), []);
  });

  test('time fields compare as instants: offsets and fractions are read, a date alone is midnight UTC', async () => {
    const t = String(customers[9]!.source_update_time);
    const ms = Date.parse(t);
    const plus2 = new Date(ms + 2 * 3_600_000).toISOString().replace('Z', '+02:00');
    assert.deepEqual(
      await run([{ field: 'source_update_time', operator: '=', value: plus2 }]),
      ids(customers.filter((c) => Date.parse(String(c.source_update_time)) === ms)),
    );
    // A microsecond past the record's time: `>=` leaves it out (Postgres keeps microseconds).
    assert.deepEqual(
      await run([{ field: 'source_update_time', operator: '>=', value: new Date(ms).toISOString().replace('.000Z', '.000001Z') }]),
      ids(customers.filter((c) => Date.parse(String(c.source_update_time)) > ms)),
    );
    const day = t.slice(0, 10);
    assert.deepEqual(
      await run([{ field: 'source_create_time', operator: '>=', value: day }]),
      ids(customers.filter((c) => Date.parse(String(c.source_create_time)) >= Date.parse(`${day}T00:00:00Z`))),
    );
  });

  test('patched and created records are filtered on their current values', async () => {
    const target = customers[11]!;
    const patched = await admin(sb, 'PATCH', '/_admin/objects', {
      account_token: ledger.token,
      resource: 'customers',
      id: target.id,
      patch: { status: 'Zebra' },
    });
    assert.equal(patched.status, 200, patched.text);
    const created = await admin(sb, 'POST', '/_admin/objects', {
      account_token: ledger.token,
      resource: 'customers',
      object: { name: 'Zebra Works', status: 'Zebra' },
    });
    assert.equal(created.status, 201, created.text);
    assert.deepEqual(await run([{ field: 'status', operator: '=', value: 'Zebra' }]), [String(target.id), String(created.body.id)]);
    await admin(sb, 'PATCH', '/_admin/objects', { account_token: ledger.token, resource: 'customers', id: target.id, patch: { status: target.status } });
    assert.deepEqual(await run([{ field: 'status', operator: '=', value: 'Zebra' }]), [String(created.body.id)]);
    await admin(sb, 'DELETE', '/_admin/objects', { account_token: ledger.token, resource: 'customers', id: created.body.id });
    assert.deepEqual(await run([{ field: 'status', operator: '=', value: 'Zebra' }]), []);
  });
});

describe('order_by', () => {
  test('the three forms; ties keep the list order; DESC; paging after ordering', async () => {
    const order = [{ field: 'type' }, { field: 'status', dir: 'desc' }];
    const byText = (a: string, b: string) => (a < b ? -1 : a > b ? 1 : 0);
    const expected = customers
      .map((c, i) => ({ c, i }))
      .sort((a, b) => byText(String(a.c.type), String(b.c.type)) || -byText(String(a.c.status), String(b.c.status)) || a.i - b.i)
      .map(({ c }) => String(c.id));
    const query = await list(`/customers?per_page=1000&order_by=${q(order)}`, ledger.headers);
    const repeated = await list(`/customers?per_page=1000&order_by[]=${q(order[0])}&order_by[]=${q(order[1])}`, ledger.headers);
    const body = await list('/customers?per_page=1000', ledger.headers, { order_by: order });
    assert.equal(query.status, 200, query.text);
    assert.deepEqual(ids(query.body.data), expected);
    assert.equal(repeated.text, query.text);
    assert.equal(body.text, query.text);
    // Pages of 7 are slices of the ordered list, has_more_results exact.
    const pages: string[] = [];
    for (let page = 1; page <= 9; page++) {
      const r = await list(`/customers?per_page=7&page=${page}&order_by=${q(order)}`, ledger.headers);
      pages.push(...ids(r.body.data));
      assert.equal(r.body.meta.has_more_results, page * 7 < customers.length);
    }
    assert.deepEqual(pages, expected);
  });

  test('classes: numbers first, then texts, then null, objects and arrays, whatever the direction', async () => {
    const made = await admin(sb, 'POST', '/_admin/objects', {
      account_token: ledger.token,
      resource: 'customers',
      object: { name: 'Text Balance', balance: 'n/a' },
    });
    const nulled = await admin(sb, 'POST', '/_admin/objects', {
      account_token: ledger.token,
      resource: 'customers',
      object: { name: 'No Balance', balance: null },
    });
    const nested = await admin(sb, 'POST', '/_admin/objects', {
      account_token: ledger.token,
      resource: 'customers',
      object: { name: 'Object Balance', balance: { v: 1 } },
    });
    try {
      const numbered = customers.map((c, i) => ({ id: String(c.id), b: c.balance as number, i }));
      const asc = await list(`/customers?per_page=1000&order_by=${q([{ field: 'balance' }])}`, ledger.headers);
      const desc = await list(`/customers?per_page=1000&order_by=${q([{ field: 'balance', dir: 'DESC' }])}`, ledger.headers);
      const tail = [String(made.body.id), String(nulled.body.id), String(nested.body.id)];
      assert.deepEqual(ids(asc.body.data), [...[...numbered].sort((a, b) => a.b - b.b || a.i - b.i).map((x) => x.id), ...tail]);
      assert.deepEqual(
        ids(desc.body.data),
        [...[...numbered].sort((a, b) => b.b - a.b || a.i - b.i).map((x) => x.id), ...tail],
        'class order stays ascending under DESC; null and object tie in list order',
      );
      // Order keys and filters together, and a time key.
      const byTime = await list(
        `/customers?per_page=1000&order_by=${q([{ field: 'source_create_time', dir: 'DESC' }])}&filters=${q([{ field: 'balance', operator: '>', value: 0 }])}`,
        ledger.headers,
      );
      const expectedTimes = numbered
        .filter((x) => x.b > 0)
        .sort((a, b) => Date.parse(String(customers[b.i]!.source_create_time)) - Date.parse(String(customers[a.i]!.source_create_time)) || a.i - b.i)
        .map((x) => x.id);
      assert.deepEqual(ids(byTime.body.data), expectedTimes);
    } finally {
      for (const m of [made, nulled, nested])
        await admin(sb, 'DELETE', '/_admin/objects', { account_token: ledger.token, resource: 'customers', id: m.body.id });
    }
  });
});

describe('Project-Id on account-level lists', () => {
  test('narrows AP invoices to the project named (id or source_id:), * and no header list all, an unknown project is 404; customers ignore it', async () => {
    const invoices = await all(sb, '/ap-invoices', ledger.headers, 1000);
    const projects = (await call(sb, 'GET', '/projects', { headers: ledger.headers })).body.data;
    const project = projects.find((p) => invoices.some((i) => i.project_id === p.id))!;
    const expected = ids(invoices.filter((i) => i.project_id === project.id));
    assert.ok(expected.length > 0 && expected.length < invoices.length);
    const byId = await call(sb, 'GET', '/ap-invoices?per_page=1000', { headers: { ...ledger.headers, 'project-id': String(project.id) } });
    assert.deepEqual(ids(byId.body.data), expected);
    const bySource = await call(sb, 'GET', '/ap-invoices?per_page=1000', {
      headers: { ...ledger.headers, 'project-id': `source_id:${String(project.source_id)}` },
    });
    assert.deepEqual(ids(bySource.body.data), expected);
    const star = await call(sb, 'GET', '/ap-invoices?per_page=1000', { headers: { ...ledger.headers, 'project-id': '*' } });
    assert.deepEqual(ids(star.body.data), ids(invoices));
    const unknown = await call(sb, 'GET', '/ap-invoices', { headers: { ...ledger.headers, 'project-id': '00000000-0000-0000-0000-000000000000' } });
    assert.equal(unknown.status, 404);
    assert.match(String(unknown.body.message), /Project .* not found/);
    // Account-level resources without a project_id field ignore it.
    const plain = await call(sb, 'GET', '/customers?per_page=1000', { headers: ledger.headers });
    const withHeader = await call(sb, 'GET', '/customers?per_page=1000', { headers: { ...ledger.headers, 'project-id': String(projects[0]!.id) } });
    assert.deepEqual(ids(withHeader.body.data), ids(plain.body.data));
  });
});

describe('resource parameters', () => {
  test('activities ?type= and drawings ?discipline= are equalities; parameters outside the table are ignored', async () => {
    const activities = await all(sb, '/activities', crm.headers, 1000);
    const type = String(activities[0]!.type);
    const typed = await all(sb, `/activities?type=${encodeURIComponent(type)}`, crm.headers, 1000);
    assert.deepEqual(ids(typed), ids(activities.filter((a) => a.type === type)));
    assert.ok(typed.length < activities.length);
    assert.deepEqual(await all(sb, '/activities?type=nothing-is-this', crm.headers, 1000), []);
    const projects = (await call(sb, 'GET', '/projects', { headers: build.headers })).body.data;
    const headers = { ...build.headers, 'project-id': String(projects[0]!.id) };
    const drawings = await all(sb, '/drawings', headers, 1000);
    const discipline = String(drawings[0]!.discipline);
    assert.deepEqual(
      ids(await all(sb, `/drawings?discipline=${encodeURIComponent(discipline)}`, headers, 1000)),
      ids(drawings.filter((d) => d.discipline === discipline)),
    );
    // Not an equality of customers, nor a parameter the sandbox knows: the whole list, as before.
    assert.deepEqual(ids(await all(sb, '/customers?type=company&foo=bar', ledger.headers, 1000)), ids(customers));
  });
});

describe('lists under a parent', () => {
  test("a folder's files and an invoice's line items take filters and order_by too", async () => {
    const projects = (await call(sb, 'GET', '/projects', { headers: build.headers })).body.data;
    const headers = { ...build.headers, 'project-id': String(projects[0]!.id) };
    const root = (await call(sb, 'GET', '/root-folder', { headers })).body;
    const files = await all(sb, `/folders/${String(root.id)}/files`, headers, 1000);
    assert.ok(files.length > 2);
    const name = String(files[1]!.name);
    const after = await all(
      sb,
      `/folders/${String(root.id)}/files?filters=${q([{ field: 'name', operator: '>=', value: name }])}&order_by=${q([{ field: 'name', dir: 'DESC' }])}`,
      headers,
      1000,
    );
    assert.deepEqual(
      after.map((f) => String(f.name)),
      files
        .map((f) => String(f.name))
        .filter((n) => n >= name)
        .sort()
        .reverse(),
    );
    const invoice = (await call(sb, 'GET', '/ap-invoices?per_page=1', { headers: ledger.headers })).body.data[0]!;
    const lines = await all(sb, `/ap-invoices/${String(invoice.id)}/line-items`, ledger.headers, 1000);
    const expense = await all(
      sb,
      `/ap-invoices/${String(invoice.id)}/line-items?filters[]=${q({ field: 'type', operator: '=', value: 'expense' })}`,
      ledger.headers,
      1000,
    );
    assert.deepEqual(ids(expense), ids(lines.filter((l) => l.type === 'expense')));
  });
});

describe('bad input: a 400 that says what to fix', () => {
  const bad = async (path: string, body?: string, contentType?: string, headers = ledger.headers) => {
    const r = body === undefined ? await call(sb, 'GET', path, { headers }) : await getWithBody(path, headers, body, contentType);
    assert.equal(r.status, 400, `${path} ${body ?? ''}: ${r.text}`);
    return String(r.body.message);
  };
  const f = { field: 'status', operator: '=', value: 'x' };

  test('malformed forms', async () => {
    assert.match(await bad('/customers?filters=not-json'), /filters must be a JSON array/);
    assert.match(await bad(`/customers?filters=${q(f)}`), /filters must be a JSON array/);
    assert.match(await bad(`/customers?filters[]=${q([f])}`), /filters\[\] #1 must be one JSON object/);
    assert.match(await bad('/customers?filters[]=nope'), /filters\[\] #1/);
    assert.match(await bad(`/customers?order_by=${q({ field: 'name' })}`), /order_by must be a JSON array/);
    assert.match(await bad('/customers', '{"filters": ['), /not valid JSON/);
    assert.match(await bad('/customers', JSON.stringify([f])), /must be a JSON object/);
    assert.match(await bad('/customers', JSON.stringify({ filters: [f], page: 2 })), /unknown key "page"/);
    assert.match(await bad('/customers', JSON.stringify({ filters: f })), /filters must be a JSON array/);
    assert.match(await bad('/customers', JSON.stringify({ filters: [f] }), 'text/plain'), /Content-Type: application\/json/);
  });

  test('bad filters and order keys', async () => {
    const one = (x: unknown) => `/customers?filters=${q([x])}`;
    assert.match(await bad(one({ field: 'nope', operator: '=', value: 'x' })), /customers has no field nope/);
    assert.match(await bad(one({ field: 'source_data', operator: '=', value: 'x' })), /customers has no field source_data/);
    assert.match(await bad(one({ field: 'source_data.a.b', operator: '=', value: 'x' })), /nested/);
    assert.match(await bad(one({ field: 'status', operator: '~', value: 'x' })), /unknown operator "~"/);
    assert.match(await bad(one({ field: 'status', operator: '=', value: 'x', extra: 1 })), /extra/);
    assert.match(await bad(one({ field: 'status', operator: '=' })), /value is required/);
    assert.match(await bad(one({ field: 'status', operator: '=', value: null })), /string, number or boolean/);
    assert.match(await bad(one({ field: 'status', operator: 'IN', value: [] })), /at least one value/);
    assert.match(await bad(one({ field: 'status', operator: 'IN', value: 'x' })), /array of values/);
    assert.match(await bad(one({ field: 'status', operator: 'BETWEEN', value: ['a', 'b', 'c'] })), /exactly two values/);
    assert.match(await bad(one({ field: 'status', operator: 'LIKE', value: 'ab\\' })), /escape character/);
    assert.match(await bad(one({ field: 'source_update_time', operator: '>', value: 'yesterday' })), /ISO 8601/);
    assert.match(await bad(one({ field: 'source_update_time', operator: '>', value: 1700000000 })), /ISO 8601/);
    assert.match(await bad(one({ field: 'source_update_time', operator: 'LIKE', value: '2024%' })), /does not apply/);
    assert.match(await bad(`/customers?order_by=${q([{ field: 'name', dir: 'sideways' }])}`), /dir must be ASC or DESC/);
    assert.match(await bad(`/customers?order_by=${q([{ field: 'nope' }])}`), /customers has no field nope/);
    assert.match(await bad(`/customers?filters=${q(Array.from({ length: 21 }, () => f))}`), /At most 20 filters/);
    assert.match(await bad(`/customers?order_by=${q(Array.from({ length: 6 }, () => ({ field: 'name' })))}`), /At most 5 order_by keys/);
    // Limits count every form together.
    assert.match(
      await bad(`/customers?filters=${q(Array.from({ length: 15 }, () => f))}`, JSON.stringify({ filters: Array.from({ length: 6 }, () => f) })),
      /At most 20 filters/,
    );
  });

  test('a source system that does not filter refuses filters in every form; order_by still works there', async () => {
    assert.match(await bad(`/customers?filters[]=${q(f)}`, undefined, undefined, erp.headers), /not supported by SQL ERP/);
    assert.match(await bad('/customers', JSON.stringify({ filters: [f] }), undefined, erp.headers), /not supported by SQL ERP/);
    const ordered = await call(sb, 'GET', `/customers?per_page=5&order_by=${q([{ field: 'name', dir: 'DESC' }])}`, { headers: erp.headers });
    assert.equal(ordered.status, 200, ordered.text);
    const names = ordered.body.data.map((c) => String(c.name));
    assert.deepEqual(names, [...names].sort().reverse());
  });
});
