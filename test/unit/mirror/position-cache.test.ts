// Held position chunks (mirror/position-cache.ts): each list packed into one string, read back item by
// item exactly as it was, whatever the lengths of the ids. No I/O.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { CachedChunk } from '../../../mirror/position-cache.ts';

describe('held position chunks', () => {
  it('give back every id and ordinal as they were read, and compare ids without making them', () => {
    const ids = ['c00001', '', 'é-ü-✓', 'c0000', 'c00001x', '0a3b9c1e-5a44-4a4d-9b8e-0f3c2a1b7d66'];
    const ordinals = ['0', '1', '2', '9007199254740993', '4', '5'];
    const chunk = new CachedChunk(ids, ordinals);
    assert.equal(chunk.size, ids.length);
    ids.forEach((id, i) => {
      assert.equal(chunk.id(i), id);
      assert.equal(chunk.ordinal(i), ordinals[i]);
    });
    const rows = (xs: string[]) => xs.map((id) => [id, '{}'] as [string, string]);
    // Every run of them, from any row on.
    for (let at = 0; at <= ids.length; at++)
      for (let count = 0; at + count <= ids.length; count++) {
        assert.equal(chunk.idsAre(at, rows(ids.slice(at, at + count)), 0, count), true, `${at}+${count}`);
        assert.equal(chunk.idsAre(at, rows(['x', ...ids.slice(at, at + count)]), 1, count), true, `${at}+${count} from 1`);
      }
    // The same text cut elsewhere, a prefix, a longer id, a neighbour's id, one id changed, past the end: not the ids.
    assert.equal(chunk.idsAre(3, rows(['c000', '0c00001x']), 0, 2), false);
    assert.equal(chunk.idsAre(0, rows(['c0000']), 0, 1), false);
    assert.equal(chunk.idsAre(3, rows(['c00001']), 0, 1), false);
    assert.equal(chunk.idsAre(4, rows(['c00001']), 0, 1), false);
    assert.equal(chunk.idsAre(0, rows(['c00001', '', 'é-ü-✗']), 0, 3), false);
    assert.equal(chunk.idsAre(5, rows([ids[5]!, 'more']), 0, 2), false);
    assert.equal(chunk.idsAre(0, rows(['c00001']), 0, 2), false);
  });
});
