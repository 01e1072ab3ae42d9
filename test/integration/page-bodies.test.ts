// A list page's body goes to Postgres as the bytes that came (the worker does not parse it); objects
// (events, writes, bodies Postgres will not take as they are) go the parsed way. Both must leave the
// same rows: these cases write the same page both ways, into two scopes, and compare.
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { randomUUID } from 'node:crypto';
import { after, before, describe, it } from 'node:test';
import { scanListBody } from '../../connectors/list-scan.ts';
import type { PageRecords } from '../../lib/list-page.ts';
import { createPool, type Pool } from '../../mirror/db/pool.ts';
import { writePage } from '../../mirror/records/page-write.ts';
import { createTestDatabase, type TestDatabase } from '../helpers/database.ts';

describe('page bodies written as received', () => {
  let db: TestDatabase;
  let pool: Pool;
  const accountId = randomUUID();

  before(async () => {
    db = await createTestDatabase('mirror_bodies');
    pool = createPool(db.url);
  });
  after(async () => {
    await pool?.end();
    await db?.drop();
  });

  const customer = (id: string, extra: Record<string, unknown> = {}) => ({
    id,
    source_id: `s-${id}`,
    name: `Customer ${id}`,
    source_create_time: '2023-02-09T12:17:27Z',
    source_update_time: '2023-03-07T13:43:10.123456+02:00',
    source_data: { data: { id, nested: [1, { deep: 'x "quoted" {' }] } },
    ...extra,
  });

  /**
   * The body's records as writePage takes them: scanned (as the client does), its bytes after any
   * byte order mark; with where each record's source data is, unless `split` is false.
   */
  function bodyRecords(text: string | Buffer, split = true): Extract<PageRecords, { bytes: Buffer }> {
    const raw = typeof text === 'string' ? Buffer.from(text) : text;
    const scanned = scanListBody(raw);
    assert.ok(scanned, 'the fixture scans');
    const offsets = scanned.sourceData?.map((at) => at - scanned.start);
    return { bytes: raw.subarray(scanned.start), ids: scanned.ids, ...(split && offsets && { sourceData: offsets }) };
  }

  /** The body's records parsed, as the connector parses a body the scan does not take. */
  function parsed(records: { bytes: Buffer }): Record<string, unknown>[] {
    const value = JSON.parse(records.bytes.toString('utf8')) as Record<string, unknown>[] | { data: Record<string, unknown>[] };
    return Array.isArray(value) ? value : value.data;
  }

  async function write(scope: string, records: PageRecords, resource = 'customers', insertOnly?: boolean) {
    return writePage(pool, {
      key: { accountId, resource, scope },
      pass: { streamId: 0, generation: 1 },
      records,
      ordinalBase: 10,
      ...(insertOnly ? { insertOnly } : {}),
    });
  }

  interface Row {
    id: string;
    source_id: string | null;
    data: Record<string, unknown>;
    source_data: unknown;
    hash: string;
    source_create_time: Date | null;
    source_update_time: Date | null;
    ordinal: number;
  }

  async function rows(scope: string, resource = 'customers'): Promise<Row[]> {
    const { rows } = await pool.query<Row>(
      `SELECT id, source_id, data, source_data, hash, source_create_time, source_update_time, ordinal FROM records
        WHERE account_id = $1 AND resource = $2 AND scope = $3 ORDER BY id`,
      [accountId, resource, scope],
    );
    return rows;
  }

  /**
   * Writes `text` as a body into one scope (split from its source data where it can be, and again
   * whole, into another) and its parsed objects into another; the rows must agree.
   */
  async function bothWays(name: string, text: string | Buffer, resource = 'customers'): Promise<Row[]> {
    const asBody = await write(`${name}-body`, bodyRecords(text), resource);
    const asWhole = await write(`${name}-whole`, bodyRecords(text, false), resource);
    const asObjects = await write(`${name}-objects`, { items: parsed(bodyRecords(text)) }, resource);
    assert.deepEqual(asBody, asObjects, `${name}: counts`);
    assert.deepEqual(asWhole, asObjects, `${name}: counts of the body whole`);
    const [a, w, b] = [await rows(`${name}-body`, resource), await rows(`${name}-whole`, resource), await rows(`${name}-objects`, resource)];
    assert.ok(a.length > 0, `${name}: rows written`);
    assert.deepEqual(a, b, `${name}: rows`);
    assert.deepEqual(w, b, `${name}: rows of the body whole`);
    return a;
  }

  it('writes a list body and a bare array exactly as their parsed objects', async () => {
    const items = [customer('a'), customer('b', { source_update_time: null, source_id: null }), customer('c', { source_data: null })];
    const written = await bothWays('list', JSON.stringify({ data: items, meta: { current_page: 1, has_more_results: false } }));
    assert.deepEqual(
      written.map((r) => [r.id, r.ordinal]),
      [
        ['a', 10],
        ['b', 11],
        ['c', 12],
      ],
    );
    // Milliseconds, as the parsed way keeps source times.
    assert.equal(written[0]!.source_update_time!.toISOString(), '2023-03-07T11:43:10.123Z');
    assert.deepEqual(written[0]!.data, Object.fromEntries(Object.entries(items[0]!).filter(([k]) => k !== 'source_data')));
    await bothWays('bare', `\uFEFF${JSON.stringify(items)}`);
  });

  it('writes records split from their source data as they are whole, wherever the source data is', async () => {
    const sourceData = '{"data":{"id":7,"nested":[1,{"deep":"x \\"quoted\\" {"}]}}';
    const records = [
      `{"id":"first","source_data":${sourceData},"name":"n"}`,
      `{ "name" : "n" , "id" : "middle" , "source_data" : ${sourceData} , "source_id" : "s" }`,
      `{"id":"last","name":"n","source_data" : ${sourceData} }`,
      `{"source_data":null,"id":"null-first"}`,
      `{"id":"number","source_data":12 ,"name":"n"}`,
      `{"id":"string","source_data":"a , b }"}`,
      `{"id":"nested","data":{"source_data":1},"source_data":[{"source_data":2}]}`,
    ];
    const text = `{"data":[${records.join(',')}]}`;
    assert.ok(scanListBody(Buffer.from(text))?.sourceData, 'every record has source data: split');
    const written = await bothWays('split', text);
    assert.deepEqual(
      written.map((r) => [r.id, r.source_data]),
      [
        ['first', JSON.parse(sourceData)],
        ['last', JSON.parse(sourceData)],
        ['middle', JSON.parse(sourceData)],
        ['nested', [{ source_data: 2 }]],
        ['null-first', null],
        ['number', 12],
        ['string', 'a , b }'],
      ],
    );
    assert.deepEqual(written.find((r) => r.id === 'nested')!.data, { id: 'nested', data: { source_data: 1 } });
    // A record without source data, or with two: the body goes whole.
    for (const odd of [`{"id":"none"}`, `{"id":"twice","source_data":1,"source_data":2}`]) {
      const mixed = `{"data":[${records[0]},${odd}]}`;
      assert.equal(scanListBody(Buffer.from(mixed))?.sourceData, undefined, mixed);
      await bothWays(`mixed-${odd.length}`, mixed);
    }
  });

  it('takes the parsed way for bodies Postgres will not take as they are, with the same result', async () => {
    // Repeated ids: the last copy wins.
    const repeated = await bothWays('repeated', JSON.stringify({ data: [customer('a', { name: 'first' }), customer('b'), customer('a', { name: 'last' })] }));
    assert.deepEqual(
      repeated.map((r) => [r.id, r.data.name]),
      [
        ['a', 'last'],
        ['b', 'Customer b'],
      ],
    );
    // A date Postgres refuses and Date.parse rolls over.
    await bothWays('bad-date', JSON.stringify({ data: [customer('a', { source_create_time: '2023-02-30T00:00:00Z' })] }));
    // Bytes that are not UTF-8 in a name.
    const text = Buffer.from(JSON.stringify({ data: [customer('a', { name: 'XX' })] }));
    const at = text.indexOf('XX');
    text[at] = 0xff;
    text[at + 1] = 0xfe;
    const written = await bothWays('not-utf8', text);
    assert.equal(written[0]!.data.name, '\uFFFD\uFFFD');
  });

  it('inserts the pages of a fresh stream, and upserts a page whose record is there after all, with the same result', async () => {
    const page = (ids: string[], name: string) => JSON.stringify({ data: ids.map((id) => customer(id, { name: `${name} ${id}` })) });
    // The same pages into two scopes: upserted always, and inserted only.
    const first = await write('fresh-insert', bodyRecords(page(['a', 'b'], 'first')), 'customers', true);
    assert.deepEqual(first, await write('fresh-upsert', bodyRecords(page(['a', 'b'], 'first'))));
    assert.deepEqual(first, { inserted: 2, updated: 0, unchanged: 0 });
    // The next page overlaps: `b` again, changed. The insert fails, the page is upserted.
    const second = await write('fresh-insert', bodyRecords(page(['b', 'c'], 'second')), 'customers', true);
    assert.deepEqual(second, await write('fresh-upsert', bodyRecords(page(['b', 'c'], 'second'))));
    assert.deepEqual(second, { inserted: 1, updated: 1, unchanged: 0 });
    assert.deepEqual(await rows('fresh-insert'), await rows('fresh-upsert'));
    assert.deepEqual(
      (await rows('fresh-insert')).map((r) => [r.id, r.data.name]),
      [
        ['a', 'first a'],
        ['b', 'second b'],
        ['c', 'second c'],
      ],
    );
    // The objects' path takes the hint too.
    assert.deepEqual(await write('fresh-insert', { items: [customer('c', { name: 'third c' }), customer('d')] }, 'customers', true), {
      inserted: 1,
      updated: 1,
      unchanged: 0,
    });
  });

  it('hashes as the migration that introduced the hash does, volatile URL fields left out', async () => {
    const photo = (id: string, url: string) => ({ id, name: `photo ${id}`, file_url: url, preview_url: `${url}?preview`, source_data: { id } });
    await bothWays('photos', JSON.stringify({ data: [photo('p1', 'https://files.example/1?sig=1')] }), 'photos');
    const before = await pool.query(`SELECT resource, scope, id, hash FROM records WHERE account_id = $1 ORDER BY 1, 2, 3`, [accountId]);
    await pool.query(readFileSync(new URL('../../prisma/migrations/20261123020000_content_hash/migration.sql', import.meta.url), 'utf8'));
    const afterMigration = await pool.query(`SELECT resource, scope, id, hash FROM records WHERE account_id = $1 ORDER BY 1, 2, 3`, [accountId]);
    assert.ok(before.rows.length > 5);
    assert.deepEqual(afterMigration.rows, before.rows);
    // A new signed URL is no change; a new name is.
    const again = await write('photos-body', bodyRecords(JSON.stringify({ data: [photo('p1', 'https://files.example/1?sig=2')] })), 'photos');
    assert.deepEqual(again, { inserted: 0, updated: 0, unchanged: 1 });
    const renamed = await write(
      'photos-body',
      bodyRecords(JSON.stringify({ data: [{ ...photo('p1', 'https://files.example/1?sig=3'), name: 'renamed' }] })),
      'photos',
    );
    assert.deepEqual(renamed, { inserted: 0, updated: 1, unchanged: 0 });
  });
});
