// The freshness scheduler end to end through Temporal and Postgres: a BuildPro account whose budget line
// items the sandbox lists only project by project (seven project lists), with a polling share so small
// that a pass may visit one list. A pass visits the list the scheduler picks (the one seen changing most,
// not every list); a quiet list about to pass the floor (twice the cycle the budget allows) is visited
// whatever the budget, so none starves; a list an event named is visited; a poll's changes go into the
// list's history; the target report says which lists miss it and what would meet it. Time is simulated
// by moving the project lists' last verification back ("as if that long had passed").
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import type { IncomingMessage } from 'node:http';
import { tmpdir } from 'node:os';
import { fileURLToPath } from 'node:url';
import { buildOverview } from '../../api/status-page/overview.ts';
import { renderMain } from '../../api/status-page/page.ts';
import { renderFamilies } from '../../mirror/ops/metrics.ts';
import { after, before, describe, it } from 'node:test';
import { freshnessMetrics, freshnessOverview } from '../../mirror/streams/freshness.ts';
import { applyObjects } from '../../mirror/records/object-writes.ts';
import { pollingPolicy } from '../../bin/polling-settings.ts';
import { configSchema } from '../../lib/config.ts';
import { cliEnv, sandboxAdmin, startHarness, type Harness } from '../helpers/harness.ts';

const minute = 60_000;
const mirrorBin = fileURLToPath(new URL('../../bin/mirror.js', import.meta.url));
const settings = { SYNC_INCREMENTAL_MINUTES: '15', SYNC_FULL_HOURS: '24', SYNC_POLLING_SHARE: '0.01', SYNC_FRESHNESS_TARGET: '15m' };

