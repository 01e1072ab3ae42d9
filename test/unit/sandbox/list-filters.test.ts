// Unit tests of the list filter and order semantics the sandbox shares with the mirror's SQL:
// the corners a list of generated records does not reach (booleans, non-ASCII text, code points
// above U+FFFF, newlines under LIKE) and how a filter's time value is read.
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { equalityParametersOf, isoInstant } from '../../../lib/list-parameters.ts';
import { compareSortKeys, compareText, compileFilter, compileOrderKey, fieldResolver, sortKeyOf, type FieldRef } from '../../../sandbox/data/filters.ts';

const resolve = fieldResolver('things', new Set(['id', 'name', 'flag', 'amount', 'note']));
const filter = (operator: string, value: unknown, field = 'name') => compileFilter({ field, operator, value }, 'filters[0]', resolve);

describe('filter values', () => {
  test('booleans compare as the texts true and false; numbers as their JSON text unless every value is a number', () => {
    const t = filter('=', true, 'flag');
    assert.equal(t.test(true), true);
    assert.equal(t.test('true'), true);
    assert.equal(t.test(false), false);
    assert.equal(filter('=', 'false', 'flag').test(false), true);
    assert.equal(filter('IN', ['1.5', 2], 'amount').test(1.5), true, 'mixed values: text');
    assert.equal(filter('IN', [1.5, 2], 'amount').test('1.5'), false, 'all numbers: a text is null');
    assert.equal(filter('!=', 1.5, 'amount').test('1.5'), true, 'null is distinct from everything');
  });

  test('null, objects and arrays pass only !=', () => {
    for (const x of [null, undefined, { a: 1 }, [1]]) {
      for (const [op, v] of [
        ['=', 'a'],
        ['>', 'a'],
        ['<=', 'a'],
        ['IN', ['a']],
        ['NOT IN', ['a']],
        ['BETWEEN', ['a', 'b']],
        ['NOT BETWEEN', ['a', 'b']],
        ['LIKE', '%'],
        ['NOT LIKE', 'a'],
        ['ILIKE', '%'],
        ['NOT ILIKE', 'a'],
      ] as const) {
        assert.equal(filter(op, v).test(x), false, `${op} ${JSON.stringify(x)}`);
      }
      assert.equal(filter('!=', 'a').test(x), true);
    }
  });

  test('operators are case-insensitive and trimmed', () => {
    assert.equal(filter(' not like ', 'a%').operator, 'NOT LIKE');
    assert.equal(filter('ilike', 'A%').test('abc'), true);
  });
});

describe('LIKE and ILIKE', () => {
  test('% spans newlines, _ is one character (a code point above U+FFFF too), \\ escapes', () => {
    assert.equal(filter('LIKE', 'a%z').test('a\nb\nz'), true);
    assert.equal(filter('LIKE', 'a_z').test('a😀z'), true);
    assert.equal(filter('LIKE', '100\\%').test('100%'), true);
    assert.equal(filter('LIKE', '100\\%').test('1000'), false);
    assert.equal(filter('LIKE', 'a\\_b').test('axb'), false);
    assert.equal(filter('LIKE', 'a\\\\b').test('a\\b'), true);
    assert.equal(filter('LIKE', 'a.c').test('abc'), false, 'regular-expression characters are literal');
    assert.equal(filter('LIKE', '1%', 'amount').test(12.5), true, 'a number is matched as its JSON text');
    assert.throws(() => filter('LIKE', 'abc\\'), /ends with an escape character/);
  });

  test('ILIKE folds A-Z only, as Postgres does under COLLATE "C"', () => {
    assert.equal(filter('ILIKE', 'ABC').test('abc'), true);
    assert.equal(filter('ILIKE', 'É').test('é'), false);
    assert.equal(filter('ILIKE', 'k').test('\u212a'), false, 'the Kelvin sign is not k');
    assert.equal(filter('NOT ILIKE', 'É').test('é'), true);
  });
});

describe('text order is by code point (UTF-8 bytes)', () => {
  test('a character above U+FFFF sorts after U+FFFD, unlike UTF-16 units', () => {
    const high = '\u{1F600}';
    assert.ok(high < '\uFFFD', 'UTF-16 units say otherwise');
    assert.ok(compareText(high, '\uFFFD') > 0);
    assert.equal(filter('>', '\uFFFD').test(high), true);
    const key = compileOrderKey({ field: 'name' }, 'order_by[0]', resolve);
    const of = (v: unknown) => sortKeyOf([key], (_: FieldRef) => v);
    assert.ok(compareSortKeys([key], of(high), of('\uFFFD')) > 0);
    assert.ok(compareSortKeys([key], of('b'), of('a')) > 0);
  });

  test('classes: numbers, then texts and booleans, then the rest; DESC reverses only within a class', () => {
    const desc = compileOrderKey({ field: 'amount', dir: ' desc ' }, 'order_by[0]', resolve);
    assert.equal(desc.desc, true);
    const values: unknown[] = [null, 'b', 2, true, { a: 1 }, 10, 'a'];
    const sorted = [...values].sort((a, b) =>
      compareSortKeys(
        [desc],
        sortKeyOf([desc], () => a),
        sortKeyOf([desc], () => b),
      ),
    );
    assert.deepEqual(sorted, [10, 2, true, 'b', 'a', null, { a: 1 }]);
  });
});

describe('time values', () => {
  test('ISO 8601 only: offsets, fractions to the microsecond, a date alone is midnight UTC', () => {
    assert.equal(isoInstant('2024-03-01'), Date.UTC(2024, 2, 1));
    assert.equal(isoInstant('2024-03-01T10:00:00'), Date.UTC(2024, 2, 1, 10), 'no offset: UTC, not the server zone');
    assert.equal(isoInstant('2024-03-01T10:00:00+02:00'), Date.UTC(2024, 2, 1, 8));
    assert.equal(isoInstant('2024-03-01T10:00:00-0530'), Date.UTC(2024, 2, 1, 15, 30));
    assert.equal(isoInstant('2024-03-01T10:00:00.123456Z'), Date.UTC(2024, 2, 1, 10) + 123.456);
    assert.equal(isoInstant('2024-03-01T10:00:00.1234567Z'), Date.UTC(2024, 2, 1, 10) + 123.457, 'rounded to the microsecond');
    for (const bad of ['yesterday', '2024-02-30', '2024-13-01', '2024-03-01T25:00:00Z', 'March 1, 2024', 1709251200, ''])
      assert.equal(isoInstant(bad), null, String(bad));
  });

  test('a time filter takes instants, not texts or numbers', () => {
    const f = compileFilter({ field: 'source_update_time', operator: 'BETWEEN', value: ['2024-01-01', '2024-01-31T23:59:59Z'] }, 'filters[0]', resolve);
    assert.equal(f.test(Date.UTC(2024, 0, 15)), true);
    assert.equal(f.test(null), false);
    assert.throws(() => compileFilter({ field: 'source_update_time', operator: '>', value: 1704067200 }, 'filters[0]', resolve), /ISO 8601/);
  });
});

describe('equality parameters', () => {
  test('from the real service collection, only where the record carries the field', () => {
    assert.deepEqual(equalityParametersOf('activities'), ['type']);
    assert.deepEqual(equalityParametersOf('drawings'), ['discipline']);
    assert.deepEqual(equalityParametersOf('projects'), []);
    assert.deepEqual(equalityParametersOf('constructor'), [], 'not an Object.prototype key');
  });
});
