// The drop-in read rule, against the sandbox as the oracle: every list form the real service's
// clients send (filters as a JSON array, repeated `filters[]`, a JSON body on the GET; order_by the
// same), every operator class, order_by with ties, DESC and paging, equality parameters and
// Project-Id narrowing answer on the mirror exactly what the sandbox answers, served from the mirror
// (no Warnings header); what the mirror does not evaluate (an unknown parameter, header, body key or
// field, expand, a source system that does not filter) is forwarded (Warnings header, the sandbox saw
// the request) and its answer relayed as the sandbox's bytes.
import assert from 'node:assert/strict';
import { request as httpRequest } from 'node:http';
import { after, before, describe, it } from 'node:test';
import { linkAndSync, sandboxAdmin, startHarness, type Harness } from '../helpers/harness.ts';

type Json = Record<string, unknown>;
interface Answer {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  text: string;
}
interface Call {
  headers?: Record<string, string>;
  /** A JSON body sent on the GET. */
  body?: unknown;
}

/** A GET (with a body when asked: fetch refuses one on a GET, so this is node:http). */
function get(base: string, path: string, headers: Record<string, string>, body?: unknown): Promise<Answer> {
  const payload = body === undefined ? undefined : Buffer.from(typeof body === 'string' ? body : JSON.stringify(body));
  const url = new URL(path, base);
  return new Promise((resolve, reject) => {
    const req = httpRequest(
      url,
      {
        method: 'GET',
        headers: {
          ...headers,
          ...(payload ? { 'content-type': headers['content-type'] ?? 'application/json', 'content-length': String(payload.length) } : {}),
        },
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, text: Buffer.concat(chunks).toString('utf8') }));
        res.on('error', reject);
      },
    );
    req.on('error', reject);
    req.end(payload);
  });
}

const q = (v: unknown) => encodeURIComponent(JSON.stringify(v));
const f = (field: string, operator: string, value: unknown) => ({ field, operator, value });

