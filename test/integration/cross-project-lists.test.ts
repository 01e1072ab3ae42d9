// Lists across projects (`Project-Id: *`): where the source system takes it, a
// project-scoped resource is one stream for the whole account, and its records land in their own
// projects' scopes exactly as per-project streams put them; a refusal falls back to per-project
// streams and is remembered; deletes follow complete passes only, and a project removed upstream
// takes its records with it after a complete full pass, never after a failed one.
import assert from 'node:assert/strict';
import type { IncomingMessage } from 'node:http';
import { after, before, describe, it } from 'node:test';
import { sourceSystemProfiles } from '../../sandbox/source-systems/profiles.ts';
import { sandboxAdmin, startHarness, upstreamAll, type Harness } from '../helpers/harness.ts';

/** Project-scoped resources of BuildPro in the sandbox (budget-line-items refuses `*` there): its profile's, as the catalog grows. */
const projectScoped = Object.entries(sourceSystemProfiles.find((p) => p.slug === 'buildpro')!.resources)
  .filter(([, support]) => support?.scope === 'project')
  .map(([name]) => name);

describe('lists across projects', { timeout: 300_000 }, () => {
  let h: Harness;
  let account: { accountId: string; accountToken: string };
  /** Requests of the account to the sandbox: path and Project-Id. */
  let requests: { path: string; project: string | undefined }[] = [];

  before(async () => {
    h = await startHarness({ sandbox: { size: 12 } });
    account = await h.link('buildpro', 'cross-project');
    h.sandbox.app.server.on('request', (req: IncomingMessage) => {
      if (req.headers['account-token'] !== account.accountToken) return;
      requests.push({ path: (req.url ?? '').split('?')[0]!, project: req.headers['project-id'] as string | undefined });
    });
  });
  after(async () => {
    await h?.close();
  });

  async function fullPass(mode: 'full' | 'incremental' = 'full') {
    requests = [];
    const handle = await h.sync.start({ accountId: account.accountId, mode });
    return handle.result();
  }

  /** Every live record of the account: key, scope and content hash. */
  async function snapshot(): Promise<string[]> {
    const { rows } = await h.services.pool.query<{ k: string }>(
      `SELECT resource || ' ' || scope || ' ' || id || ' ' || hash::text AS k FROM records WHERE account_id = $1 AND deleted_at IS NULL ORDER BY 1`,
      [account.accountId],
    );
    return rows.map((r) => r.k);
  }

  async function live(resource: string, scope: string): Promise<string[]> {
    const { rows } = await h.services.pool.query<{ id: string }>(
      `SELECT id FROM records WHERE account_id = $1 AND resource = $2 AND scope = $3 AND deleted_at IS NULL ORDER BY ordinal, id`,
      [account.accountId, resource, scope],
    );
    return rows.map((r) => r.id);
  }

  let perProjectSnapshot: string[] = [];

  it('a pass across projects holds exactly what per-project streams held: same keys, scopes and contents', async () => {
    // First as before lists across projects: every pair refused (as if learned so).
    for (const r of projectScoped) {
      await h.services.pool.query(`INSERT INTO cross_project_lists (source_system, resource, accepted, reason) VALUES ('buildpro', $1, false, 'test')`, [r]);
    }
    const first = await fullPass();
    assert.deepEqual(first.failed, []);
    assert.equal(requests.filter((r) => r.project === '*').length, 0, 'no list across projects while they are refused');
    perProjectSnapshot = await snapshot();
    assert.ok(perProjectSnapshot.length > 100);

    await h.services.pool.query(`DELETE FROM cross_project_lists`);
    const second = await fullPass();
    assert.deepEqual(second.failed, []);
    // One list per resource that takes `*`: no per-project list of drawings any more.
    assert.ok(
      requests.some((r) => r.path === '/drawings' && r.project === '*'),
      'drawings listed across projects',
    );
    assert.equal(requests.filter((r) => r.path === '/drawings' && r.project !== '*').length, 0, 'drawings not listed per project');
    assert.deepEqual(await snapshot(), perProjectSnapshot, 'the same records, keys, scopes and contents');
    const { rows: deleted } = await h.services.pool.query(`SELECT 1 FROM records WHERE account_id = $1 AND deleted_at IS NOT NULL`, [account.accountId]);
    assert.equal(deleted.length, 0, 'nothing marked deleted by the change of streams');
    // Reads see each project's records as before (the per-project streams are fresh too).
    const projects = await upstreamAll(h, '/projects', { 'account-token': account.accountToken });
    const pid = String(projects[1]!.id);
    const res = await h.app.inject({
      method: 'GET',
      url: '/drawings?per_page=100',
      headers: { ...h.clientHeaders, 'account-token': account.accountToken, 'project-id': pid },
    });
    assert.equal(res.statusCode, 200);
    assert.equal(res.headers['svc-warnings'], undefined, 'served by the mirror, not forwarded');
    const upstream = await upstreamAll(h, '/drawings', { 'account-token': account.accountToken, 'project-id': pid });
    // Signed storage URLs differ from one answer to the next: the records compared without them.
    const stable = (rows: Record<string, unknown>[]) => rows.map(({ url: _u, preview_url: _p, ...rest }) => rest);
    assert.deepEqual(stable(res.json<{ data: Record<string, unknown>[] }>().data), stable(upstream));
  });

  it('a refused `*` falls back to per-project lists in the same pass and is remembered', async () => {
    const { rows } = await h.services.pool.query<{ resource: string; accepted: boolean; reason: string | null }>(
      `SELECT resource, accepted, reason FROM cross_project_lists WHERE source_system = 'buildpro' ORDER BY resource`,
    );
    const refused = rows.filter((r) => !r.accepted).map((r) => r.resource);
    assert.deepEqual(refused, ['budget-line-items']);
    assert.match(rows.find((r) => r.resource === 'budget-line-items')!.reason ?? '', /not accepted/);
    assert.ok(rows.filter((r) => r.accepted).length >= 7, 'the others are remembered as accepted');
    // A refusal is not a failure: no stream is left failed (`mirror status` would exit 1 for it).
    const failed = await h.services.pool.query<{ resource: string; scope: string }>(`SELECT resource, scope FROM streams WHERE state = 'failed'`);
    assert.deepEqual(failed.rows, [], 'no failed stream after the fallback');
    // Its records are there per project, as the upstream lists them.
    const projects = await upstreamAll(h, '/projects', { 'account-token': account.accountToken });
    for (const p of projects) {
      const upstream = await upstreamAll(h, '/budget-line-items', { 'account-token': account.accountToken, 'project-id': String(p.id) });
      assert.deepEqual(
        await live('budget-line-items', `project=${String(p.id)}`),
        upstream.map((r) => String(r.id)),
      );
    }
    // The next passes do not ask again: an incremental one (which visits the project lists the freshness
    // scheduler picks, mirror/streams/polling.ts, each on its own), and a full one, which lists every project's.
    const again = await fullPass('incremental');
    assert.deepEqual(again.failed, []);
    assert.equal(requests.filter((r) => r.path === '/budget-line-items' && r.project === '*').length, 0, 'not asked for `*` again');
    assert.ok(requests.filter((r) => r.path === '/budget-line-items').length <= projects.length, 'at most one list per project');
    assert.deepEqual((await fullPass()).failed, []);
    assert.equal(requests.filter((r) => r.path === '/budget-line-items' && r.project === '*').length, 0, 'not asked for `*` again');
    assert.equal(requests.filter((r) => r.path === '/budget-line-items').length, projects.length, 'one list per project');
  });

  it('deletes after complete passes only; a removed project goes after a complete full pass, never after a failed one', async () => {
    assert.deepEqual((await fullPass()).failed, []);
    const projects = await upstreamAll(h, '/projects', { 'account-token': account.accountToken });
    const removed = String(projects[0]!.id);
    const kept = String(projects[2]!.id);
    const drawingsKept = await live('drawings', `project=${kept}`);
    const gone = drawingsKept[0]!;
    await sandboxAdmin(h, 'DELETE', '/_admin/objects', { account_token: account.accountToken, resource: 'drawings', id: gone, project_id: kept });
    await sandboxAdmin(h, 'DELETE', '/_admin/objects', { account_token: account.accountToken, resource: 'projects', id: removed });
    const before = await live('drawings', `project=${removed}`);
    assert.ok(before.length > 0);

    // An incremental pass deletes nothing.
    await fullPass('incremental');
    assert.ok((await live('drawings', `project=${kept}`)).includes(gone), 'incremental: the deleted drawing is still there');
    assert.deepEqual(await live('drawings', `project=${removed}`), before, 'incremental: the removed project keeps its records');

    // A full pass whose lists fail (the projects list, and drawings across projects) deletes nothing.
    const faults = [
      await sandboxAdmin<{ id: string }>(h, 'POST', '/_admin/faults', { kind: 'status', status: 403, match: { path: '/projects', source_system: 'buildpro' } }),
      await sandboxAdmin<{ id: string }>(h, 'POST', '/_admin/faults', { kind: 'status', status: 403, match: { path: '/drawings', source_system: 'buildpro' } }),
    ];
    const failed = await fullPass();
    assert.ok(
      failed.failed.some((f) => f.resource === 'projects'),
      JSON.stringify(failed.failed),
    );
    assert.ok((await live('drawings', `project=${kept}`)).includes(gone), 'failed pass: the deleted drawing is still there');
    assert.deepEqual(await live('drawings', `project=${removed}`), before, 'failed pass: the removed project keeps its records');
    assert.ok((await live('budget-line-items', `project=${removed}`)).length > 0);
    for (const f of faults) await sandboxAdmin(h, 'DELETE', `/_admin/faults/${f.id}`);

    // A complete full pass: the absent drawing and everything of the removed project go.
    const complete = await fullPass();
    assert.deepEqual(complete.failed, []);
    assert.ok(!(await live('drawings', `project=${kept}`)).includes(gone), 'the deleted drawing is marked deleted');
    assert.equal((await live('drawings', `project=${kept}`)).length, drawingsKept.length - 1);
    for (const r of [...projectScoped, 'drawing-versions', 'file-versions']) {
      const { rows } = await h.services.pool.query(`SELECT 1 FROM records WHERE account_id = $1 AND resource = $2 AND scope LIKE $3 AND deleted_at IS NULL`, [
        account.accountId,
        r,
        `project=${removed}%`,
      ]);
      assert.equal(rows.length, 0, `${r} of the removed project are deleted`);
    }
  });
});
