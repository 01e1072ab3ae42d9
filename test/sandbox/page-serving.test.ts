// List pages are written straight into one buffer, record by record, and recently served records
// are reused: the bytes must stay exactly those of JSON.stringify over records built the plain way,
// and no change may ever be answered with an old text.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import type { LinkedAccount } from '../../sandbox/auth-and-link/accounts.ts';
import { topLevelResources, type ResourceName } from '../../sandbox/data/catalog.ts';
import { Dataset, type Scope } from '../../sandbox/data/dataset.ts';
import type { Fields } from '../../sandbox/data/generators.ts';
import { isoSeconds } from '../../sandbox/data/iso-time.ts';
import { JsonWriter } from '../../sandbox/resources/json-writer.ts';
import { RecordCache } from '../../sandbox/resources/record-cache.ts';
import { writeRecord } from '../../sandbox/resources/record-json.ts';
import { pathContext } from '../../sandbox/resources/scope.ts';
import { withSourceData, type SourceDataMode } from '../../sandbox/resources/source-data.ts';
import type { Sandbox } from '../../sandbox/server.ts';
import { sourceSystemProfiles, type SourceSystemProfile } from '../../sandbox/source-systems/profiles.ts';
import { admin, call, link, start, type Linked } from './helpers.ts';

type CacheStats = { capacity_bytes: number; allocated_bytes: number; used_bytes: number; records: number; hits: number; misses: number };

const modes: Array<SourceDataMode | null> = [
  null,
  { only: null, withPath: true, exclude: [] },
  { only: null, withPath: false, exclude: [] },
  { only: ['name', 'Name', 'NAME', 'id', 'Id', 'ListID', 'email', 'createdAt', 'created_at', 'TimeCreated'], withPath: true, exclude: [] },
  { only: null, withPath: true, exclude: ['name', 'Name', 'updatedAt', 'updated_at', 'TimeModified', 'custom_fields', '__typename', 'attributes'] },
];

function written(
  profile: SourceSystemProfile,
  resource: ResourceName,
  fields: Fields,
  mode: SourceDataMode | null,
  account: LinkedAccount,
  scope: Scope,
): string {
  const w = new JsonWriter(16);
  writeRecord(w, profile, resource, fields, mode, mode ? pathContext(account, scope) : {});
  return w.take().toString('utf8');
}

function plain(
  profile: SourceSystemProfile,
  resource: ResourceName,
  fields: Fields,
  mode: SourceDataMode | null,
  account: LinkedAccount,
  scope: Scope,
): string {
  return JSON.stringify(mode ? withSourceData(profile, resource, fields, mode, pathContext(account, scope)) : fields);
}

function accountOf(profile: SourceSystemProfile): LinkedAccount {
  return { key: `pages|${profile.slug}`, profile, companies: [{ id: 'c0', source_id: 'CO-1', name: 'Company' }] } as unknown as LinkedAccount;
}

test('isoSeconds is Date#toISOString for whole seconds', () => {
  const probes = [0, 1, 59, 60, 3599, 3600, 86_399, 86_400, 951_782_400, 951_868_799, 1_672_531_200, 4_102_444_800, 253_402_300_799];
  for (let i = 0; i < 20_000; i++) probes.push(Math.floor(Math.random() * 253_402_300_800));
  for (const s of probes) assert.equal(isoSeconds(s), new Date(s * 1000).toISOString(), String(s));
  // Outside the fast range it is toISOString itself, errors included.
  assert.equal(isoSeconds(-1), new Date(-1000).toISOString());
  assert.equal(isoSeconds(1.5), new Date(1500).toISOString());
});

