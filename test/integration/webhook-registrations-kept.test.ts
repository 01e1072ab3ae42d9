// Webhook registrations that stay true: every full pass of an account checks that the upstream still
// has the mirror's registrations and registers what is missing: all of them when the upstream lost
// them all (registrations made against an earlier upstream, as the demo's were), one deleted upstream
// (which delivers again once it is back).
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { eventually, sandboxAdmin, startHarness, upstreamAll, type Harness } from '../helpers/harness.ts';

describe('webhook registrations that stay true', { timeout: 300_000 }, () => {
  let h: Harness;
  let account: { accountId: string; accountToken: string };

  before(async () => {
    h = await startHarness({ sandbox: { size: 3 } });
    account = await h.link('buildpro', 'hooks');
  });
  after(async () => {
    await h?.close();
  });

  const upstreamHookIds = async (): Promise<Set<string>> => {
    const res = await fetch(`${h.sandbox.url}/webhooks`, { headers: { ...h.upstreamHeaders, 'account-token': account.accountToken } });
    assert.equal(res.status, 200);
    return new Set(((await res.json()) as { data: { id: string }[] }).data.map((w) => w.id));
  };
  const registrations = () => h.services.prisma.webhookRegistration.findMany({ where: { accountId: account.accountId } });
  /** A full pass as the schedules (and the demo) start it: without asking for registrations. */
  const fullPass = async () => {
    const result = await (await h.sync.start({ accountId: account.accountId, mode: 'full' })).result();
    assert.deepEqual(result.failed, []);
  };

  it('registers them when asked, and leaves an account without registrations alone', async () => {
    await fullPass();
    assert.equal((await registrations()).length, 0, 'a pass of an account never registered registers nothing');
    const result = await (await h.sync.start({ accountId: account.accountId, mode: 'full', registerWebhooks: true })).result();
    assert.deepEqual(result.failed, []);
    const regs = await registrations();
    assert.ok(regs.length >= 3, `registered ${regs.length}`);
    const upstream = await upstreamHookIds();
    for (const r of regs) assert.ok(r.upstreamId && upstream.has(r.upstreamId), `the upstream has ${r.event} ${r.type} ${r.projectId ?? ''}`);
  });

  it('registers all of them again at the next full pass when the upstream lost them all (a new upstream)', async () => {
    const regs = await registrations();
    for (const id of await upstreamHookIds()) {
      const res = await fetch(`${h.sandbox.url}/webhooks/${id}`, {
        method: 'DELETE',
        headers: { ...h.upstreamHeaders, 'account-token': account.accountToken },
      });
      assert.equal(res.status, 200);
    }
    assert.equal((await upstreamHookIds()).size, 0);
    await fullPass();
    const now = await registrations();
    const upstream = await upstreamHookIds();
    assert.equal(now.length, regs.length);
    assert.equal(upstream.size, regs.length);
    for (const r of now) assert.ok(r.upstreamId && upstream.has(r.upstreamId));
  });

  it('registers again after the next full pass what was deleted upstream, and it delivers', async () => {
    const regs = await registrations();
    const gone = regs.find((r) => r.type === 'vendor' && r.event === 'UPDATE')!;
    const res = await fetch(`${h.sandbox.url}/webhooks/${gone.upstreamId}`, {
      method: 'DELETE',
      headers: { ...h.upstreamHeaders, 'account-token': account.accountToken },
    });
    assert.equal(res.status, 200, await res.text());
    assert.ok(!(await upstreamHookIds()).has(gone.upstreamId!));

    await fullPass();
    const now = await registrations();
    const upstream = await upstreamHookIds();
    assert.equal(now.length, regs.length, 'one for one');
    for (const r of now) assert.ok(r.upstreamId && upstream.has(r.upstreamId), `the upstream has ${r.event} ${r.type} ${r.projectId ?? ''}`);
    const back = now.find((r) => r.type === 'vendor' && r.event === 'UPDATE')!;
    assert.notEqual(back.upstreamId, gone.upstreamId, 'registered anew');

    // The new registration delivers: an upstream update reaches the mirror without another pass.
    const [vendor] = await upstreamAll(h, '/vendors', { 'account-token': account.accountToken });
    await sandboxAdmin(h, 'PATCH', '/_admin/objects', {
      account_token: account.accountToken,
      resource: 'vendors',
      id: vendor!.id,
      patch: { name: 'Renamed after re-registration' },
    });
    await eventually('the update to reach the mirror through the webhook', async () => {
      const read = await h.app.inject({
        method: 'GET',
        url: `/vendors/${String(vendor!.id)}`,
        headers: { ...h.clientHeaders, 'account-token': account.accountToken },
      });
      return read.json<{ name?: string }>().name === 'Renamed after re-registration' ? true : undefined;
    });
  });
});
