// The text of the mirror's answers next to the upstream's: equal as JSON, and `source_data` the last
// key of each object, where the upstream puts it (the other keys come in jsonb's order, a choice
// docs/drop-in.md gives with its measured figures). Lists (served by position and by OFFSET) and
// single objects, with source data and without.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { linkAndSync, startHarness, type Harness } from '../helpers/harness.ts';

type Json = Record<string, unknown>;

describe("answers' text: source_data last, as the upstream's", { timeout: 300_000 }, () => {
  let h: Harness;
  let token: string;

  before(async () => {
    h = await startHarness({ sandbox: { size: 12 } });
    ({ accountToken: token } = await linkAndSync(h, 'crmcloud', 'answer-text'));
  });

  after(async () => {
    await h?.close();
  });

  async function both(path: string, headers: Record<string, string>): Promise<{ mirror: string; upstream: string }> {
    const ask = async (base: string, auth: Record<string, string>) => {
      const res = await fetch(`${base}${path}`, { headers: { ...auth, 'account-token': token, ...headers } });
      const text = await res.text();
      assert.equal(res.status, 200, `${base}${path}: ${text}`);
      return text;
    };
    const [mirror, upstream] = await Promise.all([ask(h.apiUrl, h.clientHeaders), ask(h.sandbox.url, h.upstreamHeaders)]);
    return { mirror, upstream };
  }

  const objectsOf = (body: Json): Json[] => (Array.isArray(body.data) ? (body.data as Json[]) : [body]);

  for (const [what, path] of [
    ['page 1', '/customers?page=1&per_page=5'],
    ['page 2', '/customers?page=2&per_page=5'],
    ['a filtered page', `/customers?per_page=5&filters=${encodeURIComponent(JSON.stringify([{ field: 'name', operator: '!=', value: '' }]))}`],
  ] as const) {
    it(`${what}: equal as JSON, source_data last`, async () => {
      const withSource = await both(path, { 'include-source-data': 'true' });
      const mine = JSON.parse(withSource.mirror) as Json;
      const theirs = JSON.parse(withSource.upstream) as Json;
      assert.deepEqual(mine, theirs);
      const objects = objectsOf(mine);
      assert.ok(objects.length > 0);
      for (const [i, o] of objects.entries()) {
        assert.equal(Object.keys(objectsOf(theirs)[i]!).at(-1), 'source_data', 'the upstream puts source_data last');
        assert.equal(Object.keys(o).at(-1), 'source_data', `${String(o.id)}: source_data is the last key`);
      }
      const without = await both(path, {});
      assert.deepEqual(JSON.parse(without.mirror), JSON.parse(without.upstream));
      assert.ok(!without.mirror.includes('"source_data"'));
    });
  }

  it('a single object: equal as JSON, source_data last', async () => {
    const list = JSON.parse((await both('/customers?per_page=1', {})).upstream) as Json;
    const id = String(objectsOf(list)[0]!.id);
    const one = await both(`/customers/${id}`, { 'include-source-data': 'true' });
    const mine = JSON.parse(one.mirror) as Json;
    assert.deepEqual(mine, JSON.parse(one.upstream));
    assert.equal(Object.keys(mine).at(-1), 'source_data');
  });
});
