import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import { describe, it } from 'node:test';
import { viewsSql } from '../../../scripts/generate-views.ts';

describe('typed views', () => {
  it('the committed views migration matches the resource catalog (regenerate with scripts/generate-views.ts)', () => {
    const dir = new URL('../../../prisma/migrations/', import.meta.url).pathname;
    const name = readdirSync(dir).find((d) => d.endsWith('_typed_views'));
    assert.ok(name, 'a *_typed_views migration exists');
    assert.equal(readFileSync(`${dir}${name}/migration.sql`, 'utf8'), viewsSql());
  });
});
