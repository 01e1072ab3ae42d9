// Writes of the real service's other resources through the mirror. The sandbox takes the
// writes the reference lists for their collection paths (an RFI's create; a subcontract line item's
// create, update and delete), the mirror forwards them and applies what the upstream answered, and a
// read right after is served from the mirror's own copy (no `{Prefix}-Warnings` header a forwarded
// answer carries) and equals the upstream's.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { firstProjectId, linkAndSync, startHarness, type Harness } from '../helpers/harness.ts';

type Json = Record<string, unknown>;

describe("writes of the real service's other resources through the mirror", { timeout: 600_000 }, () => {
  let h: Harness;
  const accounts = new Map<string, { accountId: string; accountToken: string }>();
  let projectId: string;

  before(async () => {
    h = await startHarness({ sandbox: { size: 4 }, config: { MIRROR_RESOURCES: '*' } });
    // The two accounts are independent: their first passes run side by side (SQL ERP's async
    // requests, a 5 s poll floor each, wait while BuildPro syncs instead of after it).
    const slugs = ['buildpro', 'sqlerp'];
    const linked = await Promise.all(slugs.map((slug) => linkAndSync(h, slug, `real-writes-${slug}`)));
    slugs.forEach((slug, i) => accounts.set(slug, linked[i]!));
    projectId = await firstProjectId(h, accounts.get('buildpro')!.accountId);
  });

  after(async () => {
    await h?.close();
  });

  async function ask(base: 'mirror' | 'upstream', slug: string, method: string, url: string, body?: unknown, headers: Record<string, string> = {}) {
    const res = await fetch(`${base === 'mirror' ? h.apiUrl : h.sandbox.url}${url}`, {
      method,
      headers: {
        ...(base === 'mirror' ? h.clientHeaders : h.upstreamHeaders),
        'account-token': accounts.get(slug)!.accountToken,
        ...(body === undefined ? {} : { 'content-type': 'application/json' }),
        ...headers,
      },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    const text = await res.text();
    return { status: res.status, warnings: res.headers.get('svc-warnings'), text, body: (text ? JSON.parse(text) : undefined) as Json & { data: Json[] } };
  }

  /** A read served by the mirror from its own copy, equal to the upstream's answer. */
  async function servedEqual(slug: string, url: string, headers: Record<string, string> = {}): Promise<Json & { data: Json[] }> {
    const [mine, up] = [await ask('mirror', slug, 'GET', url, undefined, headers), await ask('upstream', slug, 'GET', url, undefined, headers)];
    assert.equal(mine.status, 200, `${url}: ${mine.text.slice(0, 300)}`);
    assert.equal(mine.warnings, null, `${url}: served from the mirror, not forwarded (${mine.warnings})`);
    const strip = (b: Json) => {
      const { meta: _meta, ...rest } = b;
      return rest;
    };
    assert.deepEqual(strip(mine.body), strip(up.body), `${url}: the mirror equals the upstream`);
    return mine.body;
  }

  it('an RFI created through the mirror is read back from the mirror, in its project', async () => {
    const ph = { 'project-id': projectId };
    const assignee = (await servedEqual('buildpro', '/contacts?per_page=1')).data[0]!;
    const created = await ask(
      'mirror',
      'buildpro',
      'POST',
      '/rfis',
      {
        subject: 'Footing rebar spacing at grid C4',
        question: 'Drawing S-201 shows 12" o.c.; the spec says 10". Which governs?',
        status: 'Open',
        assignee_id: assignee.id,
        due_date: '2026-12-04',
      },
      ph,
    );
    assert.equal(created.status, 201, created.text);
    const id = String(created.body.id);
    assert.equal(created.body.subject, 'Footing rebar spacing at grid C4');
    const one = await servedEqual('buildpro', `/rfis/${id}`, ph);
    assert.equal(one.question, 'Drawing S-201 shows 12" o.c.; the spec says 10". Which governs?');
    assert.equal(one.assignee_id, assignee.id);
    const list = await servedEqual('buildpro', '/rfis?per_page=100', ph);
    assert.ok(
      list.data.some((r) => r.id === id),
      "the new RFI is in the mirror's list of the project",
    );
    // The reference lists no update of an RFI: the upstream has no such route, and the mirror relays that.
    const update = await ask('mirror', 'buildpro', 'PATCH', `/rfis/${id}`, { status: 'Closed' }, ph);
    assert.equal(update.status, 404, update.text);
    assert.equal((await servedEqual('buildpro', `/rfis/${id}`, ph)).status, 'Open');
  });

  it('a subcontract line item created, updated and deleted through the mirror is read back from the mirror', async () => {
    const subcontract = (await servedEqual('sqlerp', '/subcontracts?per_page=1')).data[0]!;
    const costCode = (await servedEqual('sqlerp', '/cost-codes?per_page=1')).data[0]!;
    const base = `/subcontracts/${String(subcontract.id)}/line-items`;
    const before = (await servedEqual('sqlerp', `${base}?per_page=100`)).data.length;
    const created = await ask('mirror', 'sqlerp', 'POST', base, { cost_code_id: costCode.id, unit_of_measure: 'LF', quantity: 120, amount: 18_450.5 });
    assert.equal(created.status, 201, created.text);
    const id = String(created.body.id);
    assert.equal(created.body.subcontract_id, subcontract.id, 'a line item carries its subcontract');
    let one = await servedEqual('sqlerp', `${base}/${id}`);
    assert.equal(one.amount, 18_450.5);
    assert.equal(one.cost_code_id, costCode.id);

    const updated = await ask('mirror', 'sqlerp', 'PATCH', `${base}/${id}`, { quantity: 140, amount: 21_525.6 });
    assert.equal(updated.status, 200, updated.text);
    one = await servedEqual('sqlerp', `${base}/${id}`);
    assert.equal(one.quantity, 140);
    assert.equal(one.amount, 21_525.6);
    assert.equal(one.unit_of_measure, 'LF', 'an update keeps the fields it does not name');
    assert.equal((await servedEqual('sqlerp', `${base}?per_page=100`)).data.length, before + 1);

    const removed = await ask('mirror', 'sqlerp', 'DELETE', `${base}/${id}`);
    assert.equal(removed.status, 204, removed.text);
    const list = await servedEqual('sqlerp', `${base}?per_page=100`);
    assert.equal(list.data.length, before);
    assert.ok(!list.data.some((r) => r.id === id), "the deleted line item is gone from the mirror's list");
  });

  it('a subcontract updated through the mirror is read back from the mirror', async () => {
    const subcontract = (await servedEqual('sqlerp', '/subcontracts?per_page=1')).data[0]!;
    const updated = await ask('mirror', 'sqlerp', 'PUT', `/subcontracts/${String(subcontract.id)}`, {
      status: 'Approved',
      name: 'Concrete foundations, revised scope',
    });
    assert.equal(updated.status, 200, updated.text);
    const one = await servedEqual('sqlerp', `/subcontracts/${String(subcontract.id)}`);
    assert.equal(one.status, 'Approved');
    assert.equal(one.name, 'Concrete foundations, revised scope');
  });
});
