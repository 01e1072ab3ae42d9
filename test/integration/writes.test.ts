// Writes through the mirror: forwarded to the upstream with the contract's headers, the answer
// relayed as it came, and the returned object readable from the mirror right away. A refused write
// leaves the mirror as it was.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { firstProjectId, linkAndSync, startHarness, type Harness } from '../helpers/harness.ts';

describe('writes through the mirror', { timeout: 240_000 }, () => {
  let h: Harness;
  let token: string;
  let accountId: string;
  let projectId: string;

  before(async () => {
    h = await startHarness({ sandbox: { size: 8 } });
    ({ accountId, accountToken: token } = await linkAndSync(h, 'buildpro', 'writes'));
    projectId = await firstProjectId(h, accountId);
  });

  after(async () => {
    await h?.close();
  });

  const mirror = (method: string, url: string, body?: unknown, headers: Record<string, string> = {}) =>
    fetch(`${h.apiUrl}${url}`, {
      method,
      headers: { ...h.clientHeaders, 'account-token': token, ...(body === undefined ? {} : { 'content-type': 'application/json' }), ...headers },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
  const upstream = (url: string, headers: Record<string, string> = {}) =>
    fetch(`${h.sandbox.url}${url}`, { headers: { ...h.upstreamHeaders, 'account-token': token, ...headers } });
  const vendorCount = async () =>
    (await h.services.pool.query<{ n: number }>(`SELECT count(*)::int AS n FROM records WHERE account_id = $1 AND resource = 'vendors'`, [accountId])).rows[0]!
      .n;

  it('creates and updates a vendor upstream and serves it from the mirror at once', async () => {
    const before = await vendorCount();
    const created = await mirror('POST', '/vendors', { name: 'Acme Concrete', email: 'ap@acme.example' });
    assert.equal(created.status, 201, await created.clone().text());
    const vendor = (await created.json()) as { id: string; name: string };
    assert.equal(vendor.name, 'Acme Concrete');
    assert.equal(await vendorCount(), before + 1);

    const read = await mirror('GET', `/vendors/${vendor.id}`, undefined, { 'include-source-data': 'true' });
    assert.equal(read.status, 200);
    const truth = await upstream(`/vendors/${vendor.id}`, { 'include-source-data': 'true' });
    assert.deepEqual(await read.json(), await truth.json(), 'the mirror serves exactly what the upstream now holds');

    const updated = await mirror('PATCH', `/vendors/${vendor.id}`, { name: 'Acme Concrete Ltd' });
    assert.equal(updated.status, 200, await updated.clone().text());
    const again = (await (await mirror('GET', `/vendors/${vendor.id}`)).json()) as { name: string };
    assert.equal(again.name, 'Acme Concrete Ltd');
    // A new record goes after the ones the upstream listed before it.
    const list = (await (await mirror('GET', '/vendors?per_page=1000')).json()) as { data: { id: string }[] };
    assert.equal(list.data.at(-1)?.id, vendor.id);
  });

  it('creates a budget line item in the project named by Project-Id', async () => {
    const res = await mirror(
      'POST',
      '/budget-line-items',
      { name: 'Formwork', original_amount: 1200, quantity: 3, unit_cost: 400, unit_of_measure: 'ea' },
      { 'project-id': projectId },
    );
    assert.equal(res.status, 201, await res.clone().text());
    const body = (await res.json()) as { data: { id: string }[]; meta: unknown };
    assert.equal(body.data.length, 1, 'the contract answers a one-item list');
    const read = await mirror('GET', `/budget-line-items/${body.data[0]!.id}`, undefined, { 'project-id': projectId });
    assert.equal(read.status, 200);
    assert.equal(((await read.json()) as { name: string }).name, 'Formwork');
  });

  it("relays the upstream's refusal and writes nothing; Ignore-Prohibited-Fields is passed on", async () => {
    const before = await vendorCount();
    const refused = await mirror('POST', '/vendors', { name: 'No Tax Number', tax_number: 'X-1' });
    assert.equal(refused.status, 400);
    assert.match(((await refused.json()) as { message: string }).message, /tax_number/);
    assert.equal(await vendorCount(), before, 'the mirror is unchanged');

    const accepted = await mirror('POST', '/vendors', { name: 'No Tax Number', tax_number: 'X-1' }, { 'ignore-prohibited-fields': 'true' });
    assert.equal(accepted.status, 201, await accepted.clone().text());
    assert.equal(await vendorCount(), before + 1);
  });

  it('answers a write of a resource the source system cannot write with its error, mirror unchanged', async () => {
    const { rows } = await h.services.pool.query<{ n: number }>(`SELECT count(*)::int AS n FROM records WHERE account_id = $1`, [accountId]);
    const res = await mirror('POST', '/projects', { name: 'Not writable' });
    assert.ok(res.status >= 400 && res.status < 500, `status ${res.status}`);
    assert.ok(((await res.json()) as { message?: string }).message, 'a message says why');
    const after = await h.services.pool.query<{ n: number }>(`SELECT count(*)::int AS n FROM records WHERE account_id = $1`, [accountId]);
    assert.equal(after.rows[0]!.n, rows[0]!.n);
  });
});
