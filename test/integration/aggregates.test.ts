// `/mirror/aggregates/:resource` against a direct SQL computation over the same records: several
// functions, grouped (by a unified field and a source_data key), filtered in each of the list reads'
// forms, with deleted records and a second account's records present (theirs never count), Project-Id
// narrowing and a child resource; and every kind of bad input answered 400 naming what to fix.
import assert from 'node:assert/strict';
import { request as httpRequest } from 'node:http';
import { after, before, describe, it } from 'node:test';
import { linkAndSync, startHarness, type Harness } from '../helpers/harness.ts';

interface Entry {
  group?: unknown;
  count?: number;
  sum?: Record<string, number | null>;
  avg?: Record<string, number | null>;
  min?: Record<string, number | string | null>;
  max?: Record<string, number | string | null>;
}
interface Answer {
  data: Entry[];
  meta: { group_by: string | null; has_more_results: boolean };
}
interface Expected {
  g: unknown;
  n: number;
  sum: string | null;
  avg: string | null;
  min: string | null;
  max: string | null;
}

/** A GET through node:http (fetch refuses a body on a GET). */
function get(url: string, headers: Record<string, string>, body?: string): Promise<{ status: number; text: string }> {
  const payload = body === undefined ? undefined : Buffer.from(body);
  return new Promise((resolve, reject) => {
    const req = httpRequest(
      new URL(url),
      { method: 'GET', headers: { ...headers, ...(payload ? { 'content-length': String(payload.length) } : {}) } },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, text: Buffer.concat(chunks).toString('utf8') }));
        res.on('error', reject);
      },
    );
    req.on('error', reject);
    req.end(payload);
  });
}

/** The numeric value of a field as the test reads it, written apart from the mirror's SQL. */
const num = (x: string) =>
  `(CASE WHEN jsonb_typeof(${x}) = 'number' THEN (${x} #>> '{}')::numeric WHEN jsonb_typeof(${x}) = 'string' AND (${x} #>> '{}') ~ '^-?[0-9]+(\\.[0-9]+)?$' THEN (${x} #>> '{}')::numeric END)`;

const close = (a: number | null | undefined, b: string | null, what: string) => {
  if (b === null) return assert.equal(a, null, what);
  assert.equal(typeof a, 'number', what);
  assert.ok(Math.abs(a! - Number(b)) <= 1e-9 * Math.max(1, Math.abs(Number(b))), `${what}: ${a} vs ${b}`);
};

