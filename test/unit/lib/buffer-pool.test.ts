import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { BufferPool } from '../../../lib/buffer-pool.ts';

describe('BufferPool', () => {
  it('gives a buffer back to the next take that fits in it, with the size asked', () => {
    const pool = new BufferPool(2, 1024);
    const a = pool.take(1500);
    assert.equal(a.length, 1500);
    assert.equal(a.buffer.byteLength, 2048);
    a.fill(7);
    pool.give(a);
    assert.equal(pool.size, 1);
    const b = pool.take(1800);
    assert.equal(b.buffer, a.buffer);
    assert.equal(b.length, 1800);
    assert.equal(pool.size, 0);
    // Too big for any free buffer: a new one.
    pool.give(b);
    const c = pool.take(4000);
    assert.notEqual(c.buffer, a.buffer);
    assert.equal(pool.size, 1);
  });

  it('keeps a buffer given twice once, at most `keep` buffers, and never a small shared one', () => {
    const pool = new BufferPool(2, 1024);
    const [a, b, c] = [pool.take(1024), pool.take(1024), pool.take(1024)];
    pool.give(a);
    pool.give(a);
    assert.equal(pool.size, 1);
    const first = pool.take(10);
    const second = pool.take(10);
    assert.equal(first.buffer, a.buffer);
    assert.notEqual(second.buffer, a.buffer, 'a buffer given twice is not handed out twice');
    pool.give(a);
    pool.give(b);
    pool.give(c);
    assert.equal(pool.size, 2);
    pool.take(10);
    pool.take(10);
    pool.give(Buffer.from('small, from the shared slab'));
    assert.equal(pool.size, 0);
  });
});
