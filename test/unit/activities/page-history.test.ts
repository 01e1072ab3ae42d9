// The pages of a pass by fingerprint (activities/page-history.ts): a page that repeats any earlier
// page of the pass is named with the page it repeats; empty pages, the same page fetched again and
// pages a failed slice had fetched before it stopped are no repeat.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { PageHistory, storedFingerprint } from '../../../activities/page-history.ts';
import { pageFingerprint } from '../../../connectors/pagination.ts';

const fp = (...ids: string[]) => pageFingerprint(ids);

describe('page history', () => {
  it('names the earlier page a page repeats, however far back', () => {
    const h = new PageHistory();
    assert.equal(h.see(fp('a', 'b'), 1), undefined);
    assert.equal(h.see(fp('c', 'd'), 2), undefined);
    assert.equal(h.see(fp('a', 'b'), 3), 1, 'page 3 repeats page 1 (1, 2, 1, 2, ...)');
    assert.equal(h.see(fp('c', 'd'), 4), 2);
    assert.equal(h.see(fp('b', 'a'), 5), undefined, 'the same records in another order are another page');
  });

  it('lets empty pages and the same page fetched again pass', () => {
    const h = new PageHistory();
    assert.equal(h.see(null, 1), undefined);
    assert.equal(h.see(null, 2), undefined);
    assert.equal(h.see(fp('a'), 3), undefined);
    assert.equal(h.see(fp('a'), 3), undefined, 'page 3 again (a retried slice)');
  });

  it('forgets pages a slice fetched but never committed', () => {
    const h = new PageHistory();
    h.see(fp('a'), 1);
    h.see(fp('b'), 2);
    h.see(fp('c'), 3);
    h.forgetFrom(3);
    assert.equal(h.size, 2);
    // Page 3 comes back changed on the retry; its old records turn up on page 4: no repeat.
    assert.equal(h.see(fp('x'), 3), undefined);
    assert.equal(h.see(fp('c'), 4), undefined);
    assert.equal(h.see(fp('a'), 5), 1);
  });

  it('is rebuilt from stored fingerprints (a checkpoint) with the same verdicts', () => {
    const stored = [fp('a'), null, fp('b')].map(storedFingerprint);
    assert.deepEqual(
      stored.map((s) => s.length),
      [16, 0, 16],
    );
    const h = PageHistory.of(stored);
    assert.equal(h.size, 2);
    assert.equal(h.see(fp('b'), 4), 3, 'a full fingerprint matches its stored prefix');
    assert.equal(h.see(fp('z'), 5), undefined);
  });
});
