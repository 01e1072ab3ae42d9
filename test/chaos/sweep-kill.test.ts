// Chaos: the worker process is killed with SIGKILL in the middle of a sweep of small streams
// (many per-project lists synced inside one activity instead of a workflow each). The sweep must
// be resumed by Temporal's retry and finish with exactly the upstream's records, without asking the
// upstream again for any stream it had committed before the kill.
import assert from 'node:assert/strict';
import type { IncomingMessage } from 'node:http';
import { after, before, describe, it } from 'node:test';
import { waitFor } from '../helpers/processes.ts';
import { startChaosMirror, type ChaosMirror, type LinkedTestAccount } from './env.ts';
import { chaosScale, scaled } from './report.ts';

describe('chaos: worker killed mid-sweep', { timeout: scaled(300_000, 900_000) }, () => {
  let m: ChaosMirror;
  let account: LinkedTestAccount;
  /** Requests the sandbox served for budget-line-items, by Project-Id (in order). */
  const served: string[] = [];

  before(async () => {
    // 60 projects: budget-line-items (which BuildPro will not list across projects) are 60 small
    // streams, swept in one activity. Inside `npm test` only they (and the projects they need) are
    // mirrored: nothing else is looked at, and 60 projects' other lists cost minutes; the full
    // scale keeps the real catalog around them.
    m = await startChaosMirror({
      name: 'sweep-kill',
      sandbox: { size: 12, sizes: { projects: 60 } },
      env: chaosScale === 'full' ? {} : { MIRROR_RESOURCES: 'budget-line-items' },
    });
    account = await m.link('buildpro');
    m.sandbox.app.server.on('request', (req: IncomingMessage) => {
      if (req.headers['account-token'] !== account.accountToken) return;
      if ((req.url ?? '').split('?')[0] === '/budget-line-items') served.push(String(req.headers['project-id']));
    });
  });
  after(async () => {
    await m?.close();
  });

  it('resumes the sweep after kill -9 without fetching a committed stream again', async () => {
    // Slow answers so that the kill lands mid-sweep.
    await m.fault({ kind: 'slow', delay_ms: 400, match: { path: '/budget-line-items', source_system: 'buildpro' } });
    const run = await m.sync.start({ accountId: account.accountId, mode: 'full' });
    const committed = async () =>
      (await m.streams(account.accountId))
        .filter((s) => s.resource === 'budget-line-items' && s.scope !== 'project=*' && s.checkpoint?.done && s.state === 'synced')
        .map((s) => s.scope);
    await waitFor('a dozen budget-line-items streams to complete', async () => (await committed()).length >= 12, { timeoutMs: 120_000, intervalMs: 20 });
    await m.worker.kill9();
    await m.quiesceDatabase();
    const before = new Set(await committed());
    assert.ok(before.size < 60, `the kill landed mid-sweep (${before.size} of 60 done)`);
    const servedBefore = served.length;
    await m.worker.start();
    const result = await m.resultWithin(run.workflowId, 240_000);
    await m.clearFaults();
    assert.deepEqual(result.failed, [], 'no stream failed');

    const after = served.slice(servedBefore).filter((p) => p !== '*');
    const again = after.filter((p) => before.has(`project=${p}`));
    assert.deepEqual(again, [], 'no stream committed before the kill was fetched again');
    const all = new Set(served.filter((p) => p !== '*'));
    assert.equal(all.size, 60, 'every project was listed');
    const done = await committed();
    assert.equal(done.length, 60, 'every stream is synced');
    await m.assertExact(account, { only: ['budget-line-items'] });
    // One sweep activity, not a workflow per project.
    const perProject: string[] = [];
    for await (const w of m.temporal.workflow.list({ query: `WorkflowType = 'streamSyncWorkflow'` })) {
      if (w.workflowId.includes(account.accountId) && w.workflowId.includes('budget-line-items') && !w.workflowId.includes('project=*'))
        perProject.push(w.workflowId);
    }
    assert.deepEqual(perProject, [], 'no stream workflow per project');
  });
});
