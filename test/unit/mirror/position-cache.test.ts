// Held position chunks (mirror/reads/position-cache.ts): each list packed into one string, read back item by
// item exactly as it was, whatever the lengths of the ids. No I/O.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { CachedChunk } from '../../../mirror/reads/position-cache.ts';

describe('held position chunks', () => {
  it('give back every id and ordinal as they were read, and find the objects of the rows that are the records they name', () => {
    const ids = ['c00001', '', 'é-ü-✓', 'c0000', 'c00001x', '0a3b9c1e-5a44-4a4d-9b8e-0f3c2a1b7d66'];
    const ordinals = ['0', '1', '2', '9007199254740993', '4', '5'];
    const chunk = new CachedChunk(ids, ordinals);
    assert.equal(chunk.size, ids.length);
    ids.forEach((id, i) => {
      assert.equal(chunk.id(i), id);
      assert.equal(chunk.ordinal(i), ordinals[i]);
    });
    // Rows as the page's statement sends them: the object's text, U+0001, the id.
    const object = (id: string) => JSON.stringify({ id, name: `n\u0001${id}` });
    const rows = (xs: string[]) => xs.map((id) => [`${object(id)}\u0001${id}`] as [string]);
    const objectsOf = (at: number, xs: string[], from: number, count: number) => {
      const objects = ['kept'];
      return chunk.objectsOf(at, rows(xs), from, count, objects) ? objects : objects.length === 1 ? false : objects;
    };
    // Every run of them, from any row on: their objects, without the tails, after what was there.
    for (let at = 0; at <= ids.length; at++)
      for (let count = 0; at + count <= ids.length; count++) {
        const want = ['kept', ...ids.slice(at, at + count).map(object)];
        assert.deepEqual(objectsOf(at, ids.slice(at, at + count), 0, count), want, `${at}+${count}`);
        assert.deepEqual(objectsOf(at, ['x', ...ids.slice(at, at + count)], 1, count), want, `${at}+${count} from 1`);
      }
    // The same text cut elsewhere, a prefix, a longer id, a neighbour's id, one id changed, past the
    // end: not the ids, and nothing pushed.
    assert.equal(objectsOf(3, ['c000', '0c00001x'], 0, 2), false);
    assert.equal(objectsOf(0, ['c0000'], 0, 1), false);
    assert.equal(objectsOf(3, ['c00001'], 0, 1), false);
    assert.equal(objectsOf(4, ['c00001'], 0, 1), false);
    assert.equal(objectsOf(0, ['c00001', '', 'é-ü-✗'], 0, 3), false);
    assert.equal(objectsOf(5, [ids[5]!, 'more'], 0, 2), false);
    assert.equal(objectsOf(0, ['c00001'], 0, 2), false);
    // An id that ends in a held one after a U+0001 of its own: the object's text would keep the rest.
    assert.equal(chunk.objectsOf(0, [[`{}\u0001x\u0001c00001`]], 0, 1, []), false);
    // A row with no tail, or the tail's mark missing.
    assert.equal(chunk.objectsOf(0, [['c00001']], 0, 1, []), false);
    assert.equal(chunk.objectsOf(0, [['{}c00001']], 0, 1, []), false);
  });
});
