// Adaptive polling's budget per pass (issue 22), end to end through Temporal and Postgres: a BuildPro
// account whose budget line items the sandbox lists only project by project, with SYNC_POLLS_PER_PASS=2.
// When many project lists come due at once (linked together, backing off in step), an incremental pass
// lists two of them, the most overdue first, and the next pass the next two; the others stay due (their
// next due time unmoved) and say why; a list whose last poll is a full-pass period old is listed
// regardless. Time is simulated by moving the streams' due times (and, for the bound, a last poll) back.
import assert from 'node:assert/strict';
import type { IncomingMessage } from 'node:http';
import { after, before, describe, it } from 'node:test';
import { buildOverview } from '../../api/status-page/overview.ts';
import { scopeHash } from '../../mirror/streams/polling.ts';
import { startHarness, type Harness } from '../helpers/harness.ts';

const minute = 60_000;
const incrementalMs = 15 * minute;
const fullMs = 120 * minute;
const perPass = 2;
const deferred = "deferred: this pass's poll budget (2 lists) went to longer-waiting ones";

describe('poll budget per pass', { timeout: 300_000 }, () => {
  let h: Harness;
  let account: { accountId: string; accountToken: string };
  /** Budget line item lists asked of the sandbox since the last pass began, by project. */
  let asked: string[] = [];
  const projects: string[] = [];

  before(async () => {
    h = await startHarness({
      sandbox: { size: 2, sizes: { projects: 7 } },
      config: { SYNC_INCREMENTAL_MINUTES: '15', SYNC_FULL_HOURS: '2', SYNC_POLLS_PER_PASS: String(perPass) },
    });
    account = await h.link('buildpro', 'poll-budget');
    h.sandbox.app.server.on('request', (req: IncomingMessage) => {
      if (req.headers['account-token'] !== account.accountToken) return;
      if ((req.url ?? '').split('?')[0] === '/budget-line-items' && req.headers['project-id'] !== '*') asked.push(String(req.headers['project-id']));
    });
  });
  after(async () => {
    await h?.close();
  });

  async function pass(mode: 'full' | 'incremental') {
    asked = [];
    const result = await (await h.sync.start({ accountId: account.accountId, mode })).result();
    assert.deepEqual(result.failed, []);
    return result;
  }

  async function lists(): Promise<Map<string, { reason: string | null; nextDueAt: number }>> {
    const { rows } = await h.services.pool.query<{ scope: string; due_reason: string | null; next_due_at: Date }>(
      `SELECT scope, due_reason, next_due_at FROM streams WHERE account_id = $1 AND resource = 'budget-line-items' AND scope LIKE 'project=%' AND scope <> 'project=*'`,
      [account.accountId],
    );
    return new Map(rows.map((r) => [r.scope.slice('project='.length), { reason: r.due_reason, nextDueAt: r.next_due_at.getTime() }]));
  }

  it('lists at most the budget of the lists due by their clock, the most overdue first, the next ones at the next pass', async () => {
    await pass('full');
    const { rows } = await h.services.pool.query<{ id: string }>(
      `SELECT id FROM records WHERE account_id = $1 AND resource = 'projects' AND deleted_at IS NULL`,
      [account.accountId],
    );
    projects.push(...rows.map((r) => r.id));
    assert.equal(projects.length, 7);
    assert.equal(asked.length, 7, 'the full pass lists every project');
    for (const [p, l] of await lists()) assert.equal(l.reason, 'first listed: every 15 min', p);

    // 15 minutes on, all seven are due by their clock: two are listed, the two due first.
    await h.services.pool.query(`UPDATE streams SET next_due_at = next_due_at - make_interval(secs => $2) WHERE account_id = $1`, [
      account.accountId,
      incrementalMs / 1000,
    ]);
    const before = await lists();
    // Lists whose pass ended in one statement share a due time: ties go in the budget's own order.
    const byDue = [...before.entries()]
      .sort((a, b) => a[1].nextDueAt - b[1].nextDueAt || scopeHash('budget-line-items', `project=${a[0]}`) - scopeHash('budget-line-items', `project=${b[0]}`))
      .map(([p]) => p);
    const first = await pass('incremental');
    assert.equal(asked.length, perPass, `asked ${asked.join(', ')}`);
    assert.deepEqual([...asked].sort(), byDue.slice(0, perPass).sort(), 'the most overdue first');
    assert.ok((first.notDue ?? 0) >= projects.length - perPass);
    const afterFirst = await lists();
    for (const p of projects.filter((id) => !asked.includes(id))) {
      assert.equal(afterFirst.get(p)!.reason, deferred, p);
      assert.equal(afterFirst.get(p)!.nextDueAt, before.get(p)!.nextDueAt, `${p}: a deferred list keeps its due time`);
    }
    for (const p of asked) assert.equal(afterFirst.get(p)!.reason, 'unchanged 1 poll: every 30 min');

    // The next pass, at once: the next two (the first two are not due again for 30 minutes).
    const firstAsked = [...asked];
    await pass('incremental');
    assert.equal(asked.length, perPass);
    assert.deepEqual([...asked].sort(), byDue.slice(perPass, 2 * perPass).sort());
    assert.ok(!asked.some((p) => firstAsked.includes(p)));

    // The status page shows the deferred lists and why.
    const o = await buildOverview({ pool: h.services.pool });
    const group = o.polling.groups.find((g) => g.accountId === account.accountId && g.reason === deferred);
    assert.equal(group?.streams, projects.length - 2 * perPass, JSON.stringify(o.polling.groups));
  });

  it('a list whose last poll is a full-pass period old is listed whatever the budget', async () => {
    // Of the three lists still deferred, the one due last: its last poll as if a full-pass period ago.
    const now = await lists();
    const waiting = [...now.entries()]
      .filter(([, l]) => l.reason === deferred)
      .sort((a, b) => a[1].nextDueAt - b[1].nextDueAt)
      .map(([p]) => p);
    assert.equal(waiting.length, 3);
    const stale = waiting.at(-1)!;
    await h.services.pool.query(
      `UPDATE streams SET last_pass_started_at = last_pass_started_at - make_interval(secs => $3) WHERE account_id = $1 AND resource = 'budget-line-items' AND scope = $2`,
      [account.accountId, `project=${stale}`, fullMs / 1000],
    );
    await pass('incremental');
    assert.ok(asked.includes(stale), `the list at the bound is listed (asked ${asked.join(', ')})`);
    assert.equal(asked.length, perPass + 1, 'the budget, and the list at the bound besides');
    assert.deepEqual([...asked].sort(), [...waiting].sort());
  });
});
