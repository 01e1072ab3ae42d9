import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { scanListBody } from '../../../connectors/list-scan.ts';
import { splitSourceData } from '../../../mirror/records/page-encoding.ts';
import { listResponseSchema } from '../../../connectors/schemas.ts';

const scan = (text: string) => scanListBody(Buffer.from(text));

/** What the ordinary path (JSON.parse, then the list schema) makes of a body. */
function parsed(text: string): { ids: string[]; hasMore: boolean | null | undefined; currentPage: number | null | undefined } | undefined {
  let body: unknown;
  try {
    body = JSON.parse(text.replace(/^\uFEFF/, ''));
  } catch {
    return undefined;
  }
  const r = listResponseSchema.safeParse(body);
  if (!r.success) return undefined;
  return { ids: r.data.data.map((o) => o.id), hasMore: r.data.meta?.has_more_results, currentPage: r.data.meta?.current_page };
}

describe('scanListBody', () => {
  it('reads ids and meta as JSON.parse and the schema do, from bodies of every accepted shape', () => {
    const record = (id: string, extra = '') =>
      `{"id":"${id}","source_id":"s-${id}","source_create_time":null,"source_update_time":"2024-01-02T03:04:05Z"${extra}}`;
    const bodies = [
      `{"data":[${record('a')},${record('b')}],"meta":{"current_page":2,"has_more_results":true}}`,
      ` \n{ "meta" : { "has_more_results" : false } , "data" : [ ${record('x')} ] }\n`,
      `[${record('1')},${record('2')},${record('3')}]`,
      `{"data":[],"meta":{}}`,
      `[]`,
      `\uFEFF{"data":[${record('bom')}]}`,
      // Nested values of every kind are skipped, strings with brackets, quotes and escapes too.
      `{"data":[${record('n', ',"source_data":{"a":[1,{"b":"}]\\\\\\"{["},null,true,-1.5e3],"id":"not-this-one"},"name":"x\\"y"')}],"extra":[{"data":1}]}`,
      `{"data":[{"name":"first","id":"late-id"}]}`,
      // Fields of a record named like the list's own keys.
      `{"data":[{"id":"d","data":{"x":[1]},"meta":{"has_more_results":"not the list's"}}],"meta":{"has_more_results":true}}`,
      `{"data":[{"id":"ünïcødé-✓"}]}`,
      `{"data":[{"id":"t","source_create_time":"2024-01-02T03:04:05.123456+05:30","source_update_time":"2024-01-02T03:04:05-08:00"}]}`,
    ];
    for (const text of bodies) {
      const want = parsed(text);
      assert.ok(want, `fixture must be a valid list: ${text}`);
      const got = scan(text);
      assert.ok(got, `scanned: ${text}`);
      assert.deepEqual(got.ids, want.ids, text);
      assert.equal(got.meta?.has_more_results, want.hasMore, text);
      assert.equal(got.meta?.current_page, want.currentPage, text);
    }
  });

  it('leaves what it cannot vouch for to the ordinary parse', () => {
    const unsupported = [
      `{"data":[{"id":5}]}`, // not a string: the schema refuses it
      `{"data":[{"id":""}]}`,
      `{"data":[{"name":"no id"}]}`,
      `{"data":[{"id":"a","source_id":7}]}`,
      `{"data":[{"id":"a","source_update_time":{"t":1}}]}`,
      // Source times Postgres might read otherwise than Date.parse: no zone, other formats, words.
      `{"data":[{"id":"a","source_update_time":"2024-01-02T03:04:05"}]}`,
      `{"data":[{"id":"a","source_create_time":"2024-01-02 03:04:05Z"}]}`,
      `{"data":[{"id":"a","source_create_time":"today"}]}`,
      `{"data":[{"id":"a","source_create_time":"2024-01-02T03:04:05.1234567Z"}]}`,
      `{"data":[{"id":"a","source_create_time":""}]}`,
      `{"data":[{"id":"a\\u0062"}]}`, // an escaped id: decoding it is JSON.parse's job
      `{"data":[{"id":"a","id":"b"}]}`,
      `{"data":[1,2]}`,
      `{"data":{"id":"a"}}`,
      `{"meta":{"has_more_results":false}}`,
      `{"data":[],"meta":{"has_more_results":"yes"}}`,
      `{"data":[],"meta":null}`,
      `{"data":[{"id":"a"}]} trailing`,
      `{"data":[{"id":"a"}]`,
      `{"data":[{"id":"a}]}`,
      `"just a string"`,
      ``,
    ];
    for (const text of unsupported) assert.equal(scan(text), undefined, text);
  });

  it('splits records from their source data, wherever it is in them, into JSON that parses to both', () => {
    const sourceData = '{"data":{"id":7,"nested":[1,{"deep":"x \\"quoted\\" }{"}]}}';
    const records = [
      `{"id":"first","source_data":${sourceData},"name":"n"}`,
      `{ "name" : "n" , "id" : "middle" , "source_data" : ${sourceData} , "source_id" : "s" }`,
      `{"id":"last","name":"n","source_data" : ${sourceData} }`,
      `{"source_data":null}`.replace('{', '{"id":"only-but-id",'),
      `{"source_data":true,"id":"first-scalar"}`,
      `{"id":"number","source_data":-1.5e3 ,"name":"n"}`,
      `{"id":"string","source_data":"a , b }"}`,
      `{"id":"nested","data":{"source_data":1},"source_data":[{"source_data":2}],"z":{}}`,
      `{"source_data":{}, "id":"spaced" }`,
    ];
    for (const body of [`{"data":[${records.join(',')}],"meta":{"has_more_results":false}}`, `\uFEFF [ ${records.join(' ,\n')} ]`]) {
      const raw = Buffer.from(body);
      const got = scanListBody(raw);
      assert.ok(got?.sourceData, body);
      const split = splitSourceData(raw, got.sourceData, 0x3e);
      assert.equal(split.toString('utf8', 0, 1), '>');
      const parsedRecords = records.map((r) => JSON.parse(r) as Record<string, unknown>);
      assert.deepEqual(JSON.parse(split.toString('utf8', 1)), [
        parsedRecords.map(({ source_data: _, ...rest }) => rest),
        parsedRecords.map((r) => r.source_data),
      ]);
    }
    // Where a record has no source data, or two, there is nothing to split: the body goes whole.
    for (const odd of [`{"id":"none"}`, `{"id":"twice","source_data":1,"source_data":2}`]) {
      assert.equal(scan(`[${records[0]},${odd}]`)?.sourceData, undefined, odd);
      assert.equal(scan(`[${odd},${records[0]}]`)?.sourceData, undefined, odd);
    }
    assert.equal(scan('{"data":[]}')?.sourceData, undefined);
  });

  it('scans a page of 1000 records with source data', () => {
    const items = Array.from({ length: 1000 }, (_, i) => ({
      id: `id-${i}`,
      source_id: String(30_000_000 + i),
      source_create_time: '2023-02-09T12:17:27Z',
      source_update_time: null,
      name: `Customer "${i}" \\ {[`,
      source_data: { data: { id: i, nested: [{ deep: [1, 2, { x: 'y' }] }], note: 'a "quoted" word, a } brace' } },
    }));
    const text = JSON.stringify({ data: items, meta: { current_page: 4, has_more_results: true } });
    const got = scan(text);
    assert.ok(got);
    assert.deepEqual(
      got.ids,
      items.map((i) => i.id),
    );
    assert.equal(got.meta?.has_more_results, true);
  });
});
