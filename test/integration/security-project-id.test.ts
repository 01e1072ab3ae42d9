// Security: a `Project-Id` (or a parent id) the mirror does not know must not
// start a sync. Every read of a scope the mirror has not synced answers from the upstream and starts
// a sync of that scope; when the scope is named by the caller, each new value would cost a workflow
// and upstream requests. Checked against a whole mirror (sandbox upstream, real Temporal, worker):
// the workflows started on the mirror's task queue are counted, and the upstream's own request stats.
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import { after, before, describe, it } from 'node:test';
import { linkAndSync, sandboxAdmin, startHarness, type Harness } from '../helpers/harness.ts';
import { printOwnRows, scenario } from '../chaos/report.ts';

const file = import.meta.filename;
const group = 'security';

interface Stats {
  accounts: Record<string, { reference_id: string; by_path: Record<string, number> }>;
}

describe('security: unknown Project-Id and parent ids start nothing', { timeout: 300_000 }, () => {
  let h: Harness;
  /** buildpro, linked and never synced: its projects list is not mirrored yet. */
  let fresh: { accountId: string; accountToken: string };
  /** buildpro, its projects (only) synced. */
  let known: { accountId: string; accountToken: string };
  /** graphledger, fully synced (AP invoices and their line items). */
  let ledger: { accountId: string; accountToken: string };

  before(async () => {
    h = await startHarness({ sandbox: { size: 6 } });
    fresh = await h.link('buildpro', 'pid-fresh');
    known = await h.link('buildpro', 'pid-known');
    const r = await (await h.sync.start({ accountId: known.accountId, mode: 'full', resource: 'projects' })).result();
    assert.deepEqual(r.failed, []);
    ledger = await linkAndSync(h, 'graphledger', 'pid-ledger');
    await idle();
  });

  after(async () => {
    if (h) {
      for await (const w of h.temporal.workflow.list({ query: `TaskQueue = '${h.taskQueue}' AND ExecutionStatus = 'Running'` })) {
        await h.temporal.workflow
          .getHandle(w.workflowId, w.runId)
          .terminate('test over')
          .catch(() => undefined);
      }
    }
    await h?.close();
    printOwnRows();
  });

  const as = (account: { accountToken: string }, extra: Record<string, string> = {}) => ({
    ...h.clientHeaders,
    'account-token': account.accountToken,
    ...extra,
  });
  async function get(path: string, headers: Record<string, string>): Promise<{ status: number; body: { message?: string } }> {
    const res = await fetch(`${h.apiUrl}${path}`, { headers });
    const text = await res.text();
    let body: { message?: string };
    try {
      body = JSON.parse(text) as { message?: string };
    } catch {
      body = { message: text };
    }
    return { status: res.status, body };
  }

  /** Account passes of an account on the mirror's task queue, closed ones too: `workflowId runId`. */
  async function accountPasses(accountId: string): Promise<Set<string>> {
    // Visibility trails a start by a moment.
    await sleep(1500);
    const runs = new Set<string>();
    for await (const w of h.temporal.workflow.list({ query: `TaskQueue = '${h.taskQueue}' AND WorkflowType = 'accountSyncWorkflow'` })) {
      if (w.workflowId.startsWith(`account-sync:${accountId}:`)) runs.add(`${w.workflowId} ${w.runId}`);
    }
    return runs;
  }

  /** The account passes started since `before` (workflow ids, sorted). */
  async function startedSince(accountId: string, before: Set<string>): Promise<string[]> {
    return [...(await accountPasses(accountId))]
      .filter((r) => !before.has(r))
      .map((r) => r.split(' ')[0]!)
      .sort();
  }

  /** Waits until no workflow runs on the task queue. */
  async function idle(timeoutMs = 60_000): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    // Visibility trails a start by a moment (more on a loaded machine): idle is none running twice, 2 s apart.
    let quiet = 0;
    for (;;) {
      let running = 0;
      for await (const _ of h.temporal.workflow.list({ query: `TaskQueue = '${h.taskQueue}' AND ExecutionStatus = 'Running'` })) running++;
      quiet = running === 0 ? quiet + 1 : 0;
      if (quiet === 2) return;
      if (running === 0) {
        await sleep(2000);
        continue;
      }
      if (Date.now() > deadline) throw new Error(`${running} workflows still running after ${timeoutMs} ms`);
      await sleep(250);
    }
  }

  /** The upstream requests made for an account since the stats were last reset, per route. */
  async function upstreamRequests(referenceId: string): Promise<Record<string, number>> {
    const stats = await sandboxAdmin<Stats>(h, 'GET', '/_admin/stats');
    return Object.values(stats.accounts).find((v) => v.reference_id === referenceId)?.by_path ?? {};
  }

  /** Every answer that is not the expected status and message, described. */
  function wrong(answers: { what: string; status: number; body: { message?: string } }[], status: number, message: RegExp): string[] {
    return answers
      .filter((r) => r.status !== status || !message.test(r.body.message ?? ''))
      .map((r) => `${r.what}: ${r.status} ${JSON.stringify(r.body).slice(0, 160)}`);
  }

  async function ask(account: { accountToken: string }, requests: { path: string; project?: string }[]) {
    const out: { what: string; status: number; body: { message?: string } }[] = [];
    for (const q of requests) {
      const r = await get(q.path, as(account, q.project === undefined ? {} : { 'project-id': q.project }));
      out.push({ what: `${q.path}${q.project === undefined ? '' : ` with Project-Id ${JSON.stringify(q.project.slice(0, 60))}`}`, ...r });
    }
    return out;
  }

  it('N random Project-Id values on an account whose projects are not mirrored yet: 404 each, no sync, one lookup per value', async () => {
    await scenario(
      group,
      'unknown Project-Id values before the projects list is mirrored',
      async () => {
        await sandboxAdmin(h, 'DELETE', '/_admin/stats');
        const before = await accountPasses(fresh.accountId);
        const values = Array.from({ length: 6 }, () => randomUUID());
        // Each value once, then the first again (answered from the lookup's cache).
        const answers = await ask(fresh, [
          ...values.map((v) => ({ path: '/documents', project: v })),
          ...[1, 2, 3].map(() => ({ path: '/cost-codes', project: values[0]! })),
        ]);
        const started = await startedSince(fresh.accountId, before);
        assert.equal(
          started.length,
          0,
          `${started.length} syncs started by ${answers.length} reads with ${values.length} unknown Project-Id values: ${started.join(', ')}`,
        );
        assert.deepEqual(wrong(answers, 404, /No project \S+ in this account/), []);
        const upstream = await upstreamRequests('pid-fresh');
        const lookups = upstream['GET /projects/:id'] ?? 0;
        assert.deepEqual(upstream, { 'GET /projects/:id': values.length }, 'one upstream lookup per distinct value, nothing else');
        // A real project of the account, by id and by source id: found by the lookup, served by the upstream.
        const upstreamProjects = (await (
          await fetch(`${h.sandbox.url}/projects`, { headers: { ...h.upstreamHeaders, 'account-token': fresh.accountToken } })
        ).json()) as { data: { id: string; source_id: string }[] };
        const p = upstreamProjects.data[0]!;
        const real = await ask(fresh, [
          { path: '/documents', project: p.id },
          { path: '/documents', project: `source_id:${p.source_id}` },
        ]);
        assert.deepEqual(
          real.filter((r) => r.status !== 200).map((r) => `${r.what}: ${r.status} ${JSON.stringify(r.body).slice(0, 160)}`),
          [],
        );
        await idle();
        return {
          tries: answers.length,
          outcome: `404 x${answers.length}, 0 syncs started, ${lookups} upstream lookups (one per value, then cached); a real project by id and source_id: 200`,
        };
      },
      file,
    );
  });

  it('malformed Project-Id values: 400 that says what to send, no sync, no upstream request', async () => {
    await scenario(
      group,
      'malformed Project-Id values (not a UUID, source_id:, or *)',
      async () => {
        await sandboxAdmin(h, 'DELETE', '/_admin/stats');
        const before = await accountPasses(fresh.accountId);
        const values = [
          'not-a-project',
          '12345',
          'source_id:',
          '../../_admin/accounts',
          `${randomUUID()}x`,
          '**',
          `source_id:${'a'.repeat(300)}`,
          'source_id:a\tb',
        ];
        const answers = await ask(
          fresh,
          values.map((v) => ({ path: '/documents', project: v })),
        );
        const started = await startedSince(fresh.accountId, before);
        assert.equal(started.length, 0, `${started.length} syncs started by ${values.length} malformed Project-Id values: ${started.join(', ')}`);
        assert.deepEqual(wrong(answers, 400, /Project-Id/), []);
        assert.deepEqual(await upstreamRequests('pid-fresh'), {}, 'no upstream request');
        return { tries: values.length, outcome: `400 x${values.length}, 0 syncs started, 0 upstream requests` };
      },
      file,
    );
  });

  it('N random Project-Id values once the projects list is mirrored: 404 from the mirror alone', async () => {
    await scenario(
      group,
      'unknown Project-Id values once the projects list is mirrored',
      async () => {
        await sandboxAdmin(h, 'DELETE', '/_admin/stats');
        const before = await accountPasses(known.accountId);
        const values = [...Array.from({ length: 6 }, () => randomUUID()), 'source_id:no-such-project'];
        const paths = () => ['/documents', `/documents/${randomUUID()}`, '/root-folder', `/drawings/${randomUUID()}/versions`];
        const answers = await ask(
          known,
          values.flatMap((v) => paths().map((path) => ({ path, project: v }))),
        );
        const started = await startedSince(known.accountId, before);
        assert.equal(
          started.length,
          0,
          `${started.length} syncs started by ${answers.length} reads with ${values.length} unknown Project-Id values: ${started.slice(0, 3).join(', ')}`,
        );
        assert.deepEqual(wrong(answers, 404, /No project \S+ in this account/), []);
        assert.deepEqual(await upstreamRequests('pid-known'), {}, 'no upstream request');
        return { tries: answers.length, outcome: `404 x${answers.length}, 0 syncs started, 0 upstream requests` };
      },
      file,
    );
  });

  it('N random parent ids of a child resource: 404 from the mirror, no sync', async () => {
    await scenario(
      group,
      'unknown parent ids of a child resource (AP invoice line items)',
      async () => {
        await sandboxAdmin(h, 'DELETE', '/_admin/stats');
        const before = await accountPasses(ledger.accountId);
        const values = Array.from({ length: 6 }, () => randomUUID());
        const answers = await ask(
          ledger,
          values.flatMap((v) => [{ path: `/ap-invoices/${v}/line-items` }, { path: `/ap-invoices/${v}/line-items/${randomUUID()}` }]),
        );
        const started = await startedSince(ledger.accountId, before);
        assert.equal(
          started.length,
          0,
          `${started.length} syncs started by ${answers.length} reads with ${values.length} unknown parent ids: ${started.slice(0, 3).join(', ')}`,
        );
        assert.deepEqual(wrong(answers, 404, /No ap-invoice/), []);
        assert.deepEqual(await upstreamRequests('pid-ledger'), {}, 'no upstream request');
        return { tries: answers.length, outcome: `404 x${answers.length}, 0 syncs started, 0 upstream requests` };
      },
      file,
    );
  });

  it('a scope whose sync fails, read again after each failure: started once per cooldown, not once per read', async () => {
    await scenario(
      group,
      'repeated reads of a scope whose sync keeps failing',
      async () => {
        const fault = await sandboxAdmin<{ id: string }>(h, 'POST', '/_admin/faults', {
          match: { method: 'GET', path: '/vendors' },
          kind: 'status',
          status: 400,
        });
        try {
          const before = await accountPasses(known.accountId);
          // Many reads at once while the scope is not synced yet, then one after each failed sync.
          const answers = await Promise.all(Array.from({ length: 8 }, () => get('/vendors', as(known))));
          await idle();
          const reads = 3;
          for (let i = 0; i < reads; i++) {
            answers.push(await get('/vendors', as(known)));
            await idle();
          }
          // A resource the source system does not serve: no sync can bring it, none is started.
          const unserved = [];
          for (let i = 0; i < reads; i++) {
            unserved.push(await get('/customers', as(known)));
            await idle();
          }
          const started = await startedSince(known.accountId, before);
          assert.deepEqual(started, [`account-sync:${known.accountId}:vendors`], `syncs started by ${answers.length + unserved.length} reads`);
          assert.deepEqual(
            answers.map((r) => r.status),
            answers.map(() => 400),
            "the upstream's answer is relayed",
          );
          assert.deepEqual(
            unserved.map((r) => r.status),
            unserved.map(() => 404),
          );
          const tries = answers.length + unserved.length;
          return {
            tries,
            outcome: `1 sync started by ${answers.length} reads of a failing scope (8 at once, then one after each failure) and ${unserved.length} of an unserved resource`,
          };
        } finally {
          await sandboxAdmin(h, 'DELETE', `/_admin/faults/${fault.id}`);
        }
      },
      file,
    );
  });
});
