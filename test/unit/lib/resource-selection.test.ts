// MIRROR_RESOURCES: parsing, what comes with a selected resource, and the clear refusal of a name
// that is not in the catalog.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { parseConfig } from '../../../lib/config.ts';
import { isSelected, parseResourceSelection } from '../../../lib/resource-selection.ts';
import { contractResourceNames } from '../../../lib/resources.ts';

describe('MIRROR_RESOURCES', () => {
  it('* and empty select every resource', () => {
    for (const text of ['*', '', ' * ']) {
      const r = parseResourceSelection(text);
      assert.equal(r.selection, null, text);
      assert.deepEqual(r.problems, []);
      assert.ok(isSelected(r.selection, 'rfis'));
    }
  });

  it("contract selects the contract's resources and nothing of the rest of the catalog", () => {
    const { selection, problems } = parseResourceSelection('contract');
    assert.deepEqual(problems, []);
    assert.deepEqual([...selection!].sort(), [...contractResourceNames].sort());
    assert.ok(!isSelected(selection, 'rfis'));
  });

  it('a child brings its parents, and projects always comes', () => {
    const { selection, problems } = parseResourceSelection('prime-contract-line-items, customers');
    assert.deepEqual(problems, []);
    assert.deepEqual([...selection!].sort(), ['customers', 'prime-contract-line-items', 'prime-contracts', 'projects']);
  });

  it('refuses a name outside the catalog, and * beside names, saying what to set', () => {
    assert.match(parseResourceSelection('rfis,rfi').problems.join(), /"rfi" is not a resource of the catalog/);
    assert.match(parseResourceSelection('*,rfis').problems.join(), /list nothing beside it/);
    const env = {
      UPSTREAM_CLIENT_ID: 'x'.repeat(36),
      UPSTREAM_CLIENT_SECRET: 'x'.repeat(40),
      MIRROR_CLIENT_ID: 'x'.repeat(36),
      MIRROR_CLIENT_SECRET: 'x'.repeat(40),
      MIRROR_ENCRYPTION_KEY: Buffer.alloc(32).toString('base64'),
      MIRROR_SIGNING_KEY: Buffer.alloc(32).toString('base64'),
    };
    assert.throws(() => parseConfig({ ...env, MIRROR_RESOURCES: 'custmers' }), /MIRROR_RESOURCES[\s\S]*"custmers" is not a resource/);
    assert.deepEqual([...parseConfig({ ...env, MIRROR_RESOURCES: 'customers' }).MIRROR_RESOURCES!].sort(), ['customers', 'projects']);
  });
});
