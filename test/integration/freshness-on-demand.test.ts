// Freshness on demand and no false 404, against the sandbox: every answer from the mirror says when
// its scope was last verified (Svc-Data-Retrieved-At); a read with `Cache-Control: max-age=N` or
// `no-cache` is answered from the mirror only when the scope was verified within N seconds, else by
// the upstream while the scope is refreshed; a single object created upstream after the last pass is
// fetched, kept and answered (then from the mirror); a flood of unknown ids costs one upstream
// request per id per window.
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { after, before, describe, it } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { freshnessTtlMs } from '../../mirror/reads/records-read.ts';
import { firstProjectId, linkAndSync, sandboxAdmin, startHarness, type Harness } from '../helpers/harness.ts';

type Stats = { accounts: Record<string, { reference_id: string; by_path: Record<string, number> }> };

describe('freshness on demand and no false 404', { timeout: 300_000 }, () => {
  let h: Harness;
  let account: { accountId: string; accountToken: string };
  let projectId: string;

  before(async () => {
    h = await startHarness({ sandbox: { size: 4 } });
    account = await linkAndSync(h, 'buildpro', 'fresh');
    projectId = await firstProjectId(h, account.accountId);
    // Upstream webhook deliveries are lost here (should the account have registrations): what the
    // mirror learns of upstream changes comes from the reads under test alone.
    await sandboxAdmin(h, 'PUT', '/_admin/webhook-delivery', { loss_probability: 1 });
  });
  after(async () => {
    await h?.close();
  });

  const read = (url: string, headers: Record<string, string> = {}) =>
    h.app.inject({ method: 'GET', url, headers: { ...h.clientHeaders, 'account-token': account.accountToken, ...headers } });
  const upstream = (url: string, headers: Record<string, string> = {}) =>
    fetch(`${h.sandbox.url}${url}`, { headers: { ...h.upstreamHeaders, 'account-token': account.accountToken, ...headers } });
  /** Requests the sandbox answered for this account on a route (e.g. `GET /vendors/:id`). */
  const upstreamCalls = async (route: string): Promise<number> => {
    const stats = await sandboxAdmin<Stats>(h, 'GET', '/_admin/stats');
    return Object.values(stats.accounts).find((a) => a.reference_id === 'fresh')?.by_path[route] ?? 0;
  };
  const verifiedAt = async (resource: string, scope: string): Promise<Date> => {
    const { rows } = await h.services.pool.query<{ at: Date }>(
      'SELECT last_pass_started_at AS at FROM streams WHERE account_id = $1 AND resource = $2 AND scope = $3',
      [account.accountId, resource, scope],
    );
    return rows[0]!.at;
  };
  /** Makes the scope's last verification `secondsAgo` old (what the mirror remembers of it expires first). */
  const verifiedAgo = async (resource: string, scope: string, secondsAgo: number): Promise<void> => {
    await h.services.pool.query(
      `UPDATE streams SET last_pass_started_at = now() - make_interval(secs => $4), last_fresh_at = now() - make_interval(secs => $4)
        WHERE account_id = $1 AND resource = $2 AND scope = $3`,
      [account.accountId, resource, scope, secondsAgo],
    );
    await sleep(freshnessTtlMs + 100);
  };
  const vendorRoute = 'GET /vendors/:id';

  it("answers Svc-Data-Retrieved-At as the start of the scope's last completed pass", async () => {
    const res = await read('/vendors');
    assert.equal(res.statusCode, 200);
    assert.equal(res.headers['svc-data-retrieved-at'], (await verifiedAt('vendors', '')).toISOString());
  });

  it('answers a list with max-age from the mirror when the scope was verified within it, else from the upstream while it is refreshed', async () => {
    await verifiedAgo('vendors', '', 3600);
    const anHourAgo = await verifiedAt('vendors', '');
    const loose = await read('/vendors', { 'cache-control': 'max-age=7200' });
    assert.equal(loose.statusCode, 200);
    assert.equal(loose.headers['svc-warnings'], undefined, 'served from the mirror');
    assert.equal(loose.headers['svc-data-retrieved-at'], anHourAgo.toISOString());
    assert.equal((await read('/vendors')).headers['svc-warnings'], undefined, 'no bound asked: the mirror answers');

    const strict = await read('/vendors', { 'cache-control': 'max-age=60' });
    assert.equal(strict.statusCode, 200, strict.body);
    assert.match(String(strict.headers['svc-warnings']), /^answered by the upstream: the request accepts data at most 60 s old/);
    assert.deepEqual(strict.json(), await (await upstream('/vendors')).json(), "the upstream's answer");

    // The scope's refresh started with the forward: once it is done the mirror answers the same bound.
    const refresh = h.temporal.workflow.getHandle(h.sync.workflowId({ accountId: account.accountId, resource: 'vendors' }));
    await refresh.result();
    assert.ok((await verifiedAt('vendors', '')) > anHourAgo, 'the scope was verified again');
    await sleep(freshnessTtlMs + 100);
    const fresh = await read('/vendors', { 'cache-control': 'max-age=60' });
    assert.equal(fresh.statusCode, 200);
    assert.equal(fresh.headers['svc-warnings'], undefined, 'verified just now: from the mirror');
    assert.ok(Date.now() - Date.parse(String(fresh.headers['svc-data-retrieved-at'])) <= 60_000);

    const noCache = await read('/vendors', { 'cache-control': 'no-cache' });
    assert.equal(noCache.statusCode, 200);
    assert.match(String(noCache.headers['svc-warnings']), /^answered by the upstream: the request accepts data at most 0 s old/);
  });

  it('answers an object with max-age from the upstream when its scope is older, then from the mirror within the bound', async () => {
    const { rows } = await h.services.pool.query<{ id: string }>(
      `SELECT id FROM records WHERE account_id = $1 AND resource = 'vendors' AND deleted_at IS NULL ORDER BY ordinal LIMIT 1`,
      [account.accountId],
    );
    const id = rows[0]!.id;
    await sandboxAdmin(h, 'PATCH', '/_admin/objects', { account_token: account.accountToken, resource: 'vendors', id, patch: { name: 'Renamed upstream' } });
    // The copy was fetched an hour ago: its scope's pass, and the record's own last write.
    await h.services.pool.query(`UPDATE records SET mirrored_at = now() - interval '1 hour' WHERE account_id = $1 AND resource = 'vendors' AND id = $2`, [
      account.accountId,
      id,
    ]);
    await verifiedAgo('vendors', '', 3600);
    assert.notEqual((await read(`/vendors/${id}`)).json<{ name: string }>().name, 'Renamed upstream', 'without a bound: the copy as it is');
    const before = await upstreamCalls(vendorRoute);
    const bounded = await read(`/vendors/${id}`, { 'cache-control': 'max-age=60' });
    assert.equal(bounded.statusCode, 200, bounded.body);
    assert.equal(bounded.json<{ name: string }>().name, 'Renamed upstream', "the upstream's object");
    assert.ok(Date.now() - Date.parse(String(bounded.headers['svc-data-retrieved-at'])) <= 60_000);
    assert.equal(await upstreamCalls(vendorRoute), before + 1);
    const again = await read(`/vendors/${id}`, { 'cache-control': 'max-age=60' });
    assert.equal(again.json<{ name: string }>().name, 'Renamed upstream');
    assert.equal(await upstreamCalls(vendorRoute), before + 1, 'verified within the bound: from the mirror');
    assert.equal((await read(`/vendors/${id}`)).json<{ name: string }>().name, 'Renamed upstream', 'and kept in the mirror');
  });

  it('answers a single object created upstream after the last pass with 200, then from the mirror', async () => {
    const created = await sandboxAdmin<{ id: string }>(h, 'POST', '/_admin/objects', {
      account_token: account.accountToken,
      resource: 'vendors',
      object: { name: 'Created after the pass' },
    });
    const before = await upstreamCalls(vendorRoute);
    const first = await read(`/vendors/${created.id}`);
    assert.equal(first.statusCode, 200, first.body);
    assert.equal(await upstreamCalls(vendorRoute), before + 1);
    const second = await read(`/vendors/${created.id}`);
    assert.equal(second.statusCode, 200);
    assert.equal(await upstreamCalls(vendorRoute), before + 1, 'the second read is answered from the mirror');
    assert.deepEqual(first.json(), second.json());
    assert.deepEqual(first.json(), await (await upstream(`/vendors/${created.id}`)).json(), "the upstream's object");
    const list = await read('/vendors?per_page=1000');
    assert.ok(
      list.json<{ data: { id: string }[] }>().data.some((v) => v.id === created.id),
      'the list of the mirror holds it too',
    );
  });

  it('does the same for a project-scoped record (a document)', async () => {
    const created = await sandboxAdmin<{ id: string }>(h, 'POST', '/_admin/objects', {
      account_token: account.accountToken,
      resource: 'documents',
      project_id: projectId,
      object: { name: 'Minutes of the site meeting' },
    });
    const res = await read(`/documents/${created.id}`, { 'project-id': projectId });
    assert.equal(res.statusCode, 200, res.body);
    assert.deepEqual(res.json(), await (await upstream(`/documents/${created.id}`, { 'project-id': projectId })).json());
    const { rows } = await h.services.pool.query('SELECT 1 FROM records WHERE account_id = $1 AND resource = $2 AND id = $3 AND scope = $4', [
      account.accountId,
      'documents',
      created.id,
      `project=${projectId}`,
    ]);
    assert.equal(rows.length, 1, "kept in the project's scope");
  });

  it('costs one upstream request per unknown id per window, whatever the number of reads', async () => {
    const ids = Array.from({ length: 5 }, () => randomUUID());
    const before = await upstreamCalls(vendorRoute);
    const flood = await Promise.all(ids.flatMap((id) => Array.from({ length: 10 }, () => read(`/vendors/${id}`))));
    assert.deepEqual(new Set(flood.map((r) => r.statusCode)), new Set([404]));
    assert.equal(await upstreamCalls(vendorRoute), before + ids.length, 'each id asked once');
    const second = await Promise.all(ids.map((id) => read(`/vendors/${id}`)));
    assert.deepEqual(new Set(second.map((r) => r.statusCode)), new Set([404]));
    assert.equal(await upstreamCalls(vendorRoute), before + ids.length, 'within the window: the answer remembered');
    // A read that accepts nothing older asks again.
    assert.equal((await read(`/vendors/${ids[0]}`, { 'cache-control': 'no-cache' })).statusCode, 404);
    assert.equal(await upstreamCalls(vendorRoute), before + ids.length + 1);
  });
});
