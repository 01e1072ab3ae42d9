// MIRROR_RESOURCES end to end: a full pass of a BuildPro account mirrors only the selected resources
// (with projects, which their scopes need); a selected one is served from the mirror's copy, and one
// left out is forwarded, so the application still gets the upstream's answer, with a warning that says
// why.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { firstProjectId, linkAndSync, startHarness, upstreamAll, type Harness } from '../helpers/harness.ts';

describe('MIRROR_RESOURCES: only the selected resources are mirrored, the rest forwarded', { timeout: 240_000 }, () => {
  let h: Harness;
  let account: { accountId: string; accountToken: string };
  let projectId: string;

  before(async () => {
    h = await startHarness({ sandbox: { size: 3 }, config: { MIRROR_RESOURCES: 'vendors,rfis' } });
    account = await linkAndSync(h, 'buildpro', 'selection');
    projectId = await firstProjectId(h, account.accountId);
  });
  after(async () => {
    await h?.close();
  });

  it('syncs the selected resources and projects, nothing else', async () => {
    const { rows } = await h.services.pool.query<{ resource: string }>(`SELECT DISTINCT resource FROM streams WHERE account_id = $1 ORDER BY 1`, [
      account.accountId,
    ]);
    assert.deepEqual(
      rows.map((r) => r.resource),
      ['projects', 'rfis', 'vendors'],
    );
  });

  async function both(path: string, headers: Record<string, string>) {
    const mirror = await fetch(`${h.apiUrl}${path}`, { headers: { ...h.clientHeaders, 'account-token': account.accountToken, ...headers } });
    const body = (await mirror.json()) as { data: unknown[] };
    const upstream = await upstreamAll(h, path, { 'account-token': account.accountToken, ...headers }, 100);
    return { status: mirror.status, warnings: mirror.headers.get('svc-warnings'), data: body.data, upstream };
  }

  it('serves a selected resource from its own copy', async () => {
    const r = await both('/rfis?per_page=100', { 'project-id': projectId });
    assert.equal(r.status, 200);
    assert.equal(r.warnings, null, 'answered by the mirror');
    assert.ok(r.data.length > 0);
    assert.deepEqual(r.data, r.upstream);
  });

  it("forwards a resource left out, with the upstream's answer and a warning naming the setting", async () => {
    const r = await both('/cost-codes?per_page=100', { 'project-id': projectId });
    assert.equal(r.status, 200);
    assert.match(r.warnings ?? '', /answered by the upstream: .*MIRROR_RESOURCES/);
    assert.ok(r.data.length > 0);
    assert.deepEqual(r.data, r.upstream);
  });

  it('refuses aggregates over a resource left out, naming the setting', async () => {
    const res = await fetch(`${h.apiUrl}/mirror/aggregates/cost-codes?count`, {
      headers: { ...h.clientHeaders, 'account-token': account.accountToken, 'project-id': '*' },
    });
    assert.equal(res.status, 404);
    assert.match(await res.text(), /MIRROR_RESOURCES/);
  });
});
