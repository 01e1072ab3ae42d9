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
      assert.equal(chunk.idIs(i, id), true);
    });
    // A prefix, a longer id, a neighbour's id, past the end: not the id.
    assert.equal(chunk.idIs(0, 'c0000'), false);
    assert.equal(chunk.idIs(3, 'c00001'), false);
    assert.equal(chunk.idIs(4, 'c00001'), false);
    assert.equal(chunk.idIs(1, 'c'), false);
    assert.equal(chunk.idIs(ids.length, ''), false);
  });
});
