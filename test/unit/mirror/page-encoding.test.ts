// How a page's records are encoded for Postgres (mirror/records/page-encoding.ts): a body as jsonb's version
// byte and the bytes that came, or split from its source data; from reused buffers; a body Postgres
// refuses parsed in the worker, a malformed one a retryable upstream error.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { scanListBody } from '../../../connectors/list-scan.ts';
import { MalformedResponseError } from '../../../lib/errors.ts';
import { BufferPool } from '../../../lib/buffer-pool.ts';
import { encodeBody, encodeObjects, isBodyRefusal, parseBody, rowSources, splitSourceData } from '../../../mirror/records/page-encoding.ts';

const records = [
  { id: 'a', name: 'first', source_data: { raw: [1, { x: '"}' }] } },
  { id: 'b', source_data: null, name: 'second' },
];

/** A body as the connector hands it on: its bytes after any byte order mark, offsets counted from there. */
function scanned(text: string) {
  const raw = Buffer.from(text);
  const list = scanListBody(raw);
  assert.ok(list, text);
  return { bytes: raw.subarray(list.start), ids: list.ids, ...(list.sourceData && { sourceData: list.sourceData.map((at) => at - list.start) }) };
}

describe('page encoding', () => {
  const buffers = new BufferPool();

  it('sends a body whole as the version byte and the bytes that came, leaving the page as it was', () => {
    // A buffer of its own from offset 0: no free byte in front of the body is needed (or written).
    const bytes = Buffer.from(JSON.stringify({ data: [{ id: 'a' }, { id: 'b', source_data: 1 }] }));
    const before = Buffer.from(bytes);
    const rows = encodeBody({ bytes, ids: ['a', 'b'] }, buffers);
    assert.equal(rows.kind, 'body');
    assert.ok(Buffer.isBuffer(rows.param));
    assert.equal(rows.param[0], 1);
    assert.ok(rows.param.subarray(1).equals(bytes));
    assert.ok(bytes.equals(before), 'the page is untouched');
    assert.deepEqual(rows.ids, ['a', 'b']);
    rows.release?.();
  });

  it('splits records from their source data where every record has it, after a byte order mark too', () => {
    for (const text of [JSON.stringify({ data: records, meta: { has_more_results: false } }), `\uFEFF${JSON.stringify(records)}`]) {
      const body = scanned(text);
      assert.ok(body.sourceData, text);
      const rows = encodeBody(body, buffers);
      assert.equal(rows.kind, 'split');
      assert.ok(Buffer.isBuffer(rows.param));
      assert.equal(rows.param[0], 1);
      assert.deepEqual(JSON.parse(rows.param.toString('utf8', 1)), [records.map(({ source_data: _, ...rest }) => rest), records.map((r) => r.source_data)]);
      rows.release?.();
    }
    // The layout alone, with any prefix byte.
    const body = scanned(JSON.stringify(records));
    const split = splitSourceData(body.bytes, body.sourceData!, 0x3e);
    assert.equal(split.toString('utf8', 0, 1), '>');
    assert.equal(split.toString('utf8', 1), '[[{"id":"a","name":"first"},{"id":"b","name":"second"}],[{"raw":[1,{"x":"\\"}"}]},null]]');
  });

  it('writes pages from reused buffers: one handed back serves the next page', () => {
    const body = scanned(JSON.stringify({ data: records }));
    const first = encodeBody(body, buffers);
    const memory = (first.param as Buffer).buffer;
    first.release?.();
    const second = encodeBody({ bytes: body.bytes, ids: body.ids }, buffers);
    assert.equal((second.param as Buffer).buffer, memory, 'the same memory, whole body or split');
    second.release?.();
  });

  it('serialises objects with their source times, the last copy of an id winning', () => {
    const rows = encodeObjects([
      { id: 'a', name: 'old', source_update_time: '2024-01-02T03:04:05+02:00' },
      { id: 'b', source_create_time: 'not a time' },
      { id: 'a', name: 'new', source_update_time: '2024-01-02T03:04:05+02:00' },
    ]);
    assert.equal(rows.kind, 'objects');
    assert.deepEqual(rows.ids, ['a', 'b']);
    assert.deepEqual(JSON.parse(rows.param as string), [
      { k: { id: 'a', name: 'new', source_update_time: '2024-01-02T03:04:05+02:00' }, c: null, u: '2024-01-02T01:04:05.000Z' },
      { k: { id: 'b', source_create_time: 'not a time' }, c: null, u: null },
    ]);
  });

  it('parses a refused body in the worker; malformed JSON is a retryable upstream error', () => {
    assert.deepEqual(parseBody(Buffer.from(JSON.stringify({ data: records })), 'customers page 1'), records);
    assert.deepEqual(parseBody(Buffer.from(JSON.stringify(records)), 'customers page 1'), records);
    const notUtf8 = Buffer.from('[{"id":"a","name":"XX"}]');
    notUtf8[notUtf8.indexOf('XX')] = 0xff;
    assert.deepEqual(parseBody(notUtf8, 'p'), [{ id: 'a', name: '\uFFFDX' }]);
    assert.throws(
      () => parseBody(Buffer.from('{"data":[{"id":"a","n":tru}]}'), 'customers page 3'),
      (error: unknown) => error instanceof MalformedResponseError && error.retryable && /customers page 3/.test(error.message),
    );
    assert.throws(() => parseBody(Buffer.from('{"data":[1]}'), 'p'), MalformedResponseError);
  });

  it("knows Postgres's refusals of a body from other failures", () => {
    for (const code of ['22007', '22008', '22P02', '22021', '22P05', '21000']) assert.ok(isBodyRefusal({ code }), code);
    for (const failure of [{ code: '23505' }, { code: '40001' }, new Error('connection lost'), undefined]) assert.equal(isBodyRefusal(failure), false);
  });

  it('reads each layout from the parameter it is given', () => {
    for (const [kind, rows] of Object.entries(rowSources)) assert.match(rows('$9'), /\$9::jsonb/, kind);
  });
});