describe('a record written into a page is JSON.stringify of the record as the plain way builds it', () => {
  const d = new Dataset({
    seed: 5,
    size: 12,
    fileUrls: (ref) => ({ url: `https://files.example/${ref.filename}`, preview_url: `https://files.example/p/${ref.filename}` }),
  });

  test('every source system, every resource, every source-data mode', () => {
    for (const profile of sourceSystemProfiles) {
      const account = accountOf(profile);
      const base: Scope = { company: 0, project: null, parent: null };
      const project = d.find(account, 'projects', base, d.idOf(account, 'projects', 0));
      for (const resource of topLevelResources) {
        const support = profile.resources[resource];
        if (!support) continue;
        const scope = support.scope === 'project' ? { ...base, project } : base;
        for (const fields of d.list(account, resource, [scope], { offset: 0, limit: 12 }).items) {
          for (const mode of modes)
            assert.equal(
              written(profile, resource, fields, mode, account, scope),
              plain(profile, resource, fields, mode, account, scope),
              `${profile.slug} ${resource}`,
            );
        }
      }
    }
  });

  test('odd records: own source_data, array-index and __proto__ names, names that collide natively, undefined, non-ASCII, escapes, empty', () => {
    const odd: Fields[] = [
      {},
      { source_data: { x: 1 }, name: 'has its own' },
      { id: 'a', source_id: '12', '7': 'index', name: 'n' },
      { id: 'a', source_id: 'x', created_at: 'theirs', updated_at: null, time_created: 'pascal', createdAt: 'camel', name: 'n' },
      { id: 'a', source_id: 'x', completion_date: 'a', completion_date_2: 'b', completiondate: 'c' },
      { id: 'a', source_id: 'x', custom_fields: { mine: true }, KEYID: 3, EditSequence: 'e', __typename: 't', attributes: 'a', ListID: 'l', Id: 'i' },
      { id: 'a', source_id: 'x', nothing: undefined, fn: () => 1, sym: Symbol('s'), list: [undefined, null, 1, { a: undefined }] },
      { id: 'a', source_id: 'x', name: 'Zoë “quoted” \\ back\nline\u0001 \ud800 lone', emoji: '🏗️' },
      { id: 'a', source_id: 'x', n: -0, big: 1e21, tiny: 5e-324, nan: Number.NaN, inf: Infinity, when: new Date(0) },
      { id: 'a', source_id: null, source_create_time: undefined, name: 'no source id' },
    ];
    const protoKey: Fields = { id: 'a', source_id: 'x' };
    Object.defineProperty(protoKey, '__proto__', { value: { inner: 1 }, enumerable: true, configurable: true, writable: true });
    odd.push(protoKey);
    for (const profile of sourceSystemProfiles) {
      const account = accountOf(profile);
      const scope: Scope = { company: 0, project: null, parent: null };
      for (const resource of ['customers', 'projects'] as const) {
        for (const fields of odd)
          for (const mode of modes)
            assert.equal(
              written(profile, resource, fields, mode, account, scope),
              plain(profile, resource, fields, mode, account, scope),
              `${profile.slug} ${resource} ${Object.keys(fields).join(',')}`,
            );
      }
    }
  });

  test('eachInPage hands out what list gives; only records that are a function of list and index are keyed', () => {
    const profile = sourceSystemProfiles.find((p) => p.slug === 'docvault')!;
    assert.ok(profile.resources.files && profile.resources.projects);
    const account = accountOf(profile);
    const base: Scope = { company: 0, project: null, parent: null };
    const project = d.find(account, 'projects', base, d.idOf(account, 'projects', 0));
    for (const resource of ['projects', 'files'] as const) {
      const scope = profile.resources[resource]!.scope === 'project' ? { ...base, project } : base;
      const listed = d.list(account, resource, [scope], { offset: 2, limit: 5 });
      const seen: Array<{ fields: Fields | null; list: string | null; index: number }> = [];
      const r = d.eachInPage(
        account,
        resource,
        [scope],
        { offset: 2, limit: 5 },
        { has: () => false, item: (fields, list, index) => seen.push({ fields, list, index }) },
      );
      assert.equal(r.total, listed.total);
      assert.equal(r.returned, listed.items.length);
      assert.deepEqual(
        seen.map((s) => s.fields),
        listed.items,
      );
      assert.deepEqual(
        seen.map((s) => s.index),
        [2, 3, 4, 5, 6].slice(0, listed.items.length),
      );
      // Files carry signed storage URLs, which expire: never keyed.
      for (const s of seen) assert.equal(s.list === null, resource === 'files', resource);
    }
  });
});