describe('freshness scheduler', { timeout: 300_000 }, () => {
  let h: Harness;
  let account: { accountId: string; accountToken: string };
  /** Budget line item lists asked of the sandbox since the last pass began, by project. */
  let asked: string[] = [];
  let projects: string[] = [];

  before(async () => {
    h = await startHarness({ sandbox: { size: 2, sizes: { projects: 7 } }, config: settings });
    account = await h.link('buildpro', 'freshness-scheduler');
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

  /** As if `ms` had passed for the project lists (`only`: for these projects alone). */
  async function elapse(ms: number, only?: string[]): Promise<void> {
    await h.services.pool.query(
      `UPDATE streams SET last_pass_started_at = last_pass_started_at - make_interval(secs => $2), touched_at = touched_at - make_interval(secs => $2)
        WHERE account_id = $1 AND resource = 'budget-line-items' AND scope <> 'project=*' AND ($3::text[] IS NULL OR scope = ANY($3::text[]))`,
      [account.accountId, ms / 1000, only ? only.map((p) => `project=${p}`) : null],
    );
  }

  const freshness = () => ({
    policy: pollingPolicy({
      SYNC_INCREMENTAL_MINUTES: 15,
      SYNC_FULL_HOURS: 24,
      SYNC_POLLS_PER_PASS: 0,
      MIRROR_SYNC_BUDGET_SHARE: configSchema.shape.MIRROR_SYNC_BUDGET_SHARE.parse(undefined),
      SYNC_POLLING_SHARE: 0.01,
      SYNC_FRESHNESS_TARGET: configSchema.shape.SYNC_FRESHNESS_TARGET.parse('15m'),
    }),
    publishedRate: () => 60,
  });

  async function reasons(): Promise<Map<string, string | null>> {
    const { rows } = await h.services.pool.query<{ scope: string; due_reason: string | null }>(
      `SELECT scope, due_reason FROM streams WHERE account_id = $1 AND resource = 'budget-line-items' AND scope <> 'project=*'`,
      [account.accountId],
    );
    return new Map(rows.map((r) => [r.scope.slice('project='.length), r.due_reason]));
  }

  it('visits the list seen changing most, not every list, within a budget of one visit a pass', async () => {
    await pass('full');
    const { rows } = await h.services.pool.query<{ id: string }>(
      `SELECT id FROM records WHERE account_id = $1 AND resource = 'projects' AND deleted_at IS NULL ORDER BY id`,
      [account.accountId],
    );
    projects = rows.map((r) => r.id);
    assert.equal(projects.length, 7);
    assert.equal(new Set(asked).size, 7, 'the full pass lists every project');
    // The first project's list was seen changing 50 times in a day; the others never. Its own day of polls decides: of the
    // rates the estimate weighs (a grid, each about a third above the one before), 55 a day is the likeliest for it.
    await h.services.pool.query(
      `UPDATE streams SET seen_changes = CASE WHEN scope = $2 THEN 50 ELSE 0 END, observed_ms = 86400000
        WHERE account_id = $1 AND resource = 'budget-line-items' AND scope <> 'project=*'`,
      [account.accountId, `project=${projects[0]}`],
    );
    await elapse(30 * minute);
    const idle = await pass('incremental');
    assert.deepEqual(asked, [projects[0]]);
    assert.ok((idle.notDue ?? 0) >= 6);
    const why = await reasons();
    assert.match(why.get(projects[0]!)!, /^freshness: visited \(due\), every ~[\d.]+ min \(learned: 55 changes a day\)$/);
    for (const p of projects.slice(1)) assert.match(why.get(p)!, /^freshness: deferred, every ~/, p);
  });

  it('visits a quiet list about to pass the floor whatever the budget, so no list starves', async () => {
    // Seven lists, one visit a pass of 15 minutes: a cycle of 105 minutes, the floor 210.
    const quiet = projects[5]!;
    await elapse(200 * minute, [quiet]);
    await pass('incremental');
    assert.deepEqual(asked, [quiet]);
    assert.match((await reasons()).get(quiet)!, /^freshness: visited \(floor\)/);
  });

  it('visits a list an event named, and counts the changes a poll found in its history', async () => {
    const named = projects[3]!;
    const key = { accountId: account.accountId, resource: 'budget-line-items', scope: `project=${named}` };
    const { rows: objects } = await h.services.pool.query<{ id: string; data: Record<string, unknown> }>(
      `SELECT id, data FROM records WHERE account_id = $1 AND resource = $2 AND scope = $3 AND deleted_at IS NULL ORDER BY ordinal LIMIT 2`,
      [key.accountId, key.resource, key.scope],
    );
    await applyObjects(h.services.pool, key, [{ ...objects[0]!.data, description: 'named by an event' }]);
    // And one changed upstream in the same list, which only a poll brings.
    await sandboxAdmin(h, 'PATCH', '/_admin/objects', {
      account_token: account.accountToken,
      resource: 'budget-line-items',
      project_id: named,
      id: objects[1]!.id,
      patch: { description: 'changed upstream' },
    });
    const before = await h.services.pool.query<{ seen_changes: number }>(
      `SELECT seen_changes FROM streams WHERE account_id = $1 AND resource = $2 AND scope = $3`,
      [key.accountId, key.resource, key.scope],
    );
    await pass('incremental');
    assert.ok(asked.includes(named), `asked ${asked.join(', ')}`);
    const { rows } = await h.services.pool.query<{ seen_changes: number; observed_ms: number }>(
      `SELECT seen_changes, observed_ms FROM streams WHERE account_id = $1 AND resource = $2 AND scope = $3`,
      [key.accountId, key.resource, key.scope],
    );
    assert.ok(rows[0]!.seen_changes >= before.rows[0]!.seen_changes * 0.9 + 1, `seen ${rows[0]!.seen_changes}`);
    assert.ok(rows[0]!.observed_ms > 0);
  });

  it('says which lists miss the target and what budget would meet it', async () => {
    const o = await freshnessOverview(h.services.pool, freshness(), { accountId: account.accountId });
    const a = o.accounts[0]!;
    assert.equal(a.targetSeconds, 15 * 60);
    assert.equal(a.polledLists, 7);
    assert.equal(a.met, false);
    // One visit a pass: no list is planned within 15 minutes but one seen changing often (at most every pass).
    assert.ok(a.missingCount >= 6 && a.missingCount <= 7, `${a.missingCount}`);
    assert.ok(Math.abs(a.cycleSeconds - 105 * 60) < 1, `${a.cycleSeconds}`);
    // Every list every pass: 7 visits in 15 minutes.
    assert.ok(Math.abs(a.visitsPerMinuteNeeded - 7 / 15) < 1e-9);
    assert.ok(a.pollingShareNeeded !== null && a.pollingShareNeeded > 0.01 && a.pollingShareNeeded <= 1, `${a.pollingShareNeeded}`);
    const bli = o.resources.find((r) => r.resource === 'budget-line-items')!;
    assert.equal(bli.lists, 7);
    assert.equal(bli.met, false);
    assert.ok(bli.max! >= 25 * 60 && bli.p50! <= bli.p95! && bli.p95! <= bli.max!);
  });

  it('shows freshness on the status page, in `mirror status` and in /metrics', async () => {
    const o = await buildOverview({ pool: h.services.pool, freshness: freshness() });
    const mine = o.freshness!.resources.filter((r) => r.accountId === account.accountId);
    assert.ok(mine.some((r) => r.resource === 'budget-line-items' && r.lists === 7 && !r.met));
    const html = renderMain(o);
    assert.match(html, /<section id="freshness">/);
    assert.match(html, /missed by \d+ of 7 lists/);
    assert.match(html, /<td>budget-line-items<\/td><td class="num">7<\/td>/);

    const metrics = renderFamilies(await freshnessMetrics(h.services.pool, freshness()));
    assert.match(metrics, /# TYPE mirror_list_staleness_seconds histogram/);
    assert.match(
      metrics,
      new RegExp(
        `mirror_list_staleness_seconds_bucket\\{account="${account.accountId}",source_system="buildpro",resource="budget-line-items",le="\\+Inf"\\} 7`,
      ),
    );
    assert.match(
      metrics,
      new RegExp(`mirror_list_staleness_seconds_count\\{account="${account.accountId}",source_system="buildpro",resource="budget-line-items"\\} 7`),
    );
    assert.match(metrics, new RegExp(`mirror_freshness_target_met\\{account="${account.accountId}",source_system="buildpro"\\} 0`));

    const env: Record<string, string> = {
      PATH: process.env.PATH ?? '',
      HOME: process.env.HOME ?? '',
      ...cliEnv(h),
      ...settings,
      LOG_LEVEL: 'silent',
    };
    const out = await new Promise<{ code: number; out: string; err: string }>((resolve, reject) => {
      const child = spawn(process.execPath, [mirrorBin, 'status', '--account', account.accountId], { cwd: tmpdir(), env, stdio: ['ignore', 'pipe', 'pipe'] });
      let text = '';
      let err = '';
      child.stdout.on('data', (d: Buffer) => (text += d.toString()));
      child.stderr.on('data', (d: Buffer) => (err += d.toString()));
      child.once('error', reject);
      child.once('exit', (code) => resolve({ code: code ?? 1, out: text, err }));
    });
    assert.ok(out.code <= 1, out.err);
    assert.match(out.out, /Freshness \(target 15m\): missed by \d+ of 7 polled lists .*would meet it: 0\.5 visits a minute/, out.out);
    assert.match(out.out, /budget-line-items\s+7\s+\S+\s+\S+\s+\S+\s+no/, out.out);
  });
});
