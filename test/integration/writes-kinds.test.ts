// Writes of every kind through the mirror (DELETE, bulk PATCH {creates, updates}, writes under a
// parent, multipart uploads, async): each forwarded, the upstream's status and body relayed, and
// afterwards the upstream (the sandbox, read directly) and the mirror agree; nothing is applied
// when the upstream refuses or an item fails.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { resourceDef, type ResourceDef } from '../../lib/resources.ts';
import { eventually, firstProjectId, linkAndSync, sandboxAdmin, startHarness, type Harness } from '../helpers/harness.ts';

type Json = Record<string, unknown>;

/** URL fields by presence only: each answer signs its storage links anew. */
function comparable(value: unknown, def: ResourceDef | undefined): unknown {
  if (Array.isArray(value)) return value.map((v) => comparable(v, def));
  if (typeof value !== 'object' || value === null) return value;
  const out: Json = {};
  for (const [k, v] of Object.entries(value as Json)) {
    if (k === 'data' && Array.isArray(v)) out[k] = comparable(v, def);
    else if (def?.urlFields?.includes(k)) out[k] = typeof v === 'string' && v.length > 0 ? '<signed url>' : v;
    else out[k] = v;
  }
  return out;
}

describe('writes of every kind through the mirror', { timeout: 300_000 }, () => {
  let h: Harness;
  const accounts = new Map<string, { accountId: string; accountToken: string }>();
  let projectId: string;

  before(async () => {
    h = await startHarness({ sandbox: { size: 8 } });
    for (const slug of ['graphledger', 'buildpro']) accounts.set(slug, await linkAndSync(h, slug, `writes-${slug}`));
    projectId = await firstProjectId(h, accounts.get('buildpro')!.accountId);
  });

  after(async () => {
    await h?.close();
  });

  const tokenOf = (slug: string) => accounts.get(slug)!.accountToken;

  async function mirror(slug: string, method: string, url: string, body?: unknown, headers: Record<string, string> = {}) {
    const res = await fetch(`${h.apiUrl}${url}`, {
      method,
      headers: { ...h.clientHeaders, 'account-token': tokenOf(slug), ...(body === undefined ? {} : { 'content-type': 'application/json' }), ...headers },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    const text = await res.text();
    return { status: res.status, headers: res.headers, text, body: (text ? JSON.parse(text) : undefined) as Json & { data: Json[]; message?: string } };
  }

  async function upload(
    slug: string,
    url: string,
    headers: Record<string, string>,
    fields: Record<string, string>,
    file?: { name: string; type: string; bytes: Buffer },
  ) {
    const form = new FormData();
    for (const [k, v] of Object.entries(fields)) form.append(k, v);
    if (file) form.append('contents', new Blob([file.bytes], { type: file.type }), file.name);
    const res = await fetch(`${h.apiUrl}${url}`, { method: 'POST', headers: { ...h.clientHeaders, 'account-token': tokenOf(slug), ...headers }, body: form });
    const text = await res.text();
    return { status: res.status, text, body: (text ? JSON.parse(text) : undefined) as Json & { message?: string } };
  }

  async function upstream(slug: string, url: string, headers: Record<string, string> = {}) {
    const res = await fetch(`${h.sandbox.url}${url}`, { headers: { ...h.upstreamHeaders, 'account-token': tokenOf(slug), ...headers } });
    const text = await res.text();
    return { status: res.status, body: (text ? JSON.parse(text) : undefined) as unknown };
  }

  /** The same read, from the sandbox and from the mirror, with source data: equal. */
  async function agree(slug: string, url: string, resource: string, headers: Record<string, string> = {}, served = true): Promise<unknown> {
    const all = { 'include-source-data': 'true', ...headers };
    const [up, mine] = await Promise.all([upstream(slug, url, all), mirror(slug, 'GET', url, undefined, all)]);
    assert.equal(mine.status, up.status, `${url}: the mirror answers ${mine.status}, the upstream ${up.status}`);
    const def = resourceDef(resource);
    const strip = (b: unknown) => {
      const { meta: _meta, ...rest } = (b ?? {}) as Json;
      return comparable(rest, def);
    };
    assert.deepEqual(strip(mine.body), strip(up.body), `${url}: the mirror serves what the upstream holds`);
    if (served) assert.equal(mine.headers.get('svc-warnings'), null, `${url}: served from the mirror`);
    return mine.body;
  }

  async function recordState(accountId: string, resource: string, id: string) {
    const { rows } = await h.services.pool.query<{ scope: string; deleted_at: Date | null }>(
      `SELECT scope, deleted_at FROM records WHERE account_id = $1 AND resource = $2 AND id = $3`,
      [accountId, resource, id],
    );
    return rows;
  }

  async function liveCount(accountId: string, resource: string) {
    const { rows } = await h.services.pool.query<{ n: number }>(
      `SELECT count(*)::int AS n FROM records WHERE account_id = $1 AND resource = $2 AND deleted_at IS NULL`,
      [accountId, resource],
    );
    return rows[0]!.n;
  }

  describe('DELETE', () => {
    it('deletes upstream, relays 204, and soft-deletes in the mirror as a pass would (reads, include_deleted, change feed)', async () => {
      const { accountId } = accounts.get('graphledger')!;
      const before = await agree('graphledger', '/vendors?per_page=1000', 'vendors');
      const target = (before as { data: Json[] }).data[2]!;
      const res = await mirror('graphledger', 'DELETE', `/vendors/${String(target.id)}`);
      assert.equal(res.status, 204, res.text);
      assert.equal(res.text, '', 'the upstream answered no body, relayed as it came');
      assert.equal((await upstream('graphledger', `/vendors/${String(target.id)}`)).status, 404, 'deleted upstream');
      assert.equal((await mirror('graphledger', 'GET', `/vendors/${String(target.id)}`)).status, 404, 'and in the mirror');
      await agree('graphledger', '/vendors?per_page=1000', 'vendors');
      const [row] = await recordState(accountId, 'vendors', String(target.id));
      assert.ok(row?.deleted_at, 'soft-deleted, kept');
      const withDeleted = await mirror('graphledger', 'GET', '/vendors?per_page=1000&include_deleted=true');
      assert.ok(
        withDeleted.body.data.some((v) => v.id === target.id),
        'include_deleted=true shows it',
      );
      const change = await eventually('the DELETE in the change feed', async () => {
        const feed = await mirror('graphledger', 'GET', '/mirror/changes/vendors?limit=1000');
        return (feed.body.data as { event: string; id: string }[]).find((c) => c.id === target.id && c.event === 'DELETE');
      });
      assert.equal(change.event, 'DELETE');
      // A full pass finds it gone too, and leaves it as the write marked it.
      const pass = await (await h.sync.start({ accountId, mode: 'full', resource: 'vendors' })).result();
      assert.deepEqual(pass.failed, []);
      assert.deepEqual(await recordState(accountId, 'vendors', String(target.id)), [row], 'the pass changes nothing more');

      // By source id, as the upstream takes it.
      const other = (before as { data: Json[] }).data[3]!;
      assert.equal((await mirror('graphledger', 'DELETE', `/vendors/source_id:${String(other.source_id)}`)).status, 204);
      assert.ok((await recordState(accountId, 'vendors', String(other.id)))[0]?.deleted_at);
      await agree('graphledger', '/vendors?per_page=1000', 'vendors');
    });

    it("relays the upstream's refusal and deletes nothing", async () => {
      const { accountId } = accounts.get('graphledger')!;
      const vendors = await liveCount(accountId, 'vendors');
      const missing = await mirror('graphledger', 'DELETE', '/vendors/00000000-0000-4000-8000-000000000000');
      assert.equal(missing.status, 404);
      assert.match(String(missing.body.message), /not found/);
      const projects = await liveCount(accountId, 'projects');
      const project = (await mirror('graphledger', 'GET', '/projects')).body.data[0]!;
      const refused = await mirror('graphledger', 'DELETE', `/projects/${String(project.id)}`);
      assert.equal(refused.status, 404);
      assert.equal(refused.body.message, 'Deleting projects is not supported by GraphLedger');
      assert.equal(await liveCount(accountId, 'vendors'), vendors);
      assert.equal(await liveCount(accountId, 'projects'), projects);
      await agree('graphledger', `/projects/${String(project.id)}`, 'projects');
    });
  });

  describe('bulk PATCH {creates, updates}', () => {
    it('applies each item the upstream created or updated, and nothing of an item that failed', async () => {
      const { accountId } = accounts.get('graphledger')!;
      const vendors = (await mirror('graphledger', 'GET', '/vendors?per_page=1000')).body.data;
      const res = await mirror('graphledger', 'PATCH', '/vendors', {
        creates: [{ name: 'Bulk Concrete LLC' }, { name: 'Bulk Steel LLC', phone: '+1-555-0110' }],
        updates: [
          { id: String(vendors[0]!.id), name: 'Renamed through the mirror' },
          { id: '00000000-0000-4000-8000-000000000001', name: 'nobody' },
        ],
      });
      assert.equal(res.status, 200, res.text);
      const results = res.body.data as { operation: string; status: number; object?: Json }[];
      assert.deepEqual(
        results.map((r) => r.status),
        [201, 201, 200, 404],
        "the upstream's results, relayed",
      );
      for (const r of results.filter((x) => x.object)) await agree('graphledger', `/vendors/${String(r.object!.id)}`, 'vendors');
      assert.equal((await recordState(accountId, 'vendors', '00000000-0000-4000-8000-000000000001')).length, 0, 'the failed item left nothing');
      await agree('graphledger', '/vendors?per_page=1000', 'vendors');
    });

    it('what each write costs upstream: one request, plus a read back of what the answer lacks', async () => {
      const upstreamRequests = async () => {
        const stats = await sandboxAdmin<{ accounts: Record<string, { reference_id: string; by_path: Record<string, number> }> }>(h, 'GET', '/_admin/stats');
        return Object.values(stats.accounts).find((a) => a.reference_id === 'writes-graphledger')!.by_path;
      };
      await sandboxAdmin(h, 'DELETE', '/_admin/stats');
      const creates = [{ name: 'Counted A' }, { name: 'Counted B' }, { name: 'Counted C' }];
      assert.equal((await mirror('graphledger', 'PATCH', '/vendors', { creates }, { 'include-source-data': 'true' })).status, 200);
      assert.deepEqual(await upstreamRequests(), { 'PATCH /vendors': 1 }, 'the answer carried the source data: nothing read back');
      await sandboxAdmin(h, 'DELETE', '/_admin/stats');
      assert.equal((await mirror('graphledger', 'PATCH', '/vendors', { creates }, {})).status, 200);
      assert.deepEqual(await upstreamRequests(), { 'PATCH /vendors': 1, 'GET /vendors/:id': 3 }, 'each applied object read back once for its source data');
      // A delete needs nothing more; a write under a parent reads the parent again (it may embed its children).
      const vendor = (await mirror('graphledger', 'GET', '/vendors')).body.data[0]!;
      const invoice = (await mirror('graphledger', 'GET', '/ap-invoices')).body.data[2]!;
      await sandboxAdmin(h, 'DELETE', '/_admin/stats');
      assert.equal((await mirror('graphledger', 'DELETE', `/vendors/${String(vendor.id)}`)).status, 204);
      assert.equal((await mirror('graphledger', 'POST', `/ap-invoices/${String(invoice.id)}/line-items`, { description: 'Counted' })).status, 201);
      assert.deepEqual(await upstreamRequests(), {
        'DELETE /vendors/:id': 1,
        'POST /ap-invoices/:id/line-items': 1,
        'GET /ap-invoices/:id/line-items/:subId': 1,
        'GET /ap-invoices/:id': 1,
      });
    });

    it('a bulk write the upstream refuses whole changes nothing; project-scoped ones land in their project', async () => {
      const { accountId } = accounts.get('buildpro')!;
      const ph = { 'project-id': projectId };
      const before = await liveCount(accountId, 'budget-line-items');
      const refused = await mirror('buildpro', 'PATCH', '/budget-line-items', { creates: [{ name: 'x' }], deletes: ['y'] }, ph);
      assert.equal(refused.status, 400);
      assert.match(String(refused.body.message), /deletes/);
      assert.equal(await liveCount(accountId, 'budget-line-items'), before);
      const items = (await mirror('buildpro', 'GET', '/budget-line-items', undefined, ph)).body.data;
      const res = await mirror(
        'buildpro',
        'PATCH',
        '/budget-line-items',
        { creates: [{ name: 'Bulk formwork', original_amount: 10 }], updates: [{ id: String(items[1]!.id), name: 'Bulk renamed' }] },
        ph,
      );
      assert.equal(res.status, 200, res.text);
      const created = (res.body.data[0] as { object: Json }).object;
      assert.deepEqual(
        (await recordState(accountId, 'budget-line-items', String(created.id))).map((r) => r.scope),
        [`project=${projectId}`],
      );
      await agree('buildpro', '/budget-line-items?per_page=1000', 'budget-line-items', ph);
    });
  });

  describe('writes under a parent', () => {
    it('line items: create, update, delete through the mirror; the list and the invoice that embeds them agree', async () => {
      const { accountId } = accounts.get('graphledger')!;
      const invoice = (await mirror('graphledger', 'GET', '/ap-invoices')).body.data[0]!;
      const base = `/ap-invoices/${String(invoice.id)}/line-items`;
      const created = await mirror('graphledger', 'POST', base, { description: 'Rebar', amount: 120, quantity: 3, unit_cost: 40 });
      assert.equal(created.status, 201, created.text);
      const itemId = String(created.body.id);
      assert.deepEqual(
        (await recordState(accountId, 'ap-invoice-line-items', itemId)).map((r) => r.scope),
        [`ap-invoices=${String(invoice.id)}`],
        'under its parent',
      );
      await agree('graphledger', `${base}?per_page=1000`, 'ap-invoice-line-items');
      await agree('graphledger', `/ap-invoices/${String(invoice.id)}`, 'ap-invoices');

      const patched = await mirror('graphledger', 'PATCH', `${base}/${itemId}`, { quantity: 5 });
      assert.equal(patched.status, 200, patched.text);
      const put = await mirror('graphledger', 'PUT', `${base}/${itemId}`, { description: 'Rebar #5' });
      assert.equal(put.status, 200, put.text);
      await agree('graphledger', `${base}/${itemId}`, 'ap-invoice-line-items');
      await agree('graphledger', `/ap-invoices/${String(invoice.id)}`, 'ap-invoices');

      const unknown = await mirror('graphledger', 'PATCH', `${base}/00000000-0000-4000-8000-000000000002`, { quantity: 1 });
      assert.equal(unknown.status, 404, "the upstream's refusal, relayed");
      const noParent = await mirror('graphledger', 'POST', '/ap-invoices/00000000-0000-4000-8000-000000000003/line-items', { description: 'x' });
      assert.equal(noParent.status, 404);
      assert.equal((await recordState(accountId, 'ap-invoice-line-items', '00000000-0000-4000-8000-000000000002')).length, 0);

      assert.equal((await mirror('graphledger', 'DELETE', `${base}/${itemId}`)).status, 204);
      assert.ok((await recordState(accountId, 'ap-invoice-line-items', itemId))[0]?.deleted_at);
      await agree('graphledger', `${base}?per_page=1000`, 'ap-invoice-line-items');
      await agree('graphledger', `/ap-invoices/${String(invoice.id)}`, 'ap-invoices');
    });

    it('deleting a parent marks what is listed under it deleted too', async () => {
      const { accountId } = accounts.get('graphledger')!;
      const invoice = (await mirror('graphledger', 'GET', '/ap-invoices')).body.data[1]!;
      const lines = (await mirror('graphledger', 'GET', `/ap-invoices/${String(invoice.id)}/line-items`)).body.data;
      assert.ok(lines.length > 0);
      assert.equal((await mirror('graphledger', 'DELETE', `/ap-invoices/${String(invoice.id)}`)).status, 204);
      for (const l of lines) {
        const rows = (await recordState(accountId, 'ap-invoice-line-items', String(l.id))).filter((r) => r.scope === `ap-invoices=${String(invoice.id)}`);
        assert.ok(rows[0]?.deleted_at, `line item ${String(l.id)} marked deleted`);
      }
      await agree('graphledger', '/ap-invoices?per_page=1000', 'ap-invoices');
    });
  });

  describe('multipart uploads', () => {
    it("a folder's new file and a file's new version: streamed through, applied, and equal to the upstream's", async () => {
      const { accountId } = accounts.get('buildpro')!;
      const ph = { 'project-id': projectId };
      const folder = (await mirror('buildpro', 'GET', '/folders?per_page=1000', undefined, ph)).body.data[1]!;
      const before = await liveCount(accountId, 'files');
      // Larger than the 10 MB the mirror would take as a parsed body: it is streamed, not read.
      const bytes = Buffer.alloc(12 * 1024 * 1024, 0x61);
      const res = await upload(
        'buildpro',
        `/folders/${String(folder.id)}/files`,
        ph,
        { name: 'Level 2 plan', content_type: 'application/pdf' },
        { name: 'level-2.pdf', type: 'application/pdf', bytes },
      );
      assert.equal(res.status, 201, res.text.slice(0, 300));
      assert.equal(res.body.size, String(bytes.length), 'the upstream received every byte');
      assert.equal(await liveCount(accountId, 'files'), before + 1);
      await agree('buildpro', `/files/${String(res.body.id)}`, 'files', ph);
      await agree('buildpro', `/folders/${String(folder.id)}/files?per_page=1000`, 'files', ph);

      const version = await upload(
        'buildpro',
        `/files/${String(res.body.id)}/versions`,
        ph,
        { name: 'Revision B' },
        { name: 'level-2-b.pdf', type: 'application/pdf', bytes: Buffer.from('rev b') },
      );
      assert.equal(version.status, 201, version.text);
      assert.deepEqual(
        (await recordState(accountId, 'file-versions', String(version.body.id))).map((r) => r.scope),
        [`project=${projectId}/files=${String(res.body.id)}`],
        'under its file',
      );
      // The new file's versions were never listed by a pass: that list is still the upstream's to
      // answer (the version itself is served from the mirror).
      await agree('buildpro', `/files/${String(res.body.id)}/versions?per_page=1000`, 'file-versions', ph, false);
      await agree('buildpro', `/files/${String(res.body.id)}/versions/${String(version.body.id)}`, 'file-versions', ph);

      const refused = await mirror('buildpro', 'POST', `/folders/${String(folder.id)}/files`, { name: 'not multipart' }, ph);
      assert.equal(refused.status, 400);
      assert.match(String(refused.body.message), /multipart/);
      assert.equal(await liveCount(accountId, 'files'), before + 1, 'nothing applied');
    });
  });

  it('an async write (Async-Request: true) runs later and is applied then', async () => {
    const { accountId } = accounts.get('graphledger')!;
    const vendor = (await mirror('graphledger', 'GET', '/vendors?per_page=1000')).body.data[5]!;
    const accepted = await mirror('graphledger', 'DELETE', `/vendors/${String(vendor.id)}`, undefined, { 'async-request': 'true' });
    assert.equal(accepted.status, 202);
    const id = accepted.headers.get('svc-async-request-id')!;
    const done = await eventually('the async delete', async () => {
      const poll = await mirror('graphledger', 'GET', `/async-requests/${id}`);
      return poll.headers.get('svc-async-request-state') === 'executed' ? poll : undefined;
    });
    assert.equal(done.status, 204);
    assert.ok((await recordState(accountId, 'vendors', String(vendor.id)))[0]?.deleted_at);
    await agree('graphledger', '/vendors?per_page=1000', 'vendors');

    const bulk = await mirror('graphledger', 'PATCH', '/vendors', { creates: [{ name: 'Async Bulk LLC' }] }, { 'async-request': 'true' });
    assert.equal(bulk.status, 202);
    const bulkId = bulk.headers.get('svc-async-request-id')!;
    const result = await eventually('the async bulk write', async () => {
      const poll = await mirror('graphledger', 'GET', `/async-requests/${bulkId}`);
      return poll.headers.get('svc-async-request-state') === 'executed' ? poll : undefined;
    });
    assert.equal(result.status, 200, result.text);
    const created = (result.body.data[0] as { object: Json }).object;
    assert.equal(created.name, 'Async Bulk LLC');
    await agree('graphledger', `/vendors/${String(created.id)}`, 'vendors');
  });
});