describe('read parity of the drop-in read rule: forms, operators, order, parameters, narrowing, forwarding', { timeout: 900_000 }, () => {
  let h: Harness;
  const accounts = new Map<string, { token: string; ref: string }>();

  before(async () => {
    h = await startHarness({ sandbox: { size: 24 }, config: { MIRROR_RESOURCES: '*' } });
    // The accounts are independent: their first passes run side by side, so SQL ERP's async
    // requests (a 5 s poll floor each) wait while the others sync instead of after them.
    const slugs = ['crmcloud', 'graphledger', 'buildpro', 'sqlerp'];
    const linked = await Promise.all(slugs.map((slug) => linkAndSync(h, slug, `forms-${slug}`)));
    slugs.forEach((slug, i) => accounts.set(slug, { token: linked[i]!.accountToken, ref: `forms-${slug}` }));
  });

  after(async () => {
    await h?.close();
  });

  async function both(slug: string, path: string, call: Call = {}): Promise<{ upstream: Answer; mirror: Answer }> {
    const token = accounts.get(slug)!.token;
    const headers = { 'account-token': token, ...call.headers };
    const upstream = await get(h.sandbox.url, path, { ...h.upstreamHeaders, ...headers }, call.body);
    const mirror = await get(h.apiUrl, path, { ...h.clientHeaders, ...headers }, call.body);
    return { upstream, mirror };
  }

  /** The sandbox's count of list reads of this account (what a forwarded read adds to). */
  async function upstreamReads(slug: string): Promise<number> {
    const stats = await sandboxAdmin<{ accounts: Record<string, { reference_id: string; by_path: Record<string, number> }> }>(h, 'GET', '/_admin/stats');
    const mine = Object.values(stats.accounts).find((a) => a.reference_id === accounts.get(slug)!.ref);
    return Object.entries(mine?.by_path ?? {})
      .filter(([route]) => route.startsWith('GET /'))
      .reduce((n, [, c]) => n + c, 0);
  }

  /** Served from the mirror, and the same answer as the sandbox's. Returns the data. */
  async function served(slug: string, path: string, call: Call = {}, what = path): Promise<Json[]> {
    const a = await both(slug, path, call);
    assert.equal(a.upstream.status, 200, `${what}: the sandbox answered ${a.upstream.status} ${a.upstream.text.slice(0, 300)}`);
    assert.equal(a.mirror.status, 200, `${what}: the mirror answered ${a.mirror.status} ${a.mirror.text.slice(0, 300)}`);
    assert.equal(a.mirror.headers['svc-warnings'], undefined, `${what}: served from the mirror, not forwarded`);
    assert.equal(a.mirror.headers['content-type'], a.upstream.headers['content-type'], `${what}: content type`);
    // The same JSON value: same records in the same order, same fields, same paging.
    assert.deepEqual(JSON.parse(a.mirror.text), JSON.parse(a.upstream.text), `${what}: same answer`);
    return (JSON.parse(a.upstream.text) as { data: Json[] }).data;
  }

  /** Forwarded: a Warnings header says why, the sandbox saw the request, its answer is relayed as it came. */
  async function forwarded(slug: string, path: string, call: Call, reason: RegExp, what = path): Promise<Answer> {
    const token = accounts.get(slug)!.token;
    const headers = { 'account-token': token, ...call.headers };
    const before = await upstreamReads(slug);
    const mirror = await get(h.apiUrl, path, { ...h.clientHeaders, ...headers }, call.body);
    const seen = (await upstreamReads(slug)) - before;
    const upstream = await get(h.sandbox.url, path, { ...h.upstreamHeaders, ...headers }, call.body);
    const warning = String(mirror.headers['svc-warnings'] ?? '');
    assert.match(warning, /^answered by the upstream: /, `${what}: a forwarded answer says so (${mirror.status} ${mirror.text.slice(0, 200)})`);
    assert.match(warning, reason, `${what}: the reason`);
    assert.ok(seen >= 1, `${what}: the sandbox received the forwarded read`);
    assert.equal(mirror.status, upstream.status, `${what}: status relayed`);
    assert.equal(mirror.text, upstream.text, `${what}: body relayed as it came`);
    return mirror;
  }

  async function all(slug: string, path: string, headers: Record<string, string> = {}): Promise<Json[]> {
    const { upstream } = await both(slug, `${path}${path.includes('?') ? '&' : '?'}per_page=200`, { headers });
    assert.equal(upstream.status, 200, upstream.text);
    return (JSON.parse(upstream.text) as { data: Json[] }).data;
  }

  it('each filter form alone and all three together, on text, numbers, nulls and source data', async () => {
    const customers = await all('graphledger', '/customers', { 'include-source-data': 'true' });
    assert.ok(customers.length >= 10);
    const name = String(customers[4]!.name);
    const balance = customers[3]!.balance as number;
    const raw = (customers[2]!.source_data as { data: Json }).data;
    const rawKey = Object.keys(raw).find((k) => typeof raw[k] === 'string')!;
    // [what, filters, whether they must narrow the list]
    const cases: [string, unknown[], boolean][] = [
      ['text =', [f('name', '=', name)], true],
      ['text != (nulls pass)', [f('tax_code_id', '!=', 'TAX-1')], false],
      ['text <, >= by code point', [f('name', '<', name), f('email', '>=', 'ap@c')], true],
      ['IN and NOT IN (null fails NOT IN)', [f('status', 'IN', ['Active', 'active', 'Inactive']), f('tax_code_id', 'NOT IN', ['TAX-2', 'TAX-3'])], true],
      ['text BETWEEN', [f('name', 'BETWEEN', ['B', 'M'])], true],
      ['numbers', [f('balance', '>', balance), f('balance', 'NOT BETWEEN', [0, 1000])], true],
      ['a number compared as text', [f('balance', '!=', String(balance))], true],
      ['LIKE with % and _', [f('email', 'LIKE', `ap@${String(customers[1]!.email).slice(3, 5)}%.example.co_`)], true],
      ['LIKE escapes', [f('email', 'NOT LIKE', '%\\_%')], false],
      ['ILIKE folds ASCII', [f('name', 'ILIKE', `${name.slice(0, 3).toUpperCase()}%`)], true],
      ['an array field is null (only != passes)', [f('addresses', '!=', 'x')], false],
      ['an array field is null (= fails)', [f('addresses', '=', 'x')], true],
      [
        'time fields as instants',
        [f('source_update_time', '>=', String(customers[5]!.source_update_time)), f('source_create_time', '<', '2999-01-01T00:00:00+01:00')],
        false,
      ],
      ['source_data.<key>', [f(`source_data.${rawKey}`, '=', String(raw[rawKey]))], true],
      ['source_data.<key> whatever Include-Source-Data says', [f(`source_data.${rawKey}`, 'LIKE', '%')], false],
      ['booleans as text', [f('name', 'NOT IN', [true, false])], false],
    ];
    for (const [what, filters, narrows] of cases) {
      const plain = await served('graphledger', `/customers?per_page=50&filters=${q(filters)}`, {}, `${what}: filters=`);
      const listed = await served('graphledger', `/customers?per_page=50&${filters.map((x) => `filters%5B%5D=${q(x)}`).join('&')}`, {}, `${what}: filters[]`);
      const body = await served('graphledger', '/customers?per_page=50', { body: { filters } }, `${what}: body`);
      assert.deepEqual(listed, plain, `${what}: filters[] as filters=`);
      assert.deepEqual(body, plain, `${what}: body as filters=`);
      if (narrows) assert.ok(plain.length < customers.length, `${what}: the filter narrows the list (${plain.length} of ${customers.length})`);
    }
    // Combined: ANDed across the forms.
    const combined = await served('graphledger', `/customers?per_page=50&filters=${q([f('status', '!=', 'nope')])}&filters[]=${q(f('balance', '>', 0))}`, {
      body: { filters: [f('name', '>', 'C')] },
    });
    assert.ok(combined.every((c) => String(c.name) > 'C' && (c.balance as number) > 0));
  });

  it('order_by in each form: classes, ties, DESC, several keys, paging after ordering', async () => {
    const [first] = await all('graphledger', '/customers', { 'include-source-data': 'true' });
    const raw = (first!.source_data as { data: Json }).data;
    const rawKeys = Object.keys(raw);
    const orders: [string, unknown[]][] = [
      ['text ASC', [{ field: 'name' }]],
      ['text desc, case-insensitive', [{ field: 'name', dir: 'desc' }]],
      ['ties go to the next key', [{ field: 'status' }, { field: 'balance', dir: 'DESC' }]],
      ['ties go to the list order', [{ field: 'type' }]],
      ['nulls last in both directions', [{ field: 'tax_code_id', dir: 'DESC' }, { field: 'parent_id' }]],
      ['arrays with nulls', [{ field: 'addresses' }, { field: 'name' }]],
      ['time', [{ field: 'source_update_time', dir: 'DESC' }]],
      ['source data', [{ field: `source_data.${rawKeys[1]!}` }, { field: `source_data.${rawKeys[0]!}`, dir: 'DESC' }, { field: 'id' }]],
      ['a source data key no record has', [{ field: 'source_data.NoSuchKey' }]],
    ];
    for (const [what, order] of orders) {
      const whole = await served('graphledger', `/customers?per_page=100&order_by=${q(order)}`, {}, `${what}: order_by=`);
      await served('graphledger', `/customers?per_page=100&${order.map((o) => `order_by[]=${q(o)}`).join('&')}`, {}, `${what}: order_by[]`);
      await served('graphledger', '/customers?per_page=100', { body: { order_by: order } }, `${what}: body`);
      const page2 = await served('graphledger', `/customers?per_page=5&page=2&order_by=${q(order)}`, {}, `${what}: page 2`);
      assert.deepEqual(page2, whole.slice(5, 10), `${what}: paging applies after ordering`);
    }
    // Numbers numerically (probability), with filters and order from every form at once.
    const opp = await served(
      'crmcloud',
      `/opportunities?per_page=100&order_by=${q([{ field: 'probability', dir: 'DESC' }])}&order_by[]=${q({ field: 'amount' })}`,
      { body: { filters: [f('probability', '>=', 10)] } },
    );
    for (let i = 1; i < opp.length; i++) assert.ok((opp[i - 1]!.probability as number) >= (opp[i]!.probability as number), 'numerically, descending');
  });

  it('equality parameters (activities type) are evaluated; the mirror serves them', async () => {
    const activities = await all('crmcloud', '/activities');
    const type = String(activities[0]!.type);
    const typed = await served('crmcloud', `/activities?per_page=100&type=${encodeURIComponent(type)}`);
    assert.ok(typed.length > 0 && typed.length < activities.length, `type=${type} narrows (${typed.length} of ${activities.length})`);
    assert.ok(typed.every((a) => a.type === type));
    await served('crmcloud', `/activities?per_page=100&type=${encodeURIComponent(type)}&type=nothing`);
    await served('crmcloud', `/activities?per_page=100&type=${encodeURIComponent(type)}&order_by[]=${q({ field: 'start_time', dir: 'DESC' })}`);
  });

  it('Project-Id narrows an account-level list whose records carry project_id', async () => {
    const projects = await all('graphledger', '/projects');
    const invoices = await all('graphledger', '/ap-invoices');
    const withProject = projects.find((p) => invoices.some((i) => i.project_id === p.id))!;
    assert.ok(withProject, 'some invoice names a project');
    const narrowed = await served('graphledger', '/ap-invoices?per_page=100', { headers: { 'project-id': String(withProject.id) } });
    assert.ok(narrowed.length > 0 && narrowed.length < invoices.length && narrowed.every((i) => i.project_id === withProject.id));
    await served('graphledger', '/ap-invoices?per_page=100', { headers: { 'project-id': `source_id:${String(withProject.source_id)}` } }, 'by source id');
    await served('graphledger', '/ap-invoices?per_page=100', { headers: { 'project-id': '*' } }, 'every project');
    const missing = await both('graphledger', '/ap-invoices', { headers: { 'project-id': '00000000-0000-4000-8000-00000000abcd' } });
    assert.equal(missing.upstream.status, 404);
    assert.equal(missing.mirror.status, 404, missing.mirror.text);
  });

  it('paging as the source system serves it: its default page size and its largest', async () => {
    await served('crmcloud', '/customers', {}, "no per_page: the source system's default");
    await served('crmcloud', '/customers?per_page=1000&page=1', {}, 'per_page above its largest');
  });

  it('what the mirror does not evaluate is forwarded as it came, and the answer relayed', async () => {
    await forwarded('crmcloud', '/customers?per_page=5&shoe_size=9', {}, /parameter "shoe_size" is not evaluated/);
    await forwarded('crmcloud', '/customers?per_page=5&expand=contacts', {}, /"expand"/);
    await forwarded('crmcloud', '/customers/source_id:nothing?fields=name', {}, /parameter "fields"/);
    await forwarded('crmcloud', '/customers?per_page=5', { headers: { 'return-source-id': 'true' } }, /header Return-Source-Id/);
    await forwarded('crmcloud', '/customers?per_page=5', { body: { filters: [f('name', '>', 'C')], limit: 5 } }, /body key "limit"/);
    await forwarded('crmcloud', `/customers?per_page=5&filters=${q([f('source_data.a.b', '=', 1)])}`, {}, /nested source_data key/);
    await forwarded('graphledger', `/ap-invoices?per_page=5&filters[]=${q(f('line_items', '!=', 'x'))}`, {}, /field "line_items"/);
    // A collection of the upstream under an object route of the mirror, not a vendor named "compliances":
    // the catalog's all-vendor-compliances, which BuildPro does not serve.
    await forwarded('buildpro', '/vendors/compliances', {}, /BuildPro does not serve all-vendor-compliances/);
    // A resource whose records carry no project_id: the real service may narrow it through links.
    await served('buildpro', '/vendors?per_page=5', { headers: { 'project-id': '*' } }, 'Project-Id: * narrows nothing');
    const projects = await all('buildpro', '/projects');
    await forwarded(
      'buildpro',
      '/vendors?per_page=5',
      { headers: { 'project-id': String(projects[0]!.id) } },
      /header Project-Id is not evaluated by the mirror on vendors/,
    );
    // A source system that filters nothing on this resource: the upstream's refusal is relayed.
    const refused = await forwarded('sqlerp', `/customers?filters=${q([f('name', '=', 'x')])}`, {}, /does not filter customers/);
    assert.equal(refused.status, 400);
    await forwarded('sqlerp', '/customers', { body: { filters: [f('name', '=', 'x')] } }, /does not filter customers/);
  });

  /**
   * The same answer as the sandbox's, served or forwarded: a 200 with the same JSON, or the same 4xx
   * saying what to fix. Returns the answer's data (undefined for a 4xx).
   */
  async function answeredAlike(slug: string, path: string, what: string): Promise<Json[] | undefined> {
    const a = await both(slug, path);
    assert.ok(a.upstream.status === 200 || (a.upstream.status >= 400 && a.upstream.status < 500), `${what}: the sandbox answered ${a.upstream.status}`);
    assert.equal(
      a.mirror.status,
      a.upstream.status,
      `${what}: the mirror answered ${a.mirror.status} ${a.mirror.text.slice(0, 300)}, the sandbox ${a.upstream.text.slice(0, 200)}`,
    );
    if (a.upstream.status !== 200) {
      assert.ok((JSON.parse(a.mirror.text) as { message: string }).message.length > 10, `${what}: says what to fix`);
      return undefined;
    }
    assert.deepEqual(JSON.parse(a.mirror.text), JSON.parse(a.upstream.text), `${what}: same answer`);
    return (JSON.parse(a.upstream.text) as { data: Json[] }).data;
  }

  /** Every operator with `value` (alone, in an array, at either end of a range), as filter JSON texts: values are JSON texts too. */
  const everyOperator = (field: string, value: string, low: string, high: string): [string, string][] => {
    const one = (op: string, v: string): string => `[{"field":${JSON.stringify(field)},"operator":"${op}","value":${v}}]`;
    return [
      ...['=', '!=', '<', '<=', '>', '>=', 'LIKE', 'NOT ILIKE'].map((op): [string, string] => [op, one(op, value)]),
      ['IN', one('IN', `[${value}]`)],
      ['NOT IN', one('NOT IN', `[${value}]`)],
      ['BETWEEN low', one('BETWEEN', `[${low},${value}]`)],
      ['BETWEEN high', one('BETWEEN', `[${value},${high}]`)],
      ['NOT BETWEEN', one('NOT BETWEEN', `[${low},${value}]`)],
    ];
  };

  it('boundary values of every operator and field type: lists and aggregates answer as the sandbox', async () => {
    const customers = await all('graphledger', '/customers');
    assert.ok(customers.length > 0);
    const j = (v: unknown) => JSON.stringify(v);
    // Times at the ends of the calendar (24:00, offsets, seven fractional digits), at the epoch, and
    // malformed ones (the sandbox's 400s).
    const times = [
      '9999-12-31T24:00:00Z',
      '9999-12-31T24:00:00+23:59',
      '9999-12-31T23:59:59-23:59',
      '9999-12-31T23:59:59.9999999Z',
      '9999-12-31T23:59:59.9999999-23:59',
      '9999-12-31T24:00:00.0000000-23:59',
      '9999-12-31',
      '0001-01-01T00:00:00Z',
      '0001-01-01T00:00:00.0000001Z',
      '0001-01-01T00:00:00+00:01',
      '0001-01-01T00:00:00-23:59',
      '0000-01-01T00:00:00Z',
      '1970-01-01T00:00:00.0000000Z',
      '9999-12-31T24:00:01Z',
      '10000-01-01T00:00:00Z',
      '2023-02-29T00:00:00Z',
      '',
    ].map(j);
    // Numbers as the caller writes them (JSON text): a double's extremes, past its range, past 2^53.
    const numbers = [
      '0',
      '-0',
      '1.7976931348623157e308',
      '-1.7976931348623157e308',
      '5e-324',
      '-5e-324',
      '9007199254740993',
      '1e-7',
      '1e400',
      '-1e400',
      '""',
      '" "',
      '"1e400"',
      'true',
    ];
    const texts = ['', ' ', '\u00ff', '\uffff', '\ud83d\ude00', "'", '%', '_', '\\', 'z'.repeat(2000), 'A'].map(j);
    const cases: [string, string][] = [
      ...['source_update_time', 'source_create_time'].flatMap((field) =>
        times.flatMap((t) =>
          everyOperator(field, t, j('0001-01-01T00:00:00Z'), j('9999-12-31T24:00:00Z')).map(([op, x]): [string, string] => [`${field} ${op} ${t}`, x]),
        ),
      ),
      ...numbers.flatMap((n) => everyOperator('balance', n, '-1e308', '1e308').map(([op, x]): [string, string] => [`balance ${op} ${n}`, x])),
      ...['name', 'source_data.Name'].flatMap((field) =>
        texts.flatMap((t) => everyOperator(field, t, '""', j('\uffff')).map(([op, x]): [string, string] => [`${field} ${op} ${t.slice(0, 20)}`, x])),
      ),
    ];
    // The case of the report, on projects (BuildPro) as on customers.
    const onProjects = times
      .slice(0, 6)
      .flatMap((t) => everyOperator('source_update_time', t, j('0001-01-01T00:00:00Z'), j('9999-12-31T24:00:00Z')).slice(0, 6));
    const reads: [string, string, string][] = [
      ...cases.map(([what, filters]): [string, string, string] => ['graphledger', 'customers', `${what}|${filters}`]),
      ...onProjects.map(([what, filters]): [string, string, string] => ['buildpro', 'projects', `projects ${what}|${filters}`]),
    ];
    // Every case is tried and every difference reported at once.
    const differences: string[] = [];
    for (const [slug, resource, item] of reads) {
      const [what, filters] = item.split('|') as [string, string];
      const check = async (): Promise<void> => {
        const data = await answeredAlike(slug, `/${resource}?per_page=1000&filters=${encodeURIComponent(filters)}`, what);
        const agg = await get(h.apiUrl, `/mirror/aggregates/${resource}?count&filters=${encodeURIComponent(filters)}`, {
          ...h.clientHeaders,
          'account-token': accounts.get(slug)!.token,
        });
        if (data === undefined) {
          assert.equal(agg.status, 400, `${what}: aggregates refuse what the list refuses (${agg.status} ${agg.text.slice(0, 200)})`);
          return;
        }
        // A time before year 1 is not evaluated by the mirror (the list is forwarded): aggregates say so.
        if (agg.status === 400 && /before year 1/.test(agg.text)) return;
        assert.equal(agg.status, 200, `${what}: aggregates answered ${agg.status} ${agg.text.slice(0, 300)}`);
        assert.equal((JSON.parse(agg.text) as { data: { count: number }[] }).data[0]!.count, data.length, `${what}: aggregates count what the list holds`);
      };
      await check().catch((error: unknown) => differences.push(`${resource} ${filters}: ${(error as Error).message.split('\n')[0]!.slice(0, 400)}`));
    }
    assert.deepEqual(differences, [], `${differences.length} of ${reads.length} boundary reads differ:\n${differences.join('\n')}`);
  });

  it('malformed forms are 400s on both sides, saying what to fix', async () => {
    for (const [what, path, call] of [
      ['filters not JSON', '/customers?filters=%5B', {}],
      ['filters[] not an object', `/customers?filters[]=${q([f('name', '=', 'a')])}`, {}],
      ['unknown operator', `/customers?filters=${q([f('name', '~', 'a')])}`, {}],
      ['IN without an array', `/customers?filters=${q([f('name', 'IN', 'a')])}`, {}],
      ['a time that is not ISO 8601', `/customers?filters=${q([f('source_update_time', '>', 'yesterday')])}`, {}],
      ['a body that is not an object', '/customers', { body: '[1]' }],
      ['a body that is not JSON', '/customers', { body: '{"filters": [' }],
      ['dir not ASC/DESC', `/customers?order_by=${q([{ field: 'name', dir: 'UP' }])}`, {}],
      ['21 filters', '/customers', { body: { filters: Array.from({ length: 21 }, () => f('name', '!=', 'a')) } }],
    ] as [string, string, Call][]) {
      const a = await both('crmcloud', path, call);
      assert.equal(a.upstream.status, 400, `${what}: sandbox ${a.upstream.text.slice(0, 200)}`);
      assert.equal(a.mirror.status, 400, `${what}: mirror ${a.mirror.text.slice(0, 200)}`);
      assert.ok((JSON.parse(a.mirror.text) as { message: string }).message.length > 10, `${what}: says what to fix`);
    }
  });
});
