// The demo's coverage: `npm run demo -- --once` mirrors records of every resource it
// links. The demo's own code path (bin/demo-run.ts: linkDemoAccount for each of its source systems, one
// full pass each through SyncControl, coverageOf over the pass's counts), on a small sandbox, checked
// twice: by the pass's own counts and by what the mirror's `records` hold per account and resource.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { coverageOf, demoSourceSystems, linkDemoAccount } from '../../bin/demo-run.ts';
import { knownProfile } from '../../connectors/source-systems/index.ts';
import type { AccountSyncSummary } from '../../api/sync-control.ts';
import { profileOf } from '../../sandbox/source-systems/profiles.ts';
import { startHarness, type Harness } from '../helpers/harness.ts';

describe('the demo mirrors records of every resource it links', { timeout: 900_000 }, () => {
  let h: Harness;
  const passes = new Map<string, { accountId: string; result: AccountSyncSummary }>();

  before(async () => {
    // The demo mirrors every resource (MIRROR_RESOURCES defaults to *).
    h = await startHarness({ sandbox: { size: 4 }, config: { MIRROR_RESOURCES: '*' } });
    const upstream = { url: h.sandbox.url, clientId: h.upstreamHeaders['client-id']!, clientSecret: h.upstreamHeaders['client-secret']! };
    const linked: Awaited<ReturnType<typeof linkDemoAccount>>[] = [];
    for (const system of demoSourceSystems) linked.push(await linkDemoAccount(h.services, upstream, system));
    const handles = await Promise.all(linked.map((a) => h.sync.start({ accountId: a.accountId, mode: 'full' })));
    const results = await Promise.all(handles.map((x) => x.result()));
    results.forEach((result, i) => passes.set(linked[i]!.sourceSystem, { accountId: linked[i]!.accountId, result }));
  });

  after(async () => {
    await h?.close();
  });

  for (const system of demoSourceSystems) {
    it(`${system}: every resource its profile serves has records in the mirror`, async () => {
      const { accountId, result } = passes.get(system)!;
      assert.deepEqual(result.failed, [], `${system}: no stream failed`);
      const coverage = coverageOf(system, result.byResource);
      assert.deepEqual(coverage.missing, [], `${system}: the pass mirrored records of each resource`);
      const { rows } = await h.services.pool.query<{ resource: string; n: string }>(
        `SELECT resource, count(*) AS n FROM records WHERE account_id = $1 AND deleted_at IS NULL GROUP BY resource`,
        [accountId],
      );
      const held = new Map(rows.map((r) => [r.resource, Number(r.n)]));
      const served = Object.keys(knownProfile(system)!.resources);
      // What the mirror knows the system serves is what the upstream (the sandbox) serves.
      assert.deepEqual([...served].sort(), Object.keys(profileOf(system)!.resources).sort(), `${system}: the mirror's profile lists what the sandbox serves`);
      assert.deepEqual(
        served.filter((r) => (held.get(r) ?? 0) === 0),
        [],
        `${system}: the mirror holds records of each of its ${served.length} resources`,
      );
      console.log(`demo ${system}: ${coverage.mirrored}/${coverage.served} resources, ${rows.reduce((n, r) => n + Number(r.n), 0)} records`);
    });
  }
});
