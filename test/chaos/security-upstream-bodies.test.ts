// Security: the worker takes no more of an upstream's answer than it can use.
// A page far over the body cap, a gzip bomb, a body that trickles forever, pages that cycle
// (1, 2, 1, 2, ...) and full pages that never end (`has_more_results: null`) each end the stream's
// pass, or the request, at a bound: with a clear error naming the stream, the stream marked failed,
// nothing marked deleted, the worker's memory bounded, and the account's other streams synced.
// Caps and bounds are small here (set through the worker's environment) to keep each scenario fast.
import assert from 'node:assert/strict';
import { readFileSync, writeFileSync } from 'node:fs';
import { after, before, describe, it } from 'node:test';
import { childProcesses } from '../helpers/processes.ts';
import { startChaosMirror, type ChaosMirror, type FaultSpec, type LinkedTestAccount } from './env.ts';
import { printOwnRows, scenario } from './report.ts';

const file = import.meta.filename;
const group = 'security';

const MB = 1024 * 1024;
/** The worker's body cap in this test (the largest real page of the sandbox is about 4 MB). */
const maxBody = 8 * MB;
/** Bodies of the oversized page and the gzip bomb: far over the cap. */
const hugeBody = 128 * MB;
const totalTimeoutMs = 6000;
const maxPages = 12;

