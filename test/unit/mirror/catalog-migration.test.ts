// The catalog's resources reach the database by generated migrations only: every resource of
// lib/resources.ts has its partition in some migration, and the committed real-catalog migration is
// exactly what scripts/generate-catalog-migration.ts writes for the resources before it lacked.
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { describe, it } from 'node:test';
import { resources } from '../../../lib/resources.ts';
import { catalogMigrationSql, partitionedBefore } from '../../../scripts/generate-catalog-migration.ts';

const name = '20261127000000_real_catalog';
const dir = new URL('../../../prisma/migrations/', import.meta.url).pathname;

describe('catalog migration', () => {
  it('the committed real-catalog migration matches the catalog (regenerate with scripts/generate-catalog-migration.ts)', () => {
    assert.equal(readFileSync(`${dir}${name}/migration.sql`, 'utf8'), catalogMigrationSql(name));
  });

  it('every resource of the catalog has a partition and a typed view in the migrations', () => {
    const all = partitionedBefore('99999999999999');
    assert.deepEqual(
      resources.map((r) => r.name).filter((r) => !all.has(r)),
      [],
    );
    const sql = readFileSync(`${dir}${name}/migration.sql`, 'utf8');
    for (const r of resources.filter((d) => !partitionedBefore(name).has(d.name)))
      assert.match(sql, new RegExp(`CREATE VIEW "mirror_${r.name.replace(/-/g, '_')}"`));
  });
});