describe('the record cache', () => {
  test('holds records by segment and index, recycles its oldest slab when full, forgets everything on a change', () => {
    const cache = new RecordCache(2 * 1024 * 1024);
    const text = (i: number) => `{"i":${i},"pad":"${'x'.repeat(1000 + (i % 7))}"}`;
    const keep = (segment: ReturnType<RecordCache['segment']>, i: number) => {
      const w = new JsonWriter(16);
      w.text(text(i));
      cache.keep(segment, i, w, 0);
    };
    const read = (segment: ReturnType<RecordCache['segment']>, i: number) => {
      const at = cache.find(segment, i);
      if (at < 0) return undefined;
      const w = new JsonWriter(16);
      cache.copyTo(at, w);
      return w.take().toString('utf8');
    };
    cache.sync(1);
    const a = cache.segment('a');
    for (let i = 0; i < 1500; i++) keep(a, i);
    assert.equal(read(a, 1499), text(1499));
    assert.equal(read(a, 700), text(700));
    for (let i = 1500; i < 2500; i++) keep(a, i);
    // Three slabs' worth went in; two fit: the first ~1000 records went with the first slab.
    assert.equal(read(a, 5), undefined);
    assert.equal(read(a, 2499), text(2499));
    assert.ok(cache.allocated <= 2 * 1024 * 1024);
    const b = cache.segment('b');
    keep(b, 5);
    assert.equal(read(b, 5), text(5));
    assert.equal(read(a, 5), undefined, 'segments are apart');
    cache.sync(1);
    assert.equal(read(b, 5), text(5), 'same version: kept');
    cache.sync(2);
    assert.equal(read(cache.segment('b'), 5), undefined, 'a change forgets everything');
    assert.equal(read(cache.segment('a'), 2499), undefined);
    assert.equal(cache.entries, 0);
    assert.ok(!new RecordCache(512 * 1024).enabled, 'under 1 MiB: off');
  });
});

