// Chaos: the worker process is killed with SIGKILL in the middle of a stream and started again
//. The stream must finish with exactly the upstream's records, no duplicates and no
// gaps, without refetching the pages it had committed (the sandbox counts every page it served), and
// `streams.pages` must count each page once. Deletions: a record deleted upstream is marked deleted
// after the next complete full pass, never after a failed one.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { alive, childProcesses, waitFor } from '../helpers/processes.ts';
import { startChaosMirror, type ChaosMirror, type LinkedTestAccount } from './env.ts';
import { printOwnRows, scaled, scenario } from './report.ts';

const file = import.meta.filename;
const group = 'process: worker kill -9';

describe('chaos: worker killed mid-stream', { timeout: scaled(300_000, 900_000) }, () => {
  let m: ChaosMirror;
  let crm: LinkedTestAccount;
  let field: LinkedTestAccount;
  /** The mirror asks crmcloud for its maximum page (200): `size` records make size/200 pages per resource. */
  const size = scaled(1000, 3000);
  let perPage = 0;
  let pages = 0;
  const kills = scaled(1, 3);

  before(async () => {
    m = await startChaosMirror({ name: 'worker-kill', sandbox: { size } });
    crm = await m.link('crmcloud');
    field = await m.link('fieldops');
    const { data } = await m.admin<{ data: { slug: string; max_per_page: number }[] }>('GET', '/_admin/source-systems');
    perPage = data.find((p) => p.slug === 'crmcloud')!.max_per_page;
    pages = Math.ceil(size / perPage);
  });
  after(async () => {
    await m?.close();
    printOwnRows();
  });

  it('resumes at the last committed page after kill -9, with exactly the upstream records and no committed page fetched twice', async () => {
    await scenario(
      group,
      `kill -9 of the worker mid-stream, restart (crmcloud customers, ${pages} pages of ${perPage}, ${kills} kill(s)) + a fieldops account alongside`,
      async () => {
        // Each page of customers gets a slow fault of its own: it slows the stream so the kill lands
        // mid-stream, and its hit count is how many times the sandbox served that page.
        const pageFault = new Map<number, string>();
        for (let p = 1; p <= pages + 1; p++) {
          pageFault.set(
            p,
            await m.fault({ kind: 'slow', delay_ms: 300, match: { path: `^/customers\\?page=${p}&per_page=${perPage}$`, source_system: 'crmcloud' } }),
          );
        }
        const run = await m.sync.start({ accountId: crm.accountId, mode: 'full' });
        const fieldRun = await m.sync.start({ accountId: field.accountId, mode: 'full' });
        const committedAtKill: number[] = [];
        const servedAtCommit = new Map<number, number>();
        for (let k = 1; k <= kills; k++) {
          // Kill once the stream has committed a few more pages than at the previous kill.
          const target = Math.min(pages - 1, Math.round((k * pages) / (kills + 1)) + 1);
          await waitFor(
            `customers to commit page ${target}`,
            async () => {
              const s = await m.stream(crm.accountId, 'customers');
              return s && s.pages >= target && s.checkpoint && !s.checkpoint.done;
            },
            { timeoutMs: 120_000, intervalMs: 20 },
          );
          // `mirror worker` runs the worker in a child started with its memory settings (bin/worker-relaunch.js);
          // kill -9 of the command must take the worker with it.
          const [worker] = childProcesses(m.worker.pid!);
          assert.ok(worker, 'the worker runs in a child of the command');
          assert.equal(worker.env.MALLOC_ARENA_MAX, process.env.MALLOC_ARENA_MAX ?? '1');
          assert.ok(worker.argv.includes('--max-semi-space-size=4'), worker.argv.join(' '));
          await m.worker.kill9();
          await waitFor('the worker process to die with the command', () => !alive(worker.pid), { timeoutMs: 10_000, intervalMs: 20 });
          // A COMMIT the dead worker had sent may still land: wait until its sessions are gone.
          await m.quiesceDatabase();
          const s = (await m.stream(crm.accountId, 'customers'))!;
          assert.equal(s.checkpoint!.page, s.pages + 1, 'the checkpoint names the page after the last committed one');
          committedAtKill.push(s.pages);
          // How often each page had been served when the worker died: a committed page must not be
          // served again after this (it may have been served more than once before it was committed:
          // an HTTP retry on a slow answer).
          const now = new Map((await m.faults()).map((f) => [f.id, f.hits]));
          for (let p = 1; p <= s.pages; p++) if (!servedAtCommit.has(p)) servedAtCommit.set(p, now.get(pageFault.get(p)!) ?? 0);
          await m.worker.start();
        }
        const result = await m.resultWithin(run.workflowId, 240_000);
        assert.deepEqual(result.failed, [], 'no stream failed');
        const fieldResult = await m.resultWithin(fieldRun.workflowId, 240_000);
        assert.deepEqual(fieldResult.failed, [], 'no stream of the other account failed');

        const hits = new Map((await m.faults()).map((f) => [f.id, f.hits]));
        await m.clearFaults();
        const servedTwice: number[] = [];
        for (let p = 1; p <= pages; p++) {
          const n = hits.get(pageFault.get(p)!) ?? 0;
          assert.ok(n >= 1, `page ${p} was fetched`);
          if (n > 1) servedTwice.push(p);
          // A page committed before a kill is never fetched again after it.
          const atCommit = servedAtCommit.get(p);
          if (atCommit !== undefined) assert.equal(n, atCommit, `page ${p} was committed before a kill and served again after it (${atCommit} -> ${n})`);
          else assert.ok(n <= 1 + kills + 2, `page ${p} served ${n} times`);
        }
        const s = (await m.stream(crm.accountId, 'customers'))!;
        assert.equal(s.state, 'synced');
        assert.equal(s.pages, pages, 'streams.pages counts each committed page once');
        assert.equal(s.records, size, 'streams.records counts each record once');
        const { rows: runs } = await m.services.pool.query<{ n: number }>(
          `SELECT count(*)::int AS n FROM sync_runs r JOIN streams s ON s.id = r.stream_id WHERE s.account_id = $1 AND s.resource = 'customers'`,
          [crm.accountId],
        );
        assert.equal(runs[0]!.n, 1, 'the killed pass was resumed, not restarted as a new generation');
        const exact = await m.assertExact(crm);
        const exactField = await m.assertExact(field);
        for (const a of [crm, field]) {
          const stuck = (await m.streams(a.accountId)).filter((x) => x.state !== 'synced');
          assert.deepEqual(stuck, [], `every stream of ${a.sourceSystem} is synced`);
        }
        return {
          tries: kills,
          outcome: `resumed; committed pages at kills ${committedAtKill.join(', ')}; ${servedAtCommit.size} pages committed before a kill, none served again after; pages served more than once (in flight at a kill, or retried): ${servedTwice.join(', ') || 'none'}; streams.pages = ${s.pages}/${pages}; ${exact.records + exactField.records} records in ${exact.streams + exactField.streams} streams exact`,
        };
      },
      file,
    );
  });

  it('marks a record deleted upstream only after a complete full pass, never after a failed one', async () => {
    await scenario(
      group,
      'upstream delete + failed full pass, then a complete full pass',
      async () => {
        const { rows } = await m.services.pool.query<{ id: string }>(
          `SELECT id FROM records WHERE account_id = $1 AND resource = 'customers' AND scope = '' AND deleted_at IS NULL ORDER BY ordinal LIMIT 1 OFFSET 3`,
          [crm.accountId],
        );
        const victim = rows[0]!.id;
        await m.admin('DELETE', '/_admin/objects', { account_token: crm.accountToken, resource: 'customers', id: victim });
        // The pass fails for good on a later page (a 400 is not retried): it never completes.
        await m.fault({ kind: 'status', status: 400, match: { path: `^/customers\\?page=${pages - 1}&`, source_system: 'crmcloud' } });
        const failed = await m.runPass(crm.accountId, { mode: 'full' });
        await m.clearFaults();
        assert.equal(failed.failed.length, 1, `exactly one stream failed: ${JSON.stringify(failed.failed)}`);
        assert.equal(failed.failed[0]!.resource, 'customers');
        const s = (await m.stream(crm.accountId, 'customers'))!;
        assert.equal(s.state, 'failed', 'the failure is visible on the stream');
        assert.match(s.last_error ?? '', /400|rejected/i);
        const still = await m.services.pool.query<{ deleted_at: Date | null }>(
          `SELECT deleted_at FROM records WHERE account_id = $1 AND resource = 'customers' AND id = $2`,
          [crm.accountId, victim],
        );
        assert.equal(still.rows[0]!.deleted_at, null, 'a failed pass marks nothing deleted');
        const others = (await m.streams(crm.accountId)).filter((x) => x.resource !== 'customers');
        assert.ok(
          others.every((x) => x.state === 'synced'),
          'the other streams of the account completed',
        );

        const ok = await m.runPass(crm.accountId, { mode: 'full' });
        assert.deepEqual(ok.failed, []);
        const gone = await m.services.pool.query<{ deleted_at: Date | null }>(
          `SELECT deleted_at FROM records WHERE account_id = $1 AND resource = 'customers' AND id = $2`,
          [crm.accountId, victim],
        );
        assert.ok(gone.rows[0]!.deleted_at, 'the complete pass marked it deleted');
        const exact = await m.assertExact(crm);
        return {
          tries: 1,
          outcome: `failed pass: stream failed (${(s.last_error ?? '').slice(0, 60)}...), record kept; complete pass: record marked deleted; ${exact.records} records exact`,
        };
      },
      file,
    );
  });

  it('leaks no secret into logs or error bodies', async () => {
    await scenario(
      'secrets',
      'scan of worker-kill logs and error bodies',
      async () => {
        const scan = m.scanForSecrets();
        assert.deepEqual(scan.findings, []);
        return { tries: scan.lines + scan.bodies, outcome: `${scan.lines} log lines, ${scan.bodies} error bodies, ${scan.secrets} secrets: none found` };
      },
      file,
    );
  });
});