describe('aggregates over the mirror', { timeout: 300_000 }, () => {
  let h: Harness;
  let a: { accountId: string; accountToken: string };
  let b: { accountId: string; accountToken: string };
  let sourceKey: string;

  before(async () => {
    h = await startHarness({ sandbox: { size: 6, sizes: { customers: 60, 'ap-invoices': 30 } } });
    a = await linkAndSync(h, 'graphledger', 'agg-a');
    b = await linkAndSync(h, 'graphledger', 'agg-b');
    const q = (sql: string, params: unknown[]) => h.services.pool.query(sql, params);
    const ids = (await q(`SELECT id FROM records WHERE account_id = $1 AND resource = 'customers' ORDER BY ordinal`, [a.accountId])).rows.map(
      (r) => (r as { id: string }).id,
    );
    assert.ok(ids.length >= 40, `account A has ${ids.length} customers`);
    const set = (sql: string, some: string[]) =>
      q(`UPDATE records SET ${sql} WHERE account_id = $1 AND resource = 'customers' AND id = ANY($2::text[])`, [a.accountId, some]);
    // Amounts as strings (counted), text that is no number (left out), a null, a missing status, deleted records.
    await set(`data = jsonb_set(data, '{balance}', '"1234.50"')`, ids.slice(0, 3));
    await set(`data = jsonb_set(data, '{balance}', '"n/a"')`, ids.slice(3, 5));
    await set(`data = jsonb_set(data, '{balance}', 'null')`, ids.slice(5, 6));
    await set(`data = data - 'status'`, ids.slice(6, 8));
    await set(`deleted_at = now()`, ids.slice(8, 13));
    // Another account's balances, huge: any of them counted shows.
    await q(`UPDATE records SET data = jsonb_set(data, '{balance}', '1000000000') WHERE account_id = $1 AND resource = 'customers'`, [b.accountId]);
    // A key of the source object whose value is text, for a group by source_data.<key>.
    const raw = await q(
      `SELECT k FROM records r, jsonb_each(CASE WHEN r.source_data ? 'data' THEN r.source_data->'data' ELSE r.source_data END) e(k, v)
        WHERE r.account_id = $1 AND r.resource = 'customers' AND jsonb_typeof(e.v) = 'string' AND k NOT ILIKE '%id%' GROUP BY k ORDER BY count(DISTINCT v) ASC, k LIMIT 1`,
      [a.accountId],
    );
    sourceKey = (raw.rows[0] as { k: string }).k;
  });

  after(async () => {
    await h?.close();
  });

  const headers = (token: string, extra: Record<string, string> = {}) => ({ ...h.clientHeaders, 'account-token': token, ...extra });
  async function ask(path: string, token = a.accountToken, init: { headers?: Record<string, string>; body?: string } = {}): Promise<Answer> {
    const { status, text } = await get(`${h.apiUrl}${path}`, headers(token, init.headers), init.body);
    assert.equal(status, 200, `${path}: ${text}`);
    return JSON.parse(text) as Answer;
  }

  /** The same aggregates computed directly: by group `g` (SQL), over `where` (SQL on `records`). */
  async function expected(
    account: string,
    resource: string,
    group: string,
    field: string,
    where = 'deleted_at IS NULL',
    params: unknown[] = [],
  ): Promise<Map<string, Expected>> {
    const { rows } = await h.services.pool.query<Expected>(
      `SELECT g, count(*)::int AS n, sum(x)::text AS sum, avg(x)::text AS avg, min(x)::text AS min, max(x)::text AS max
         FROM (SELECT ${group} AS g, ${num(`data->'${field}'`)} AS x FROM records WHERE account_id = $1 AND resource = $2 AND ${where}) t
        GROUP BY g`,
      [account, resource, ...params],
    );
    return new Map(rows.map((r) => [JSON.stringify(r.g ?? null), r]));
  }

  function assertSame(answer: Answer, want: Map<string, Expected>, field: string, what: string): void {
    assert.ok(want.size > 0, `${what}: the direct computation has records to compare with`);
    assert.equal(answer.data.length, want.size, `${what}: groups`);
    for (const e of answer.data) {
      const w = want.get(JSON.stringify(e.group ?? null));
      assert.ok(w, `${what}: group ${JSON.stringify(e.group)} is in the direct computation`);
      assert.equal(e.count, w.n, `${what}: count of ${JSON.stringify(e.group)}`);
      close(e.sum?.[field], w.sum, `${what}: sum of ${JSON.stringify(e.group)}`);
      close(e.avg?.[field], w.avg, `${what}: avg of ${JSON.stringify(e.group)}`);
      close(e.min?.[field] as number | null, w.min, `${what}: min of ${JSON.stringify(e.group)}`);
      close(e.max?.[field] as number | null, w.max, `${what}: max of ${JSON.stringify(e.group)}`);
    }
  }

  const all = 'count&sum=balance&avg=balance&min=balance&max=balance';
  const byStatus = `NULLIF(data->'status', 'null'::jsonb)`;

  it('grouped by a field: count, sum, avg, min, max equal SQL; deleted records and another account left out', async () => {
    const answer = await ask(`/mirror/aggregates/customers?${all}&group_by=status`);
    assert.equal(answer.meta.group_by, 'status');
    assert.equal(answer.meta.has_more_results, false);
    assertSame(answer, await expected(a.accountId, 'customers', byStatus, 'balance'), 'balance', 'live, by status');
    assert.ok(
      answer.data.some((e) => e.group === null),
      'records without a status are the group null',
    );
    // The strings "1234.50" counted, "n/a" and null not: the total is below any of B's balances.
    const total = answer.data.reduce((s, e) => s + (e.sum?.balance ?? 0), 0);
    assert.ok(total < 1e9, `no balance of another account counted (${total})`);

    const withDeleted = await ask(`/mirror/aggregates/customers?${all}&group_by=status&include_deleted=true`);
    assertSame(withDeleted, await expected(a.accountId, 'customers', byStatus, 'balance', 'true'), 'balance', 'include_deleted');
    const counted = (x: Answer) => x.data.reduce((s, e) => s + e.count!, 0);
    assert.equal(counted(withDeleted), counted(answer) + 5);

    // The other account sees its own, and only its own.
    const theirs = await ask(`/mirror/aggregates/customers?${all}&group_by=status`, b.accountToken);
    assertSame(theirs, await expected(b.accountId, 'customers', byStatus, 'balance'), 'balance', 'account B');
  });

  it('not grouped: one entry; count only when asked (or when nothing else is); min/max of a time field', async () => {
    const sums = await ask('/mirror/aggregates/customers?sum=balance');
    assert.equal(sums.data.length, 1);
    assert.deepEqual(Object.keys(sums.data[0]!).sort(), ['sum']);
    const want = [...(await expected(a.accountId, 'customers', `'all'::text`, 'balance')).values()][0]!;
    close(sums.data[0]!.sum!.balance, want.sum, 'sum');
    const counted = await ask('/mirror/aggregates/customers');
    assert.deepEqual(counted.data, [{ count: want.n }]);

    const times = await ask('/mirror/aggregates/customers?min=source_update_time&max=source_update_time');
    const { rows } = await h.services.pool.query<{ lo: Date; hi: Date }>(
      `SELECT min(source_update_time) AS lo, max(source_update_time) AS hi FROM records WHERE account_id = $1 AND resource = 'customers' AND deleted_at IS NULL`,
      [a.accountId],
    );
    assert.equal(times.data[0]!.min!.source_update_time, rows[0]!.lo.toISOString());
    assert.equal(times.data[0]!.max!.source_update_time, rows[0]!.hi.toISOString());
  });

  it('filters in each of the list forms, and a group by a source_data key', async () => {
    const company = encodeURIComponent(JSON.stringify([{ field: 'type', operator: '=', value: 'company' }]));
    const byArray = await ask(`/mirror/aggregates/customers?${all}&group_by=status&filters=${company}`);
    assertSame(
      byArray,
      await expected(a.accountId, 'customers', byStatus, 'balance', `deleted_at IS NULL AND data->>'type' = 'company'`),
      'balance',
      'filters=',
    );

    const big = encodeURIComponent(JSON.stringify({ field: 'balance', operator: '>=', value: 100_000 }));
    const byItems = await ask(`/mirror/aggregates/customers?${all}&group_by=status&filters[]=${big}`);
    const bigSql = `deleted_at IS NULL AND jsonb_typeof(data->'balance') = 'number' AND (data->>'balance')::numeric >= 100000`;
    assertSame(byItems, await expected(a.accountId, 'customers', byStatus, 'balance', bigSql), 'balance', 'filters[]=');

    const body = JSON.stringify({
      filters: [
        { field: 'type', operator: '=', value: 'company' },
        { field: 'balance', operator: '>=', value: 100_000 },
      ],
    });
    const byBody = await ask(`/mirror/aggregates/customers?${all}&group_by=status`, a.accountToken, { headers: { 'content-type': 'application/json' }, body });
    assertSame(byBody, await expected(a.accountId, 'customers', byStatus, 'balance', `${bigSql} AND data->>'type' = 'company'`), 'balance', 'GET body');

    const raw = `(CASE WHEN source_data ? 'data' THEN source_data->'data' ELSE source_data END)`;
    const bySource = await ask(`/mirror/aggregates/customers?${all}&group_by=source_data.${encodeURIComponent(sourceKey)}&limit=1000`);
    assert.equal(bySource.meta.group_by, `source_data.${sourceKey}`);
    assertSame(
      bySource,
      await expected(a.accountId, 'customers', `NULLIF(${raw}->$3::text, 'null'::jsonb)`, 'balance', 'deleted_at IS NULL', [sourceKey]),
      'balance',
      `by source_data.${sourceKey}`,
    );

    const two = await ask(`/mirror/aggregates/customers?count&group_by=status&limit=2`);
    assert.equal(two.data.length, 2);
    assert.equal(two.meta.has_more_results, true);
  });

  it("Project-Id narrows by project_id; a child resource counts every parent's children", async () => {
    const { rows } = await h.services.pool.query<{ p: string }>(
      `SELECT data->>'project_id' AS p FROM records WHERE account_id = $1 AND resource = 'ap-invoices' AND deleted_at IS NULL AND data->>'project_id' IS NOT NULL GROUP BY 1 ORDER BY count(*) DESC LIMIT 1`,
      [a.accountId],
    );
    assert.ok(rows[0], 'an AP invoice of a project');
    const project = rows[0].p;
    const narrowed = await ask(
      '/mirror/aggregates/ap-invoices?count&sum=total_amount&avg=total_amount&min=total_amount&max=total_amount&group_by=status',
      a.accountToken,
      { headers: { 'project-id': project } },
    );
    assertSame(
      narrowed,
      await expected(a.accountId, 'ap-invoices', byStatus, 'total_amount', `deleted_at IS NULL AND data->>'project_id' = $3`, [project]),
      'total_amount',
      'Project-Id',
    );
    const every = await ask('/mirror/aggregates/ap-invoices?count', a.accountToken, { headers: { 'project-id': '*' } });
    assert.equal(every.data[0]!.count, [...(await expected(a.accountId, 'ap-invoices', `'all'::text`, 'total_amount')).values()][0]!.n);

    const lines = await ask('/mirror/aggregates/ap-invoice-line-items?count&sum=amount&avg=amount&min=amount&max=amount&group_by=status');
    assertSame(lines, await expected(a.accountId, 'ap-invoice-line-items', byStatus, 'amount'), 'amount', 'line items of every invoice');
  });

  it('bad input: a 400 that names the parameter, field, operator or aggregate to fix', async () => {
    const cases: [string, RegExp, Record<string, string>?, string?][] = [
      ['/mirror/aggregates/customers?sum=balance&colour=red', /unknown parameter "colour"/],
      ['/mirror/aggregates/customers?sum=nosuch', /sum: "nosuch" is not a field of customers/],
      ['/mirror/aggregates/customers?avg=source_update_time', /avg: source_update_time is a time/],
      ['/mirror/aggregates/customers?sum=', /sum takes field names/],
      ['/mirror/aggregates/customers?group_by=status&group_by=type', /group_by is given once/],
      ['/mirror/aggregates/customers?group_by=source_data.a.b', /group_by: "source_data.a.b" is a nested source_data key/],
      ['/mirror/aggregates/customers?count=maybe', /count is a flag/],
      ['/mirror/aggregates/customers?limit=0', /limit/],
      ['/mirror/aggregates/customers?include_deleted=yes', /include_deleted is true or false/],
      ['/mirror/aggregates/customers?modified_after=yesterday', /modified_after is an ISO 8601 timestamp/],
      [
        `/mirror/aggregates/customers?filters=${encodeURIComponent('[{"field":"status","operator":"~","value":"x"}]')}`,
        /filters\.0\.operator: operator must be one of/,
      ],
      [
        `/mirror/aggregates/customers?filters=${encodeURIComponent('[{"field":"colour","operator":"=","value":"x"}]')}`,
        /field "colour" of customers is not one aggregates evaluate/,
      ],
      [`/mirror/aggregates/customers?filters=${encodeURIComponent('{not json')}`, /filters must be a JSON array/],
      [
        `/mirror/aggregates/customers?filters[]=${encodeURIComponent('{"field":"balance","operator":"IN","value":1}')}`,
        /filters\[\]#1\.value: IN takes an array/,
      ],
      [
        '/mirror/aggregates/customers?count',
        /body\.order_by: an aggregates read takes only "filters"/,
        { 'content-type': 'application/json' },
        '{"order_by":[]}',
      ],
      ['/mirror/aggregates/customers?count', /Project-Id does not narrow customers/, { 'project-id': 'p-1' }],
      ['/mirror/aggregates/ap-invoices?count', /Project-Id/, { 'project-id': '../x' }],
      [`/mirror/aggregates/customers?${Array.from({ length: 21 }, (_, i) => `sum=source_data.k${i}`).join('&')}`, /At most 20 aggregated fields/],
    ];
    for (const [path, message, extra, body] of cases) {
      const { status, text } = await get(`${h.apiUrl}${path}`, headers(a.accountToken, extra), body);
      assert.equal(status, 400, `${path}: ${status} ${text}`);
      assert.match((JSON.parse(text) as { message: string }).message, message, path);
    }
    const unknown = await fetch(`${h.apiUrl}/mirror/aggregates/nosuch?count`, { headers: headers(a.accountToken) });
    assert.equal(unknown.status, 404);
    const anonymous = await fetch(`${h.apiUrl}/mirror/aggregates/customers?count`, { headers: h.clientHeaders });
    assert.equal(anonymous.status, 401);
  });

  it('is in the OpenAPI document', async () => {
    const doc = (await (await fetch(`${h.apiUrl}/openapi.json`)).json()) as { paths: Record<string, { get?: { parameters?: { name: string }[] } }> };
    const op = doc.paths['/mirror/aggregates/{resource}']?.get;
    assert.ok(op, 'documented');
    const names = (op.parameters ?? []).map((p) => p.name);
    for (const n of ['count', 'sum', 'avg', 'min', 'max', 'group_by', 'filters', 'include_deleted']) assert.ok(names.includes(n), n);
  });
});
