// Idle accounts: an account nobody read or wrote through the mirror for MIRROR_IDLE_AFTER has its
// schedules slowed MIRROR_IDLE_SLOWDOWN times by the maintenance run, is shown `idle`, and wakes on
// its next read (schedules back to the usual cadence, an incremental pass at once). Recording a use
// writes at most once per account per minute.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { AccountUse } from '../../api/account-use.ts';
import { accountSyncWorkflowId } from '../../lib/workflow-ids.ts';
import { accountsOverview } from '../../mirror/ops/metrics-overview.ts';
import { startHarness, type Harness } from '../helpers/harness.ts';
import { waitFor } from '../helpers/processes.ts';

describe('idle accounts', () => {
  let h: Harness;
  let idle: { accountId: string; accountToken: string };
  let busy: { accountId: string; accountToken: string };

  before(async () => {
    h = await startHarness({ sandbox: { size: 20 } });
    idle = await h.link('fieldops', 'idle-user');
    busy = await h.link('fieldops', 'busy-user');
    for (const a of [idle, busy]) await h.sync.ensureSchedules(a.accountId, h.sync.every);
  });
  after(async () => {
    await h?.close();
  });

  /** The schedules' intervals of an account, in minutes: incremental, full. */
  async function intervals(accountId: string): Promise<number[]> {
    const ids = h.sync.scheduleIds(accountId);
    const out: number[] = [];
    for (const id of [ids.incremental, ids.full]) {
      const { spec } = await h.temporal.schedule.getHandle(id).describe();
      out.push(Number(spec.intervals?.[0]?.every) / 60_000);
    }
    return out;
  }

  async function idleSince(accountId: string): Promise<Date | null> {
    const { rows } = await h.services.pool.query<{ idle_since: Date | null }>('SELECT idle_since FROM linked_accounts WHERE id = $1', [accountId]);
    return rows[0]!.idle_since;
  }

  it('slows the schedules of an account unused for MIRROR_IDLE_AFTER, and no other', async () => {
    await h.services.pool.query(`UPDATE linked_accounts SET last_used_at = now() - interval '20 days' WHERE id = $1`, [idle.accountId]);
    await h.services.pool.query(`UPDATE linked_accounts SET last_used_at = now() - interval '2 days' WHERE id = $1`, [busy.accountId]);
    const result: unknown = await h.temporal.workflow.execute('maintenanceWorkflow', {
      taskQueue: h.taskQueue,
      workflowId: `maintenance-test-${Date.now()}`,
      args: [],
    });
    assert.deepEqual((result as { idle: string[] }).idle, [idle.accountId]);
    assert.deepEqual(await intervals(idle.accountId), [15 * 8, 24 * 60 * 8], 'polled 8 times less often (MIRROR_IDLE_SLOWDOWN)');
    assert.deepEqual(await intervals(busy.accountId), [15, 24 * 60]);
    assert.ok(await idleSince(idle.accountId));
    assert.equal(await idleSince(busy.accountId), null);
    const shown = await accountsOverview(h.services.pool);
    assert.equal(shown.find((a) => a.id === idle.accountId)?.status, 'idle');
    assert.equal(shown.find((a) => a.id === busy.accountId)?.status, 'linked');
    assert.equal(shown.at(-1)?.id, idle.accountId, 'idle accounts come after the active ones');
  });

  it('wakes on its next read: the usual cadence, and an incremental pass now', async () => {
    const res = await fetch(`${h.apiUrl}/projects`, { headers: { ...h.clientHeaders, 'account-token': idle.accountToken } });
    assert.equal(res.status, 200, await res.text());
    await waitFor('the idle account woken', async () => (await idleSince(idle.accountId)) === null);
    assert.deepEqual(await intervals(idle.accountId), [15, 24 * 60]);
    const pass = await h.temporal.workflow.getHandle(accountSyncWorkflowId(idle.accountId)).describe();
    assert.ok(['RUNNING', 'COMPLETED'].includes(pass.status.name), pass.status.name);
    assert.equal((await accountsOverview(h.services.pool, { accountId: idle.accountId }))[0]?.status, 'linked');
  });

  it("writes an account's use at most once per minute", async () => {
    const use = new AccountUse({ pool: h.services.pool });
    const lastUsed = async () =>
      (await h.services.pool.query<{ t: string }>('SELECT last_used_at::text AS t FROM linked_accounts WHERE id = $1', [busy.accountId])).rows[0]!.t;
    use.touch(busy.accountId);
    await use.flush();
    const first = await lastUsed();
    await h.services.pool.query(`UPDATE linked_accounts SET last_used_at = '2020-01-01T00:00:00Z' WHERE id = $1`, [busy.accountId]);
    for (let i = 0; i < 100; i++) use.touch(busy.accountId);
    await use.flush();
    assert.equal(new Date(await lastUsed()).toISOString(), '2020-01-01T00:00:00.000Z', 'no write within the minute');
    assert.ok(first > '2020');
    // Another recorder (another API process) writes on its own first use.
    const other = new AccountUse({ pool: h.services.pool });
    other.touch(busy.accountId);
    await other.flush();
    assert.notEqual(new Date(await lastUsed()).toISOString(), '2020-01-01T00:00:00.000Z');
  });
});
