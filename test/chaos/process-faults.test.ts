// Chaos: process faults other than the worker's death. Postgres connections of the worker are
// terminated in the middle of a page's transaction (and then all at once, idle ones included); the
// API process is killed with SIGKILL while reads, async requests and webhook deliveries are in flight.
// Every stream must end with exactly the upstream's data, nothing stuck, nothing half-written.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import pg from 'pg';
import { waitFor } from '../helpers/processes.ts';
import { canonical, startChaosMirror, type ChaosMirror, type LinkedTestAccount } from './env.ts';
import { printOwnRows, scaled, scenario } from './report.ts';

const file = import.meta.filename;

describe('chaos: Postgres connection loss and API kill -9', { timeout: scaled(300_000, 900_000) }, () => {
  let m: ChaosMirror;
  let crm: LinkedTestAccount;
  let field: LinkedTestAccount;
  /** 3 pages of 200 per crmcloud resource in the small size. */
  const size = scaled(450, 1500);

  before(async () => {
    m = await startChaosMirror({ name: 'process-faults', sandbox: { size } });
    crm = await m.link('crmcloud');
    field = await m.link('fieldops');
  });
  after(async () => {
    await m?.close();
    printOwnRows();
  });

  /** Exits of the worker nobody asked for, during the Postgres scenario. */
  let pgCrashes: { code: number | null; signal: NodeJS.Signals | null }[] = [];
  let pgCrashLines: string[] = [];

  it('ends with exactly the upstream data after Postgres connections are lost mid-transaction, then all at once', async () => {
    const terminations = scaled(1, 6);
    await scenario(
      'process: Postgres connection loss',
      `worker's connection terminated inside a page transaction (x${terminations}), then all its connections at once`,
      async () => {
        // Pages of customers and leads are slowed a little so their transactions can be caught.
        await m.fault({ kind: 'slow', delay_ms: 150, match: { path: '^/(customers|leads)\\?page=', source_system: 'crmcloud' } });
        const run = await m.sync.start({ accountId: crm.accountId, mode: 'full' });
        const fieldRun = await m.sync.start({ accountId: field.accountId, mode: 'full' });
        const killer = new pg.Client({ connectionString: m.db.url, application_name: 'chaos-killer' });
        await killer.connect();
        const blocker = new pg.Client({ connectionString: m.db.url, application_name: 'chaos-blocker' });
        await blocker.connect();
        let killed = 0;
        const killedQueries: string[] = [];
        try {
          for (let i = 0; i < terminations; i++) {
            // Hold the stream's row: the worker's page transaction writes its records, then waits on
            // the checkpoint update (or the pass's row lock). That is the moment its connection is cut.
            const resource = i % 2 === 0 ? 'customers' : 'leads';
            const started = await waitFor(
              `${resource} stream to start`,
              async () => {
                const s = await m.stream(crm.accountId, resource);
                return s ? { done: s.checkpoint?.done ?? false, pages: s.pages } : undefined;
              },
              { timeoutMs: 60_000, intervalMs: 20 },
            );
            if (started.done) break;
            await blocker.query('BEGIN');
            await blocker.query(`SELECT 1 FROM streams WHERE account_id = $1 AND resource = $2 FOR UPDATE`, [crm.accountId, resource]);
            const victim = await waitFor(
              'a worker transaction blocked on the stream row',
              async () => {
                const { rows } = await killer.query<{ pid: number; query: string }>(
                  `SELECT pid, query FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock' AND application_name <> 'chaos-blocker' AND xact_start IS NOT NULL`,
                );
                return rows[0];
              },
              { timeoutMs: 30_000, intervalMs: 10 },
            ).catch(() => undefined);
            if (victim) {
              await killer.query('SELECT pg_terminate_backend($1)', [victim.pid]);
              killed++;
              killedQueries.push(victim.query.trim().split(/\s+/).slice(0, 3).join(' '));
            }
            await blocker.query('ROLLBACK');
            // Let the retried activity commit again before the next cut.
            await waitFor(
              'the stream to move on',
              async () => {
                const s = await m.stream(crm.accountId, resource);
                return s && (s.pages > started.pages || s.checkpoint?.done);
              },
              { timeoutMs: 120_000, intervalMs: 20 },
            );
          }
          // Then every connection of the mirror's processes at once, idle ones included.
          const { rows } = await killer.query<{ n: number }>(
            `SELECT count(pg_terminate_backend(pid))::int AS n FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid() AND application_name NOT LIKE 'chaos-%' AND backend_type = 'client backend'`,
          );
          killed += rows[0]!.n;
        } finally {
          await blocker.end().catch(() => undefined);
          await killer.end().catch(() => undefined);
        }
        await m.clearFaults();
        assert.ok(killed >= 2, `connections were cut (${killed})`);
        const result = await m.resultWithin(run.workflowId, 240_000);
        const fieldResult = await m.resultWithin(fieldRun.workflowId, 240_000);
        await m.worker.restarted();
        await m.api.restarted();
        pgCrashes = [...m.worker.crashes, ...m.api.crashes];
        pgCrashLines = m.logs.lines
          .filter((l) => /Unhandled 'error' event|Connection terminated unexpectedly/.test(l.line))
          .map((l) => `${l.process}: ${l.line.trim()}`);
        assert.deepEqual(result.failed, [], 'no crmcloud stream failed');
        assert.deepEqual(fieldResult.failed, [], 'no fieldops stream failed');
        const exact = await m.assertExact(crm);
        const exactField = await m.assertExact(field);
        for (const a of [crm, field]) {
          const s = await m.streams(a.accountId);
          assert.deepEqual(
            s.filter((x) => x.state !== 'synced'),
            [],
            'no stream stuck',
          );
          for (const x of s) {
            const { rows } = await m.services.pool.query<{ n: number }>(
              `SELECT count(*)::int AS n FROM records WHERE account_id = $1 AND resource = $2 AND scope = $3 AND deleted_at IS NULL`,
              [a.accountId, x.resource, x.scope],
            );
            assert.equal(x.records, rows[0]!.n, `streams.records of ${x.resource} counts each record once`);
          }
        }
        return {
          tries: killed,
          outcome: `${killed} connections cut (mid-transaction in: ${killedQueries.join('; ') || 'none'}); ${exact.records + exactField.records} records in ${exact.streams + exactField.streams} streams exact, no stream stuck; process crashes restarted by the supervisor: ${pgCrashes.length}`,
        };
      },
      file,
    );
  });

  it('keeps the worker alive when Postgres connections are lost', async () => {
    await scenario(
      'process: Postgres connection loss',
      'worker process survives lost connections (no crash)',
      async () => {
        assert.deepEqual(
          pgCrashes,
          [],
          `the mirror's processes crashed on lost Postgres connections: ${JSON.stringify(pgCrashes)}; ${pgCrashLines.slice(0, 2).join(' | ')}`,
        );
        return { tries: 1, outcome: 'no process crashed' };
      },
      file,
    );
  });

  it('loses nothing acknowledged and serves correct data after the API is killed mid-request', async () => {
    const kills = scaled(1, 3);
    await scenario(
      'process: API kill -9',
      `API killed with reads, async requests and webhook deliveries in flight (x${kills}), restarted on the same port`,
      async () => {
        // A third account with webhooks: changes reach the API while it dies.
        const hooked = await m.link('crmcloud');
        const first = await m.runPass(hooked.accountId, { registerWebhooks: true });
        assert.deepEqual(first.failed, []);
        const { rows: hooks } = await m.services.pool.query<{ upstream_id: string }>(`SELECT upstream_id FROM webhook_registrations WHERE account_id = $1`, [
          hooked.accountId,
        ]);
        const hookIds = new Set(hooks.map((h) => h.upstream_id));
        assert.ok(hookIds.size > 0, 'webhooks were registered upstream');
        const churnSeconds = scaled(12, 30);
        await m.admin('POST', '/_admin/churn', { account_token: hooked.accountToken, per_second: 20, seconds: churnSeconds });
        let stop = false;
        let inFlight = 0;
        const readErrors: string[] = [];
        const accepted: string[] = [];
        const reader = async (account: LinkedTestAccount, i: number) => {
          while (!stop) {
            inFlight++;
            try {
              const async = i % 3 === 0;
              const res = await m.apiFetch(`/leads?page=1&per_page=200`, {
                headers: { 'account-token': account.accountToken, ...(async ? { 'async-request': 'true' } : {}) },
              });
              const id = res.headers.get('svc-async-request-id');
              if (async && res.status === 202 && id) accepted.push(`${account.accountToken}|${id}`);
              else if (res.status !== 200) readErrors.push(`${res.status} ${res.text.slice(0, 100)}`);
            } catch {
              // The connection died with the API: expected while it is down. Try again shortly.
              await sleep(100);
            } finally {
              inFlight--;
            }
          }
        };
        const readers = [0, 1, 2, 3, 4, 5].map((i) => reader(i % 2 === 0 ? crm : hooked, i));
        try {
          for (let k = 0; k < kills; k++) {
            await waitFor('reads in flight', () => inFlight >= 2, { timeoutMs: 30_000, intervalMs: 2 });
            await m.api.kill9();
            // Deliveries fail while it is down (the proxy answers 502): wait until one did.
            const failedBefore = (await deliveries()).filter((d) => d.status !== 200).length;
            await waitFor(
              'a webhook delivery to fail while the API is down',
              async () => (await deliveries()).filter((d) => d.status !== 200).length > failedBefore,
              { timeoutMs: 30_000, intervalMs: 100 },
            );
            await m.api.start();
          }
        } finally {
          stop = true;
          await Promise.all(readers);
        }
        assert.deepEqual(readErrors, [], 'every answered read was a 200');
        // The churn ends; every delivery has been attempted; the inbox is applied.
        await waitFor('the churn to end', async () => (await m.admin<{ data: unknown[] }>('GET', '/_admin/churn')).data.length === 0, {
          timeoutMs: (churnSeconds + 30) * 1000,
          intervalMs: 200,
        });
        let settled = -1;
        await waitFor(
          'webhook deliveries to settle',
          async () => {
            const n = (await deliveries()).length;
            const same = n === settled;
            settled = n;
            return same;
          },
          { timeoutMs: 60_000, intervalMs: 1500 },
        );
        await waitFor(
          'the inbox to be applied',
          async () => {
            const { rows } = await m.services.pool.query<{ n: number }>(
              `SELECT count(*)::int AS n FROM inbox_events WHERE account_id = $1 AND applied_at IS NULL`,
              [hooked.accountId],
            );
            return rows[0]!.n === 0;
          },
          { timeoutMs: 120_000, intervalMs: 250 },
        );
        const log = await deliveries();
        const acked = log.filter((d) => d.status === 200);
        const lost = log.filter((d) => d.status !== 200);
        const statuses = Object.entries(log.reduce<Record<string, number>>((h, d) => ({ ...h, [String(d.status)]: (h[String(d.status)] ?? 0) + 1 }), {}))
          .map(([k, n]) => `${k}: ${n}`)
          .join(', ');
        assert.ok(lost.length > 0, 'some deliveries failed while the API was down');
        assert.ok(acked.length > 0, `some deliveries were acknowledged (${statuses})`);
        // At least once: every acknowledged delivery is in the inbox.
        const { rows: inbox } = await m.services.pool.query<{ event: string; target: string }>(`SELECT event, target FROM inbox_events WHERE account_id = $1`, [
          hooked.accountId,
        ]);
        const stored = new Set(inbox.map((e) => `${e.event}|${e.target}`));
        const missing = acked.filter((d) => !stored.has(`${d.event}|${d.target}`));
        assert.deepEqual(missing, [], 'every delivery the mirror acknowledged is in its inbox');
        // Before a full pass, the mirror differs from the upstream only in objects whose events were lost.
        const [truth, mirror] = [await m.oracle(hooked), await m.mirrored(hooked.accountId)];
        const lostTargets = new Set(lost.map((d) => d.target));
        const stale: string[] = [];
        const sample = new Map<string, string>();
        for (const [k, list] of truth) {
          const mine = new Map((mirror.get(k) ?? []).map((o) => [String(o.id), canonical(o)]));
          const theirs = new Map(list.map((o) => [String(o.id), canonical(o)]));
          for (const id of new Set([...mine.keys(), ...theirs.keys()])) {
            if (mine.get(id) === theirs.get(id)) continue;
            stale.push(id);
            sample.set(id, `${k}: mirror ${mine.get(id)?.slice(0, 400) ?? 'none'} upstream ${theirs.get(id)?.slice(0, 400) ?? 'none'}`);
          }
        }
        const unexplained = stale.filter((id) => !lostTargets.has(id));
        assert.deepEqual(
          unexplained,
          [],
          `every difference is an object whose event was lost; e.g. ${sample.get(unexplained[0] ?? '')} (events: ${JSON.stringify(log.filter((d) => d.target === unexplained[0]))})`,
        );
        // Every async request the API accepted finishes, even if the API died right after.
        for (const a of accepted) {
          const [token, id] = a.split('|') as [string, string];
          await waitFor(
            `async request ${id} to finish`,
            async () => {
              const res = await m.apiFetch(`/async-requests/${id}`, { headers: { 'account-token': token } });
              return res.headers.get('svc-async-request-state') === 'executed' && res.status === 200;
            },
            { timeoutMs: 60_000, intervalMs: 250 },
          );
        }
        // The periodic full pass repairs what was lost.
        const repair = await m.runPass(hooked.accountId, { mode: 'full' });
        assert.deepEqual(repair.failed, []);
        // Content and completeness here; the upstream's order after churn is its own scenario below.
        const exact = await m.assertExact(hooked, { ordered: false });
        churned = hooked;
        const exactOther = await m.assertExact(crm);
        return {
          tries: kills,
          outcome: `deliveries ${statuses}: every acknowledged one is in the inbox; ${lost.length} lost while down, ${stale.length} objects stale until the full pass (all explained by lost deliveries); ${accepted.length} async requests all executed; after a full pass ${exact.records + exactOther.records} records exact`,
        };

        async function deliveries() {
          const { data } = await m.admin<{ data: { webhook_id: string; event: string; target: string; status: number | string; at: string }[] }>(
            'GET',
            '/_admin/webhook-deliveries',
          );
          return data.filter((d) => hookIds.has(d.webhook_id));
        }
      },
      file,
    );
  });

  let churned: LinkedTestAccount | undefined;
  it('keeps the upstream order after churn (events, lost events) and a repairing full pass', async () => {
    await scenario(
      'process: API kill -9',
      'list order equals the upstream order after churn and a full pass',
      async () => {
        assert.ok(churned, 'the API-kill scenario ran');
        const exact = await m.assertExact(churned);
        return { tries: 1, outcome: `${exact.records} records in the upstream order` };
      },
      file,
    );
  });

  it('leaks no secret into logs or error bodies', async () => {
    await scenario(
      'secrets',
      'scan of process-fault logs and error bodies',
      async () => {
        const scan = m.scanForSecrets();
        assert.deepEqual(scan.findings, []);
        return { tries: scan.lines + scan.bodies, outcome: `${scan.lines} log lines, ${scan.bodies} error bodies, ${scan.secrets} secrets: none found` };
      },
      file,
    );
  });
});