describe('security: upstream bodies of any size and shape', { timeout: 900_000 }, () => {
  let m: ChaosMirror;
  const others = ['leads', 'opportunities', 'activities'];
  const customers = (page?: number) => ({ path: page === undefined ? '^/customers\\?page=' : `^/customers\\?page=${page}&`, source_system: 'crmcloud' });

  before(async () => {
    m = await startChaosMirror({
      name: 'security-upstream-bodies',
      // crmcloud serves 200 a page: three pages of customers.
      sandbox: { size: 450 },
      env: {
        UPSTREAM_TIMEOUT_MS: '3000',
        UPSTREAM_TOTAL_TIMEOUT_MS: String(totalTimeoutMs),
        UPSTREAM_MAX_BODY_BYTES: String(maxBody),
        SYNC_MAX_PAGES_PER_PASS: String(maxPages),
      },
      startApi: false,
    });
  });
  after(async () => {
    await m?.close();
    printOwnRows();
  });

  /** The worker process (`mirror worker` runs it in a child started with its memory settings). */
  function workerPid(): number {
    return childProcesses(m.worker.pid!)[0]?.pid ?? m.worker.pid!;
  }
  const statusKb = (pid: number, field: string): number =>
    Number(new RegExp(`^${field}:\\s+(\\d+) kB`, 'm').exec(readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1] ?? NaN);

  /**
   * Runs `fn` while watching the worker's resident memory: its growth over what it held before, from
   * its peak (VmHWM, reset first where allowed) and from samples every 50 ms.
   */
  async function memoryDuring<T>(fn: () => Promise<T>): Promise<{ result: T; growthMb: number }> {
    const pid = workerPid();
    const start = statusKb(pid, 'VmRSS');
    let reset = false;
    try {
      writeFileSync(`/proc/${pid}/clear_refs`, '5');
      reset = true;
    } catch {
      // Not allowed here: the samples alone.
    }
    let sampled = start;
    const timer = setInterval(() => {
      try {
        sampled = Math.max(sampled, statusKb(pid, 'VmRSS'));
      } catch {
        // The process went away; the assertion on the pass says why.
      }
    }, 50);
    try {
      const result = await fn();
      const peak = Math.max(sampled, reset ? statusKb(pid, 'VmHWM') : 0);
      return { result, growthMb: Math.round((peak - start) / 1024) };
    } finally {
      clearInterval(timer);
    }
  }

  /** A fresh crmcloud account, synced once cleanly (so a pass that lost its way could delete records). */
  async function victim(): Promise<LinkedTestAccount> {
    const v = await m.link('crmcloud');
    assert.deepEqual((await m.runPass(v.accountId)).failed, []);
    return v;
  }

  /** A full pass of the victim with the faults in place; the faults are cleared however it ends. */
  async function faultedPass(v: LinkedTestAccount, faults: FaultSpec[], timeoutMs: number) {
    const ids: string[] = [];
    try {
      for (const f of faults) ids.push(await m.fault(f));
      const started = Date.now();
      const result = await m.runPass(v.accountId, { timeoutMs });
      // A fault with `times` leaves the registry once it fired that often.
      const live = new Map((await m.faults()).map((f) => [f.id, f.hits]));
      const hits = ids.reduce((n, id, i) => n + (live.get(id) ?? faults[i]!.times ?? 0), 0);
      return { result, ms: Date.now() - started, hits };
    } finally {
      await m.clearFaults();
    }
  }

  /**
   * The customers stream failed visibly and cleanly: reported failed by the pass, marked failed with
   * a clear error naming it, its workflow failed in Temporal, the worker logged it, no record marked
   * deleted, and the account's other streams synced.
   */
  async function assertCleanFailure(v: LinkedTestAccount, result: { failed: { resource: string; error?: string }[] }, pattern: RegExp): Promise<string> {
    assert.ok(
      result.failed.some((f) => f.resource === 'customers'),
      `the pass reports customers as failed: ${JSON.stringify(result.failed)}`,
    );
    const s = (await m.stream(v.accountId, 'customers'))!;
    assert.equal(s.state, 'failed', 'the customers stream is marked failed');
    assert.match(s.last_error ?? '', pattern, 'the stream carries a clear error');
    assert.match(s.last_error ?? '', /customers/, 'the error names the stream');
    const wf = await m.temporal.workflow.getHandle(`stream:${v.accountId}:customers:-`).describe();
    assert.equal(wf.status.name, 'FAILED', 'the stream workflow failed in Temporal');
    assert.ok(
      m.logs.of('worker').some((l) => pattern.test(l.line)),
      'the worker logged the failure',
    );
    const { rows } = await m.services.pool.query<{ n: number }>(`SELECT count(*)::int AS n FROM records WHERE account_id = $1 AND deleted_at IS NOT NULL`, [
      v.accountId,
    ]);
    assert.equal(rows[0]!.n, 0, 'nothing was marked deleted');
    const synced = (await m.streams(v.accountId)).filter((x) => others.includes(x.resource) && x.state === 'synced');
    assert.equal(synced.length, others.length, 'the other streams synced');
    return `customers failed ("${(s.last_error ?? '').slice(0, 110)}"), Temporal FAILED, logged, none deleted, other streams synced`;
  }

  it('stops reading a page at the body cap', async () => {
    await scenario(
      group,
      `oversized page: customers page 1 is ${hugeBody / MB} MB, streamed without a length (cap ${maxBody / MB} MB)`,
      async () => {
        const v = await victim();
        const { result, growthMb } = await memoryDuring(() => faultedPass(v, [{ kind: 'oversized-page', bytes: hugeBody, match: customers(1) }], 120_000));
        assert.ok(growthMb < 64, `the worker's memory grew by ${growthMb} MB`);
        const outcome = await assertCleanFailure(v, result.result, /UPSTREAM_MAX_BODY_BYTES/);
        assert.ok(result.hits <= 2, `the page was asked for ${result.hits} times (a body over the cap is not retried)`);
        return { tries: result.hits, outcome: `${outcome}; worker memory +${growthMb} MB` };
      },
      file,
    );
  });

  it('stops inflating a gzip bomb at the body cap', async () => {
    await scenario(
      group,
      `gzip bomb: customers page 1 inflates to ${hugeBody / MB} MB (cap ${maxBody / MB} MB)`,
      async () => {
        const v = await victim();
        const { result, growthMb } = await memoryDuring(() => faultedPass(v, [{ kind: 'gzip-bomb', bytes: hugeBody, match: customers(1) }], 120_000));
        assert.ok(growthMb < 64, `the worker's memory grew by ${growthMb} MB`);
        const outcome = await assertCleanFailure(v, result.result, /UPSTREAM_MAX_BODY_BYTES/);
        assert.ok(result.hits <= 2, `the page was asked for ${result.hits} times (a body over the cap is not retried)`);
        return { tries: result.hits, outcome: `${outcome}; worker memory +${growthMb} MB` };
      },
      file,
    );
  });

  it('cuts a trickling body at the total time limit', async () => {
    await scenario(
      group,
      `trickle: customers page 1 sends a byte every 500 ms, forever (x2; idle timeout 3 s, total ${totalTimeoutMs / 1000} s)`,
      async () => {
        const v = await victim();
        const r = await faultedPass(v, [{ kind: 'trickle', interval_ms: 500, times: 2, match: customers(1) }], 90_000);
        assert.deepEqual(r.result.failed, [], 'no stream failed: each trickle was cut and the page fetched again');
        assert.equal(r.hits, 2);
        assert.ok(r.ms >= 2 * totalTimeoutMs, `the pass took ${r.ms} ms: each trickle lasted until the total limit`);
        const cut = m.logs.of('worker').filter((l) => /UPSTREAM_TOTAL_TIMEOUT_MS/.test(l.line) && /customers/.test(l.line));
        assert.ok(cut.length >= 1, 'the worker logged the cut, naming the stream and the limit');
        const exact = await m.assertExact(v);
        return {
          tries: r.hits,
          outcome: `each cut at ${totalTimeoutMs / 1000} s and refetched; pass done in ${Math.round(r.ms / 1000)} s; ${exact.records} records in ${exact.streams} streams exact`,
        };
      },
      file,
    );
  });

  it('stops when a page repeats an earlier page, not only the previous one', async () => {
    await scenario(
      group,
      'alternating pages: customers pages 1, 2, 1, 2, ... each with has_more_results true',
      async () => {
        const v = await victim();
        const r = await faultedPass(v, [{ kind: 'alternating-pages', match: customers() }], 90_000);
        const outcome = await assertCleanFailure(v, r.result, /page 3 repeats page 1/);
        assert.ok(r.hits <= 6, `customers was asked ${r.hits} times`);
        return { tries: r.hits, outcome: `${outcome}; ${r.hits} requests, no loop` };
      },
      file,
    );
  });

  it('stops a pass at the page bound', async () => {
    await scenario(
      group,
      `endless pages: every customers page full of new records, has_more_results null (bound ${maxPages} pages)`,
      async () => {
        const v = await victim();
        const r = await faultedPass(v, [{ kind: 'endless-pages', match: customers() }], 90_000);
        const outcome = await assertCleanFailure(v, r.result, /SYNC_MAX_PAGES_PER_PASS/);
        assert.ok(r.hits <= maxPages + 3, `customers was asked ${r.hits} times`);
        return { tries: r.hits, outcome: `${outcome}; ${r.hits} requests` };
      },
      file,
    );
  });
});
