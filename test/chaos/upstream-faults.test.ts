// Chaos: the upstream misbehaves (the sandbox's fault injection). Each fault ends either with exactly
// the upstream's data, or with a clear, visible error on the stream (its state and last error, the
// stream workflow's failure in Temporal, the worker's log), never with silent loss or an endless loop.
// Every fault hits one victim account (a crmcloud account, faults on customers unless the fault is
// about the whole account); a fieldops account syncs alongside and must not notice.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { startChaosMirror, type ChaosMirror, type FaultSpec, type LinkedTestAccount } from './env.ts';
import { printOwnRows, scaled, scenario } from './report.ts';

const file = import.meta.filename;
const group = 'upstream faults';

describe('chaos: upstream faults', { timeout: scaled(420_000, 1_200_000) }, () => {
  let m: ChaosMirror;
  let control: LinkedTestAccount;
  /** crmcloud pages hold 200: three pages per resource. */
  const size = 450;
  const pages = 3;
  const customers = (page?: number) => ({
    path: page === undefined ? '^/customers\\?page=' : `^/customers\\?page=${page}&per_page=200`,
    source_system: 'crmcloud',
  });

  before(async () => {
    m = await startChaosMirror({ name: 'upstream-faults', sandbox: { size }, env: { UPSTREAM_TIMEOUT_MS: '3000' } });
    control = await m.link('fieldops');
    assert.deepEqual((await m.runPass(control.accountId)).failed, []);
  });
  after(async () => {
    await m?.close();
    printOwnRows();
  });

  /** Requests the sandbox served to one account on one route (its per-route stats). */
  async function served(account: LinkedTestAccount, route: string): Promise<number> {
    const stats = await m.admin<{ accounts: Record<string, { reference_id: string; by_path: Record<string, number> }> }>('GET', '/_admin/stats');
    return Object.values(stats.accounts).find((a) => a.reference_id === account.referenceId)?.by_path[route] ?? 0;
  }

  /**
   * Links a fresh victim, optionally syncs it once cleanly, injects the faults, runs a full pass of
   * the victim and of the control account at once, then reads the faults' hit counts.
   */
  async function faultedPass(faults: FaultSpec[], options: { presync?: boolean; during?: (victim: LinkedTestAccount) => Promise<void> } = {}) {
    const victim = await m.link('crmcloud');
    if (options.presync) assert.deepEqual((await m.runPass(victim.accountId)).failed, []);
    const ids = [];
    for (const f of faults) ids.push(await m.fault(f));
    const before = await served(victim, 'GET /customers');
    const passes = Promise.all([m.runPass(victim.accountId, { timeoutMs: 400_000 }), m.runPass(control.accountId)]);
    await options.during?.(victim);
    const [result, controlResult] = await passes;
    // A fault with `times` leaves the registry once it fired that often.
    const live = new Map((await m.faults()).map((f) => [f.id, f.hits]));
    const hits = ids.reduce((n, id, i) => n + (live.get(id) ?? faults[i]!.times ?? 0), 0);
    const requests = (await served(victim, 'GET /customers')) - before;
    await m.clearFaults();
    assert.deepEqual(controlResult.failed, [], 'the control account is unaffected');
    return { victim, result, hits, requests };
  }

  /** The fault was absorbed: the victim holds exactly the upstream's records, every stream synced. */
  async function assertRecovered(victim: LinkedTestAccount, result: { failed: unknown[] }): Promise<string> {
    assert.deepEqual(result.failed, [], 'no stream failed');
    const streams = await m.streams(victim.accountId);
    assert.deepEqual(
      streams.filter((s) => s.state !== 'synced'),
      [],
      'every stream synced',
    );
    const exact = await m.assertExact(victim);
    return `${exact.records} records in ${exact.streams} streams exact`;
  }

  /**
   * The fault could not be absorbed: the stream failed visibly (state, last error, Temporal, log),
   * lost nothing it had (no record marked deleted, what it holds is the upstream's), and the other
   * streams of the account completed.
   */
  async function assertVisibleFailure(
    victim: LinkedTestAccount,
    result: { failed: { resource: string; error?: string }[] },
    resource: string,
    pattern: RegExp,
    others: readonly string[],
  ): Promise<string> {
    assert.ok(
      result.failed.some((f) => f.resource === resource),
      `the pass reports ${resource} as failed: ${JSON.stringify(result.failed)}`,
    );
    const s = (await m.stream(victim.accountId, resource))!;
    assert.equal(s.state, 'failed', `the ${resource} stream is marked failed`);
    assert.match(s.last_error ?? '', pattern, 'the stream carries a clear error');
    const wf = await m.temporal.workflow.getHandle(`stream:${victim.accountId}:${resource}:-`).describe();
    assert.equal(wf.status.name, 'FAILED', 'the stream workflow failed in Temporal');
    assert.ok(
      m.logs.of('worker').some((l) => pattern.test(l.line)),
      'the worker logged the failure',
    );
    const { rows } = await m.services.pool.query<{ n: number }>(
      `SELECT count(*)::int AS n FROM records WHERE account_id = $1 AND resource = $2 AND deleted_at IS NOT NULL`,
      [victim.accountId, resource],
    );
    assert.equal(rows[0]!.n, 0, 'nothing was marked deleted');
    const truth = (await m.oracle(victim, [resource])).get(`${resource}|`)!;
    const mine = (await m.mirrored(victim.accountId, [resource])).get(`${resource}|`) ?? [];
    const byId = new Map(truth.map((o) => [String(o.id), o]));
    for (const o of mine) assert.deepEqual(o, byId.get(String(o.id)), "what the mirror holds is the upstream's");
    if (others.length > 0) {
      const ok = (await m.streams(victim.accountId)).filter((x) => others.includes(x.resource));
      assert.ok(ok.length === others.length && ok.every((x) => x.state === 'synced'), 'the other streams completed');
      await m.assertExact(victim, { only: others });
    }
    return `stream failed visibly ("${(s.last_error ?? '').slice(0, 90)}"), Temporal FAILED, logged; ${mine.length}/${truth.length} records kept, none deleted; other streams exact`;
  }

  const otherResources = ['leads', 'opportunities', 'activities'];

  for (const status of [500, 502, 503]) {
    it(`absorbs ${status} answers`, async () => {
      await scenario(
        group,
        `${status} on customers pages (x4)`,
        async () => {
          const r = await faultedPass([{ kind: 'status', status, times: 4, match: customers() }]);
          assert.equal(r.hits, 4);
          return { tries: r.hits, outcome: `retried; ${await assertRecovered(r.victim, r.result)}; ${r.requests} customers requests` };
        },
        file,
      );
    });
  }

  it('absorbs a 429 storm without a hot loop, or fails it visibly', async () => {
    const storm = scaled(20, 80);
    await scenario(
      group,
      `429 storm: ${storm} rate-limited answers across the account (Retry-After 1 s)`,
      async () => {
        const r = await faultedPass([{ kind: 'rate-limit', times: storm, retry_after: 1, match: { source_system: 'crmcloud' } }]);
        // Every 429 is waited out (the reset time), not hammered: requests stay close to pages + 429s.
        assert.ok(r.requests <= pages + r.hits + 3, `customers was asked ${r.requests} times for ${r.hits} 429s`);
        if (r.result.failed.length === 0) {
          assert.equal(r.hits, storm);
          return { tries: r.hits, outcome: `waited out; ${await assertRecovered(r.victim, r.result)}; ${r.requests} customers requests for ${pages} pages` };
        }
        // A storm longer than a stream's retry budget (each 429 spends one of its 10 activity
        // attempts) ends the stream: visibly, with nothing lost, the other account untouched.
        const failed = r.result.failed.map((f) => f.resource);
        for (const resource of failed) {
          const s = (await m.stream(r.victim.accountId, resource))!;
          assert.equal(s.state, 'failed');
          assert.match(s.last_error ?? '', /rate limit/i);
        }
        const outcome = await assertVisibleFailure(
          r.victim,
          r.result,
          failed[0]!,
          /rate limit/i,
          otherResources.filter((x) => !failed.includes(x)),
        );
        return {
          tries: r.hits,
          outcome: `${failed.length} of 4 streams failed after their 10 attempts (each 429 spends one): ${outcome}; ${r.requests} customers requests, no hot loop`,
        };
      },
      file,
    );
  });

  it("waits out a rate limit longer than a stream's retry budget", async () => {
    await scenario(
      group,
      '12 rate-limited answers in a row on one stream (customers)',
      async () => {
        const r = await faultedPass([{ kind: 'rate-limit', times: 12, retry_after: 1, match: customers() }]);
        return { tries: r.hits, outcome: `waited out; ${await assertRecovered(r.victim, r.result)}` };
      },
      file,
    );
  });

  it('absorbs timeouts (requests the upstream never answers)', async () => {
    await scenario(
      group,
      'timeout: customers requests never answered (x2; client timeout 3 s)',
      async () => {
        const r = await faultedPass([{ kind: 'timeout', times: 2, match: customers() }]);
        assert.equal(r.hits, 2);
        return { tries: r.hits, outcome: `timed out and retried; ${await assertRecovered(r.victim, r.result)}` };
      },
      file,
    );
  });

  it('absorbs connection resets', async () => {
    await scenario(
      group,
      'connection reset on customers (x3)',
      async () => {
        const r = await faultedPass([{ kind: 'reset', times: 3, match: customers() }]);
        assert.equal(r.hits, 3);
        return { tries: r.hits, outcome: `retried; ${await assertRecovered(r.victim, r.result)}` };
      },
      file,
    );
  });

  for (const kind of ['truncated-json', 'malformed-json'] as const) {
    it(`absorbs ${kind} bodies`, async () => {
      await scenario(
        group,
        `${kind} bodies on customers (x3)`,
        async () => {
          const r = await faultedPass([{ kind, times: 3, match: customers() }]);
          assert.equal(r.hits, 3);
          return { tries: r.hits, outcome: `refetched; ${await assertRecovered(r.victim, r.result)}` };
        },
        file,
      );
    });
  }

  it('is not fooled by has_more_results: true on the last page', async () => {
    await scenario(
      group,
      'has_more_results lies: true on the last page of customers',
      async () => {
        const r = await faultedPass([{ kind: 'lying-has-more', has_more_results: true, match: customers(pages) }]);
        assert.equal(r.hits, 1);
        return { tries: r.hits, outcome: `stopped at the empty page after it; ${await assertRecovered(r.victim, r.result)}` };
      },
      file,
    );
  });

  it('never loses records when has_more_results lies false on a full middle page', async () => {
    await scenario(
      group,
      'has_more_results lies: false on a full first page of customers (account synced before)',
      async () => {
        const r = await faultedPass([{ kind: 'lying-has-more', has_more_results: false, match: customers(1) }], { presync: true });
        assert.equal(r.hits, 1);
        const customersFailed = r.result.failed.some((f) => f.resource === 'customers');
        const outcome = customersFailed
          ? await assertVisibleFailure(r.victim, r.result, 'customers', /has_more|pagination|page/i, otherResources)
          : await assertRecovered(r.victim, r.result);
        return { tries: r.hits, outcome };
      },
      file,
    );
  });

  it('calls a stream stalled, not failed, when its next page is the page before forever', async () => {
    await scenario(
      group,
      'repeat-page: every customers page serves page 1 (unlimited)',
      async () => {
        const r = await faultedPass([{ kind: 'repeat-page', match: customers() }], { presync: true });
        // Page 2 is page 1 again: the checkpoint cannot move. Three attempts (MIRROR_STALL_ATTEMPTS), each
        // of page 2 and the pages fetched ahead of it at most: no loop, and stalled rather than failed.
        assert.ok(r.requests <= 1 + 3 * 3, `customers was asked ${r.requests} times`);
        assert.ok(!r.result.failed.some((f) => f.resource === 'customers'), `customers is not reported failed: ${JSON.stringify(r.result.failed)}`);
        const s = (await m.stream(r.victim.accountId, 'customers'))!;
        assert.equal(s.state, 'stalled');
        assert.match(s.last_error ?? '', /same page returned 3 times: customers page 2 came back as page 1 again/);
        const { rows } = await m.services.pool.query<{ n: number }>(`SELECT count(*)::int AS n FROM records WHERE account_id = $1 AND deleted_at IS NOT NULL`, [
          r.victim.accountId,
        ]);
        assert.equal(rows[0]!.n, 0, 'nothing was marked deleted');
        const others = (await m.streams(r.victim.accountId)).filter((x) => otherResources.includes(x.resource));
        assert.ok(others.length === otherResources.length && others.every((x) => x.state === 'synced'), 'the other streams completed');
        await m.assertExact(r.victim, { only: otherResources });
        return {
          tries: r.hits,
          outcome: `customers stalled ("${(s.last_error ?? '').slice(0, 80)}"), nothing deleted, other streams exact; ${r.requests} requests, no loop`,
        };
      },
      file,
    );
  });

  it('refuses the account, not its streams, when its token is revoked mid-sync; other accounts unaffected', async () => {
    await scenario(
      group,
      'account token revoked mid-sync (every later request of the account answers 401)',
      async () => {
        // Customers' pages are slowed so the revocation lands mid-stream.
        const r = await faultedPass([{ kind: 'slow', delay_ms: 700, match: customers() }], {
          presync: true,
          during: async () => {
            await sleep(900);
            await m.fault({ kind: 'status', status: 401, match: { source_system: 'crmcloud' } });
          },
        });
        // A refused credential is the account's state, confirmed by one upstream call: no stream fails for it.
        assert.deepEqual(r.result.failed, [], 'no stream is failed for a refused credential');
        const { rows } = await m.services.pool.query<{ status: string; status_reason: string | null }>(
          'SELECT status, status_reason FROM linked_accounts WHERE id = $1',
          [r.victim.accountId],
        );
        assert.equal(rows[0]?.status, 'credentials_refused', 'the account is credentials_refused within the pass');
        const s = (await m.stream(r.victim.accountId, 'customers'))!;
        assert.notEqual(s.state, 'failed', 'the customers stream is not marked failed');
        const deleted = await m.services.pool.query<{ n: number }>('SELECT count(*)::int AS n FROM records WHERE account_id = $1 AND deleted_at IS NOT NULL', [
          r.victim.accountId,
        ]);
        assert.equal(deleted.rows[0]!.n, 0, 'nothing was marked deleted');
        return { tries: 1, outcome: `account credentials_refused, customers ${s.state}, nothing deleted, the control account synced` };
      },
      file,
    );
  });

  it('rides out a source system that goes offline, then syncs it fully', async () => {
    const outageMs = scaled(10_000, 150_000);
    await scenario(
      group,
      `source system offline (every crmcloud request 503) for ${outageMs / 1000} s`,
      async () => {
        let controlDone = 0;
        let refused = 0;
        const r = await faultedPass([{ kind: 'status', status: 503, match: { source_system: 'crmcloud' } }], {
          presync: true,
          during: async () => {
            // The outage is the fault's definition: it lasts outageMs, while another account syncs.
            const started = Date.now();
            const other = await m.runPass(control.accountId);
            assert.deepEqual(other.failed, []);
            controlDone = Date.now() - started;
            await sleep(Math.max(0, outageMs - controlDone));
            refused = (await m.faults()).reduce((n, f) => n + f.hits, 0);
            await m.clearFaults();
          },
        });
        assert.ok(controlDone < outageMs, 'the other source system synced during the outage');
        // Backed off, not hammered: a handful of attempts per stream per doubling of the wait.
        const bound = 4 * 3 * (Math.ceil(Math.log2(outageMs / 1000)) + 3);
        assert.ok(refused > 0 && refused <= bound, `${refused} requests during the outage (bound ${bound})`);
        return {
          tries: refused,
          outcome: `backed off (${refused} refused requests); other account synced in ${controlDone} ms meanwhile; ${await assertRecovered(r.victim, r.result)}`,
        };
      },
      file,
    );
  });

  it('leaks no secret into logs or error bodies', async () => {
    await scenario(
      'secrets',
      'scan of upstream-fault logs and error bodies',
      async () => {
        const scan = m.scanForSecrets();
        assert.deepEqual(scan.findings, []);
        return { tries: scan.lines + scan.bodies, outcome: `${scan.lines} log lines, ${scan.bodies} error bodies, ${scan.secrets} secrets: none found` };
      },
      file,
    );
  });
});