describe('pages served again, and after changes', () => {
  let sb: Sandbox;
  let uncached: Sandbox;
  let field: Linked;
  let fieldUncached: Linked;
  let erp: Linked;
  before(async () => {
    // 1 MiB: a list of 150 customers (or invoices) fits in half of it, and all the variants below
    // do not fit in it at once, so pages come partly from the cache, partly written anew, and its
    // one slab gets recycled.
    sb = await start({ seed: 9, size: 150, recordCacheMb: 1 });
    uncached = await start({ seed: 9, size: 150, recordCacheMb: 0 });
    field = await link(sb, 'fieldops', 'same');
    fieldUncached = await link(uncached, 'fieldops', 'same');
    erp = await link(sb, 'sqlerp');
  });
  after(async () => {
    await Promise.all([sb.close(), uncached.close()]);
  });

  const withSource = (l: Linked, extra: Record<string, string> = {}) => ({ ...l.headers, 'include-source-data': 'true', ...extra });

  test('the same bytes from the cache as freshly written, with the content type of JSON', async () => {
    const variants: Array<Record<string, string>> = [
      {},
      { 'include-source-data-path': 'false' },
      { 'exclude-source-data': 'name' },
      { 'exclude-source-data': 'email,phone' },
      { 'include-source-data': 'name,id' },
      { 'include-source-data': 'email' },
    ];
    for (const path of [
      '/customers?per_page=100',
      '/customers?per_page=100&page=2',
      '/customers?per_page=7&page=11',
      '/customers?per_page=1000',
      '/customers?per_page=1000&page=2',
    ]) {
      for (const extra of variants) {
        const fresh = await call(uncached, 'GET', path, { headers: withSource(fieldUncached, extra) });
        const first = await call(sb, 'GET', path, { headers: withSource(field, extra) });
        const again = await call(sb, 'GET', path, { headers: withSource(field, extra) });
        assert.equal(first.status, 200);
        assert.equal(first.headers.get('content-type'), 'application/json; charset=utf-8');
        assert.equal(first.text, fresh.text, path);
        assert.equal(again.text, fresh.text, path);
      }
      const bare = await call(sb, 'GET', path, { headers: field.headers });
      assert.equal(bare.text, (await call(uncached, 'GET', path, { headers: fieldUncached.headers })).text);
      assert.ok(!bare.text.includes('source_data'));
    }
    const stats = (await admin(sb, 'GET', '/_admin/stats')).body.record_cache as CacheStats;
    assert.ok(stats.hits > 1000, `served from the cache: ${JSON.stringify(stats)}`);
    assert.ok(stats.used_bytes <= stats.capacity_bytes && stats.capacity_bytes === 1024 * 1024);
    assert.ok(stats.records < 150 * (variants.length + 1), `the slab was recycled: ${JSON.stringify(stats)}`);
    const off = (await admin(uncached, 'GET', '/_admin/stats')).body.record_cache as CacheStats;
    assert.deepEqual([off.hits, off.records, off.allocated_bytes], [0, 0, 0]);
  });

  test('a list bigger than half the cache is not kept', async () => {
    const big = await start({ seed: 9, size: 1000, recordCacheMb: 1 });
    try {
      const l = await link(big, 'fieldops');
      const first = await call(big, 'GET', '/customers?per_page=1000', { headers: withSource(l) });
      const again = await call(big, 'GET', '/customers?per_page=1000', { headers: withSource(l) });
      assert.equal(again.text, first.text);
      const stats = (await admin(big, 'GET', '/_admin/stats')).body.record_cache as CacheStats;
      assert.deepEqual([stats.hits, stats.records], [0, 0]);
    } finally {
      await big.close();
    }
  });

  test('a change is served at once, in the list it was made in and in lists that embed it', async () => {
    const page = await call(sb, 'GET', '/customers?per_page=50', { headers: withSource(field) });
    assert.equal((await call(sb, 'GET', '/customers?per_page=50', { headers: withSource(field) })).text, page.text);
    const target = page.body.data[10]!;
    const patched = await admin(sb, 'PATCH', '/_admin/objects', {
      account_token: field.token,
      resource: 'customers',
      id: target.id,
      patch: { name: 'Renamed Customer LLC' },
    });
    assert.equal(patched.status, 200);
    const after = await call(sb, 'GET', '/customers?per_page=50', { headers: withSource(field) });
    assert.equal(after.body.data[10]!.name, 'Renamed Customer LLC');
    assert.equal(((after.body.data[10]!.source_data as Fields).data as Fields).name, 'Renamed Customer LLC');
    assert.deepEqual(after.body.data[11], page.body.data[11]);

    // An invoice embeds its line items: changing a line item changes the invoice's text.
    const invoices = await call(sb, 'GET', '/ap-invoices?per_page=5', { headers: erp.headers });
    const hits = async () => ((await admin(sb, 'GET', '/_admin/stats')).body.record_cache as CacheStats).hits;
    const before = await hits();
    assert.equal((await call(sb, 'GET', '/ap-invoices?per_page=5', { headers: erp.headers })).text, invoices.text);
    assert.equal(await hits(), before + 5, 'the invoices came from the cache');
    const invoice = invoices.body.data[0]!;
    const lines = await call(sb, 'GET', `/ap-invoices/${String(invoice.id)}/line-items`, { headers: erp.headers });
    const line = lines.body.data[0]!;
    const changed = await admin(sb, 'PATCH', '/_admin/objects', {
      account_token: erp.token,
      resource: 'ap-invoice-line-items',
      parent_id: invoice.id,
      id: line.id,
      patch: { description: 'Changed line', amount: 1234567.5 },
    });
    assert.equal(changed.status, 200);
    const linesAfter = await call(sb, 'GET', `/ap-invoices/${String(invoice.id)}/line-items`, { headers: erp.headers });
    assert.equal(linesAfter.body.data[0]!.description, 'Changed line');
    const invoicesAfter = await call(sb, 'GET', '/ap-invoices?per_page=5', { headers: erp.headers });
    const embedded = invoicesAfter.body.data[0]!.line_items as Fields[];
    assert.equal(embedded[0]!.description, 'Changed line');
    assert.notEqual(invoicesAfter.body.data[0]!.subtotal_amount, invoice.subtotal_amount);
    assert.deepEqual(invoicesAfter.body.data[1], invoices.body.data[1]);
  });

  test('body faults still corrupt a list page, once', async () => {
    await admin(sb, 'POST', '/_admin/faults', { match: { path: '/customers' }, kind: 'truncated-json', times: 1 });
    const broken = await call(sb, 'GET', '/customers?per_page=20', { headers: field.headers });
    assert.equal(broken.status, 200);
    assert.throws(() => JSON.parse(broken.text));
    const whole = await call(sb, 'GET', '/customers?per_page=20', { headers: field.headers });
    assert.equal(whole.body.data.length, 20);
  });
});
