import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { describe, it } from 'node:test';
import { pageFingerprint, pageVerdict } from '../../../connectors/pagination.ts';

describe('pageVerdict', () => {
  it('follows has_more_results when it is true or false', () => {
    assert.equal(pageVerdict({ hasMore: true, received: 3, perPage: 100 }), 'next');
    assert.equal(pageVerdict({ hasMore: false, received: 40, perPage: 100 }), 'stop');
  });
  it('asks for confirmation when has_more_results is false on a full page', () => {
    assert.equal(pageVerdict({ hasMore: false, received: 100, perPage: 100 }), 'confirm');
    assert.equal(pageVerdict({ hasMore: false, received: 0, perPage: 100 }), 'stop');
  });
  it('with null (unknown) goes on while pages are full and stops on a short or empty page', () => {
    assert.equal(pageVerdict({ hasMore: null, received: 100, perPage: 100 }), 'next');
    assert.equal(pageVerdict({ hasMore: null, received: 99, perPage: 100 }), 'stop');
    assert.equal(pageVerdict({ hasMore: null, received: 0, perPage: 100 }), 'stop');
    assert.equal(pageVerdict({ hasMore: undefined, received: 100, perPage: 100 }), 'next');
  });
  it('does not stop on a short page while the upstream says there is more', () => {
    assert.equal(pageVerdict({ hasMore: true, received: 7, perPage: 100 }), 'next');
  });
  it('stops on an empty page even if the upstream claims more (it would loop)', () => {
    assert.equal(pageVerdict({ hasMore: true, received: 0, perPage: 100 }), 'stop');
  });
});

describe('pageFingerprint', () => {
  it('is equal for the same ids in the same order and differs otherwise', () => {
    const a = pageFingerprint(['1', '2']);
    assert.equal(a, pageFingerprint(['1', '2']));
    assert.notEqual(a, pageFingerprint(['2', '1']));
    assert.notEqual(a, pageFingerprint(['1', '3']));
    // As checkpoints saved before hold it: each id followed by a NUL.
    assert.equal(a, createHash('sha1').update('1').update('\0').update('2').update('\0').digest('hex'));
  });
  it('is null for an empty page', () => {
    assert.equal(pageFingerprint([]), null);
  });
});
