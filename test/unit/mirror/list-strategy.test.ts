// Which way a list page is read (mirror/reads/list-strategies.ts listStrategy): a plain list's first
// page of one stream off its index, its later pages by positions, a plain list across projects by its
// positions, and everything else (filters, orders, deleted records, a time bound, several scopes) by
// OFFSET. No I/O.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { listStrategy, type ListQuery } from '../../../mirror/reads/list-strategies.ts';

const plain: ListQuery = { accountId: 'a', resource: 'customers', scopes: [''], page: 1, perPage: 100, includeSourceData: false };

describe('list strategy', () => {
  it('reads a plain first page of one stream off its index, and its later pages by positions', () => {
    assert.equal(listStrategy(plain), 'first');
    assert.equal(listStrategy({ ...plain, includeSourceData: true }), 'first');
    assert.equal(listStrategy({ ...plain, page: 2 }), 'positions');
    assert.equal(listStrategy({ ...plain, page: 2000, perPage: 1000 }), 'positions');
    // Empty lists of filters and orders are plain.
    assert.equal(listStrategy({ ...plain, page: 3, filters: [], orderBy: [], includeDeleted: false }), 'positions');
  });

  it('reads a plain list across projects by its positions, at any page', () => {
    assert.equal(listStrategy({ ...plain, scopes: 'all' }), 'across');
    assert.equal(listStrategy({ ...plain, scopes: 'all', page: 7 }), 'across');
  });

  it('reads every other list by OFFSET', () => {
    const others: ListQuery[] = [
      { ...plain, filters: [{ field: 'name', operator: '=', value: 'x' }] },
      { ...plain, orderBy: [{ field: 'name', dir: 'ASC' }] },
      { ...plain, includeDeleted: true },
      { ...plain, modifiedAfter: new Date(0) },
      { ...plain, scopes: ['project=1', 'project=2'] },
      { ...plain, scopes: [] },
      { ...plain, page: 2, scopes: 'all', filters: [{ field: 'name', operator: '=', value: 'x' }] },
      { ...plain, page: 2, orderBy: [{ field: 'name', dir: 'DESC' }] },
    ];
    for (const q of others) assert.equal(listStrategy(q), 'offset', JSON.stringify(q));
  });
});
