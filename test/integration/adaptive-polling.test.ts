// Adaptive polling (issue 22, item 5), end to end through Temporal and Postgres: a BuildPro account,
// whose budget line items the sandbox lists only project by project. An incremental pass skips a
// project's list until it is due; its interval doubles with each poll that found nothing, up to the
// full-pass period, and starts over after a change or an event; a list the upstream's webhooks cover
// is polled by full passes only. Time is simulated by moving the streams' due times back ("as if that
// long had passed"): the decisions read only those and Postgres's clock.
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import type { IncomingMessage } from 'node:http';
import { tmpdir } from 'node:os';
import { after, before, describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';
import { buildOverview } from '../../api/status-page/overview.ts';
import { renderMain } from '../../api/status-page/page.ts';
import { applyObjects } from '../../mirror/records/object-writes.ts';
import { cliEnv, sandboxAdmin, startHarness, type Harness } from '../helpers/harness.ts';

const minute = 60_000;
/** The periods the worker runs with here: incremental passes every 15 min, full passes every 2 h. */
const incrementalMs = 15 * minute;
const fullMs = 120 * minute;
const mirrorBin = fileURLToPath(new URL('../../bin/mirror.js', import.meta.url));

describe('adaptive polling', { timeout: 300_000 }, () => {
  let h: Harness;
  let account: { accountId: string; accountToken: string };
  /** Budget line item lists asked of the sandbox since the last pass began, by project. */
  let asked: string[] = [];
  let projects: string[] = [];

  before(async () => {
    h = await startHarness({ sandbox: { size: 3, sizes: { projects: 4 } }, config: { SYNC_INCREMENTAL_MINUTES: '15', SYNC_FULL_HOURS: '2' } });
    account = await h.link('buildpro', 'adaptive-polling');
    h.sandbox.app.server.on('request', (req: IncomingMessage) => {
      if (req.headers['account-token'] !== account.accountToken) return;
      if ((req.url ?? '').split('?')[0] === '/budget-line-items') asked.push(String(req.headers['project-id']));
    });
  });
  after(async () => {
    await h?.close();
  });

  async function pass(mode: 'full' | 'incremental', extra: { registerWebhooks?: boolean } = {}) {
    asked = [];
    const result = await (await h.sync.start({ accountId: account.accountId, mode, ...extra })).result();
    assert.deepEqual(result.failed, []);
    return result;
  }

  /** As if `ms` had passed for polling: every stream's next due time moves back by it. */
  async function elapse(ms: number): Promise<void> {
    await h.services.pool.query(`UPDATE streams SET next_due_at = next_due_at - make_interval(secs => $2) WHERE account_id = $1`, [
      account.accountId,
      ms / 1000,
    ]);
  }

  interface Polling {
    scope: string;
    unchanged: number;
    reason: string | null;
    /** Next due time after the last poll's start, in minutes. */
    intervalMin: number | null;
  }
  async function polling(): Promise<Map<string, Polling>> {
    const { rows } = await h.services.pool.query<{ scope: string; unchanged_polls: number; due_reason: string | null; interval_min: number | null }>(
      `SELECT scope, unchanged_polls, due_reason,
              round(extract(epoch FROM next_due_at - last_pass_started_at) / 60)::int AS interval_min
         FROM streams WHERE account_id = $1 AND resource = 'budget-line-items' AND scope LIKE 'project=%' AND scope <> 'project=*'`,
      [account.accountId],
    );
    return new Map(rows.map((r) => [r.scope, { scope: r.scope, unchanged: r.unchanged_polls, reason: r.due_reason, intervalMin: r.interval_min }]));
  }

  it('an unchanged project list is skipped by incremental passes until it is due, its interval doubling', async () => {
    await pass('full');
    const { rows } = await h.services.pool.query<{ id: string }>(
      `SELECT id FROM records WHERE account_id = $1 AND resource = 'projects' AND deleted_at IS NULL ORDER BY ordinal`,
      [account.accountId],
    );
    projects = rows.map((r) => r.id);
    assert.equal(projects.length, 4);
    assert.deepEqual(asked.filter((p) => p !== '*').sort(), [...projects].sort(), 'the full pass lists every project');
    for (const p of (await polling()).values()) {
      // A first load is not a change (it would put the list outside the poll budget): due after one period all the same.
      assert.equal(p.reason, 'first listed: every 15 min', p.scope);
      assert.equal(p.intervalMin, 15);
    }

    // Right after: nothing is due, nothing is asked.
    const idle = await pass('incremental');
    assert.deepEqual(asked, [], 'no project list asked before it is due');
    assert.equal(idle.notDue, projects.length);

    // 15 minutes on: due, asked, unchanged: next in 30 minutes.
    await elapse(incrementalMs);
    await pass('incremental');
    assert.deepEqual([...asked].sort(), [...projects].sort(), 'every project list asked once it is due');
    for (const p of (await polling()).values()) {
      assert.equal(p.reason, 'unchanged 1 poll: every 30 min', p.scope);
      assert.equal(p.intervalMin, 30);
    }
    // 15 more minutes: not due yet (15 left); 15 more: due again, then every hour.
    await elapse(incrementalMs);
    await pass('incremental');
    assert.deepEqual(asked, [], 'not asked halfway through its interval');
    await elapse(incrementalMs);
    await pass('incremental');
    assert.equal(asked.length, projects.length);
    for (const p of (await polling()).values()) assert.equal(p.reason, 'unchanged 2 polls: every 1 h', p.scope);
  });

  it('a change found, or an event naming the scope, starts the interval over', async () => {
    // Every list due (an hour on); one budget line item changed upstream in the second project.
    await elapse(60 * minute);
    const changed = projects[1]!;
    const { rows } = await h.services.pool.query<{ id: string }>(
      `SELECT id FROM records WHERE account_id = $1 AND resource = 'budget-line-items' AND scope = $2 AND deleted_at IS NULL ORDER BY ordinal LIMIT 1`,
      [account.accountId, `project=${changed}`],
    );
    await sandboxAdmin(h, 'PATCH', '/_admin/objects', {
      account_token: account.accountToken,
      resource: 'budget-line-items',
      project_id: changed,
      id: rows[0]!.id,
      patch: { description: 'changed upstream' },
    });
    await pass('incremental');
    assert.equal(asked.length, projects.length);
    const after = await polling();
    assert.equal(after.get(`project=${changed}`)!.reason, 'changed last poll: every 15 min');
    assert.equal(after.get(`project=${changed}`)!.unchanged, 0);
    for (const p of projects.filter((id) => id !== changed))
      assert.equal(after.get(`project=${p}`)!.reason, 'unchanged 3 polls: every 2 h (the bound: the full-pass period)');

    // 15 minutes on: only the changed project's list is due.
    await elapse(incrementalMs);
    await pass('incremental');
    assert.deepEqual(asked, [changed]);

    // An event names the fourth project's list (an object written outside a pass): due at the next pass.
    const named = projects[3]!;
    const key = { accountId: account.accountId, resource: 'budget-line-items', scope: `project=${named}` };
    const { rows: objects } = await h.services.pool.query<{ data: Record<string, unknown> }>(
      `SELECT data FROM records WHERE account_id = $1 AND resource = $2 AND scope = $3 AND deleted_at IS NULL ORDER BY ordinal LIMIT 1`,
      [key.accountId, key.resource, key.scope],
    );
    await applyObjects(h.services.pool, key, [{ ...objects[0]!.data, description: 'named by an event' }]);
    await pass('incremental');
    assert.deepEqual(asked, [named], 'the list an event named is asked, no other');
    assert.equal((await polling()).get(key.scope)!.reason, 'changed last poll: every 15 min');
  });

  it('a scope is never staler than the full-pass period: the interval stops at it, and it is polled then', async () => {
    // Polls that find nothing: the interval doubles up to the bound (2 h here) and stays there.
    for (let i = 0; i < 4; i++) {
      await elapse(fullMs);
      await pass('incremental');
      for (const p of (await polling()).values()) assert.ok(p.intervalMin! <= fullMs / minute, `${p.scope}: next due ${p.intervalMin} min after its last poll`);
    }
    const at = await polling();
    for (const p of at.values()) {
      assert.equal(p.intervalMin, fullMs / minute, p.scope);
      assert.match(p.reason!, /every 2 h \(the bound: the full-pass period\)/);
    }
    // Short of the bound (minus the half period a pass may run early): not asked; at it: asked.
    await elapse(fullMs - incrementalMs);
    await pass('incremental');
    assert.deepEqual(asked, []);
    await elapse(incrementalMs);
    await pass('incremental');
    assert.equal(asked.length, projects.length, 'every list polled once its last poll is a full-pass period old');
  });

  it('a scope covered by upstream webhooks is polled by full passes only', async () => {
    // The first pass after linking registers webhooks: BuildPro sends budget-line-item events per project.
    await pass('full', { registerWebhooks: true });
    const { rows } = await h.services.pool.query<{ n: number }>(
      `SELECT count(DISTINCT project_id)::int AS n FROM webhook_registrations WHERE account_id = $1 AND type = 'budget-line-item'`,
      [account.accountId],
    );
    assert.equal(rows[0]!.n, projects.length);
    // Long past every due time: still not asked by incremental passes.
    await elapse(10 * fullMs);
    const idle = await pass('incremental');
    assert.deepEqual(asked, [], 'no covered list asked by an incremental pass');
    assert.ok((idle.notDue ?? 0) >= projects.length);
    for (const p of (await polling()).values()) assert.equal(p.reason, 'webhook-covered: full pass only', p.scope);
    // The full pass lists them all.
    await pass('full');
    assert.deepEqual([...asked].filter((p) => p !== '*').sort(), [...projects].sort());
    for (const p of (await polling()).values()) {
      assert.equal(p.reason, 'webhook-covered: full pass only', p.scope);
      assert.equal(p.intervalMin, fullMs / minute);
    }
  });

  it("the status page and `mirror status` show each stream's next due time and why", async () => {
    const o = await buildOverview({ pool: h.services.pool });
    const groups = o.polling.groups.filter((g) => g.accountId === account.accountId);
    assert.ok(
      groups.some((g) => g.reason === 'webhook-covered: full pass only' && g.streams >= projects.length),
      JSON.stringify(groups),
    );
    assert.ok(o.polling.next.length > 0 && o.polling.next.length <= 8, 'the next few due, not every stream');
    const html = renderMain(o);
    assert.match(html, /<section id="polling">/);
    assert.match(html, /webhook-covered: full pass only/);

    const env: Record<string, string> = {
      PATH: process.env.PATH ?? '',
      HOME: process.env.HOME ?? '',
      ...cliEnv(h),
      LOG_LEVEL: 'silent',
    };
    const cli = (...args: string[]) =>
      new Promise<{ code: number; out: string; err: string }>((resolve, reject) => {
        const child = spawn(process.execPath, [mirrorBin, ...args], { cwd: tmpdir(), env, stdio: ['ignore', 'pipe', 'pipe'] });
        let out = '';
        let err = '';
        child.stdout.on('data', (d: Buffer) => (out += d.toString()));
        child.stderr.on('data', (d: Buffer) => (err += d.toString()));
        child.once('error', reject);
        child.once('exit', (code) => resolve({ code: code ?? 1, out, err }));
      });
    const summary = await cli('status', '--account', account.accountId);
    // Exit 0, or 1 should a stream of the account have failed: what is checked here is the polling part.
    assert.ok(summary.code <= 1, summary.err);
    assert.match(summary.out, /Polling \(when incremental passes list streams next\)/);
    assert.match(summary.out, /\s\d+\s+webhook-covered: full pass only\s+in 2h/, summary.out);
    assert.match(summary.out, /next due\s+resource\s+scope\s+why/, summary.out);
    const streams = await cli('status', '--streams', '--account', account.accountId);
    assert.ok(streams.code <= 1, streams.err);
    assert.match(streams.out, /budget-line-items\s+project=\S+\s+synced\s.*\sin [\d.]+h\s+webhook-covered: full pass only/, streams.out);
  });
});
