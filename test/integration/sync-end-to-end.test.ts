// The walking skeleton end to end: sandbox upstream -> connector -> activities -> Temporal workflows
// -> Postgres -> read API, on the real Temporal dev server and the real Postgres. The mirror must
// hold exactly what the sandbox serves, under composite keys, and serve it back in the same shape.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { startHarness, upstreamAll, type Harness } from '../helpers/harness.ts';

describe('full sync end to end', { timeout: 240_000 }, () => {
  let h: Harness;
  let construction: { accountId: string; accountToken: string };
  let erp: { accountId: string; accountToken: string };

  before(async () => {
    h = await startHarness({ sandbox: { size: 25 } });
    construction = await h.link('buildpro');
    erp = await h.link('sqlerp');
    const runs = await Promise.all([construction, erp].map((a) => h.sync.start({ accountId: a.accountId, mode: 'full' })));
    const results = await Promise.all(runs.map((r) => r.result()));
    for (const r of results) assert.deepEqual(r.failed, [], `no stream failed: ${JSON.stringify(r.failed)}`);
  });
  after(async () => {
    await h?.close();
  });

  async function mirrored(accountId: string, resource: string, scope: string) {
    const { rows } = await h.services.pool.query<{ data: Record<string, unknown>; source_data: unknown }>(
      `SELECT data, source_data FROM records WHERE account_id = $1 AND resource = $2 AND scope = $3 AND deleted_at IS NULL ORDER BY ordinal`,
      [accountId, resource, scope],
    );
    return rows.map((r) => (r.source_data === null ? r.data : { ...r.data, source_data: r.source_data }));
  }

  it('mirrors every project exactly as the upstream serves it', async () => {
    const upstream = await upstreamAll(h, '/projects', { 'account-token': construction.accountToken, 'include-source-data': 'true' });
    assert.ok(upstream.length > 0);
    assert.deepEqual(await mirrored(construction.accountId, 'projects', ''), upstream);
  });

  it('mirrors project-scoped resources per project, with ids that collide across projects kept apart', async () => {
    const projects = await upstreamAll(h, '/projects', { 'account-token': construction.accountToken });
    let total = 0;
    const seen = new Map<string, number>();
    for (const p of projects) {
      const pid = String(p.id);
      const upstream = await upstreamAll(h, '/cost-codes', { 'account-token': construction.accountToken, 'project-id': pid, 'include-source-data': 'true' });
      assert.deepEqual(await mirrored(construction.accountId, 'cost-codes', `project=${pid}`), upstream, `cost codes of ${pid}`);
      total += upstream.length;
      for (const c of upstream) seen.set(String(c.id), (seen.get(String(c.id)) ?? 0) + 1);
    }
    assert.ok(total > 0);
    assert.ok(
      [...seen.values()].some((n) => n > 1),
      'the sandbox serves ids that repeat across projects',
    );
  });

  it('pages a source system that answers has_more_results: null to the end', async () => {
    const upstream = await upstreamAll(h, '/customers', { 'account-token': erp.accountToken, 'include-source-data': 'true' }, 500);
    assert.ok(upstream.length > 0);
    assert.deepEqual(await mirrored(erp.accountId, 'customers', ''), upstream);
  });

  it('mirrors children through their parents (AP invoice line items)', async () => {
    const invoices = await upstreamAll(h, '/ap-invoices', { 'account-token': erp.accountToken });
    assert.ok(invoices.length > 0);
    for (const inv of invoices.slice(0, 5)) {
      const upstream = await upstreamAll(
        h,
        `/ap-invoices/${String(inv.id)}/line-items`,
        { 'account-token': erp.accountToken, 'include-source-data': 'true' },
        500,
      );
      assert.deepEqual(await mirrored(erp.accountId, 'ap-invoice-line-items', `ap-invoices=${String(inv.id)}`), upstream);
    }
  });

  it('serves the mirror through the read API in the upstream shape, scoped to the account', async () => {
    const res = await h.app.inject({
      method: 'GET',
      url: '/projects?page=1&per_page=2',
      headers: { ...h.clientHeaders, 'account-token': construction.accountToken },
    });
    assert.equal(res.statusCode, 200);
    const body = res.json<{ data: Record<string, unknown>[]; meta: { current_page: number; has_more_results: boolean } }>();
    const upstream = await upstreamAll(h, '/projects', { 'account-token': construction.accountToken });
    assert.deepEqual(body.data, upstream.slice(0, 2));
    assert.deepEqual(body.meta, { current_page: 1, has_more_results: upstream.length > 2 });
    assert.ok(res.headers['svc-data-retrieved-at']);

    const one = await h.app.inject({
      method: 'GET',
      url: `/projects/${String(upstream[0]!.id)}`,
      headers: { ...h.clientHeaders, 'account-token': construction.accountToken },
    });
    assert.equal(one.statusCode, 200);
    assert.deepEqual(one.json(), upstream[0]);

    const bySource = await h.app.inject({
      method: 'GET',
      url: `/projects/source_id:${String(upstream[0]!.source_id)}`,
      headers: { ...h.clientHeaders, 'account-token': construction.accountToken },
    });
    assert.deepEqual(bySource.json(), upstream[0]);

    // The other account cannot read it, by id or by source id.
    const other = await h.app.inject({
      method: 'GET',
      url: `/projects/${String(upstream[0]!.id)}`,
      headers: { ...h.clientHeaders, 'account-token': erp.accountToken },
    });
    assert.equal(other.statusCode, 404);
  });

  it('rejects bad credentials with a clear message', async () => {
    const res = await h.app.inject({
      method: 'GET',
      url: '/projects',
      headers: { ...h.clientHeaders, 'client-secret': 'x'.repeat(40), 'account-token': construction.accountToken },
    });
    assert.equal(res.statusCode, 401);
    assert.match(res.json<{ message: string }>().message, /Client-Id or Client-Secret/);
  });

  it('rewrites no row on an unchanged second pass', async () => {
    const before = await h.services.pool.query<{ n: number; max: Date }>(
      `SELECT count(*)::int AS n, max(mirrored_at) AS max FROM records WHERE account_id = $1`,
      [construction.accountId],
    );
    const run = await h.sync.start({ accountId: construction.accountId, mode: 'full' });
    const result = await run.result();
    assert.deepEqual(result.failed, []);
    const afterPass = await h.services.pool.query<{ n: number; max: Date }>(
      `SELECT count(*)::int AS n, max(mirrored_at) AS max FROM records WHERE account_id = $1`,
      [construction.accountId],
    );
    assert.equal(afterPass.rows[0]!.n, before.rows[0]!.n);
    assert.equal(afterPass.rows[0]!.max.getTime(), before.rows[0]!.max.getTime(), 'no record was rewritten');
    const runs = await h.services.pool.query<{ inserted: number; updated: number; unchanged: number }>(
      `SELECT sum(inserted)::int AS inserted, sum(updated)::int AS updated, sum(unchanged)::int AS unchanged FROM sync_runs r JOIN streams s ON s.id = r.stream_id
        WHERE s.account_id = $1 AND r.generation = 2`,
      [construction.accountId],
    );
    assert.equal(runs.rows[0]!.inserted, 0);
    assert.equal(runs.rows[0]!.updated, 0);
    assert.equal(runs.rows[0]!.unchanged, before.rows[0]!.n);
  });
});
