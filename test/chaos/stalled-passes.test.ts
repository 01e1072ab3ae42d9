// Chaos: a pass that makes no progress. The sandbox answers one page of a list as the page before it
// forever (a cursor that does not advance), or never answers it. Within MIRROR_STALL_ATTEMPTS attempts
// the stream is `stalled` (not failed, not synced) with its reason; later passes ask nothing of it
// until its backoff ends, then one attempt a step (the backoff doubling); it shows on the status page,
// in `mirror status` and /metrics, the application hears `stream.stalled`; once the page moves again
// the stream recovers (`stream.recovered`) with exactly the upstream's records. The account's other
// streams and another account syncing alongside are unaffected.
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { createServer, type Server } from 'node:http';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { promisify } from 'node:util';
import { waitFor } from '../helpers/processes.ts';
import { startChaosMirror, type ChaosMirror, type LinkedTestAccount } from './env.ts';
import { printOwnRows, scaled, scenario } from './report.ts';

const file = import.meta.filename;
const group = 'stalled passes';
const run = promisify(execFile);

/** crmcloud pages hold 200: customers has three pages (200, 200, 50). */
const size = 450;
const attempts = 3;
const backoffMs = 20_000;
/** The upstream client's silence limit: a page that never answers costs it this, three times an attempt. */
const timeoutMs = 3_000;
const otherResources = ['leads', 'opportunities', 'activities'];

describe('chaos: stalled passes', { timeout: scaled(600_000, 1_200_000) }, () => {
  let m: ChaosMirror;
  let control: LinkedTestAccount;
  let receiver: Server;
  let receiverUrl: string;
  const received: { event: string; target: string; source_data: { data: { resource?: string; reason?: string } } }[] = [];

  before(async () => {
    receiver = createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => {
        try {
          received.push(JSON.parse(Buffer.concat(chunks).toString('utf8')) as (typeof received)[number]);
        } catch {
          // Not JSON: nothing to record.
        }
        res.writeHead(200).end();
      });
    });
    await new Promise<void>((resolve) => receiver.listen(0, '127.0.0.1', resolve));
    receiverUrl = `http://127.0.0.1:${(receiver.address() as { port: number }).port}/hooks`;
    m = await startChaosMirror({
      name: 'stalled-passes',
      sandbox: { size },
      env: {
        MIRROR_CALLBACK_ALLOW: '127.0.0.1',
        UPSTREAM_TIMEOUT_MS: String(timeoutMs),
        MIRROR_STALL_ATTEMPTS: String(attempts),
        MIRROR_STALL_BACKOFF: `${backoffMs / 1000}s`,
        MIRROR_STALL_BACKOFF_MAX: `${(4 * backoffMs) / 1000}s`,
      },
    });
    control = await m.link('fieldops');
  });
  after(async () => {
    await m?.close();
    await new Promise<void>((resolve) => (receiver ? receiver.close(() => resolve()) : resolve()));
    printOwnRows();
  });

  /** Requests the sandbox served to one account on one route. */
  async function served(account: LinkedTestAccount, route = 'GET /customers'): Promise<number> {
    const stats = await m.admin<{ accounts: Record<string, { reference_id: string; by_path: Record<string, number> }> }>('GET', '/_admin/stats');
    return Object.values(stats.accounts).find((a) => a.reference_id === account.referenceId)?.by_path[route] ?? 0;
  }

  async function stall(
    accountId: string,
  ): Promise<{ state: string; stall_attempts: number; stalls: number; stall_retry_at: Date | null; last_error: string | null }> {
    const { rows } = await m.services.pool.query<{
      state: string;
      stall_attempts: number;
      stalls: number;
      stall_retry_at: Date | null;
      last_error: string | null;
    }>(`SELECT state, stall_attempts, stalls, stall_retry_at, last_error FROM streams WHERE account_id = $1 AND resource = 'customers' AND scope = ''`, [
      accountId,
    ]);
    return rows[0]!;
  }

  async function subscribe(account: LinkedTestAccount, event: string): Promise<void> {
    const r = await m.apiFetch('/webhooks', {
      method: 'POST',
      headers: { 'account-token': account.accountToken, 'content-type': 'application/json' },
      body: JSON.stringify({ callback_url: receiverUrl, event, type: 'account' }),
    });
    assert.equal(r.status, 201, r.text);
  }

  /** A full pass of the victim with one of the control account alongside, which must not notice. */
  async function passWithControl(victim: LinkedTestAccount, timeout = 240_000) {
    const [result, other] = await Promise.all([m.runPass(victim.accountId, { timeoutMs: timeout }), m.runPass(control.accountId)]);
    assert.deepEqual(other.failed, [], 'the control account is unaffected');
    return result;
  }

  /** The stall is visible: status page, `mirror status` (exit 1, the stream and its reason), /metrics. */
  async function assertVisible(victim: LinkedTestAccount, reason: RegExp, stalledStreams: number, stallEvents: number): Promise<void> {
    const page = await m.apiFetch('/status');
    assert.equal(page.status, 200);
    assert.match(page.text, /chip stalled/, 'the status page shows the stalled stream');
    assert.match(page.text, reason, 'with its reason');
    const cli = await run(process.execPath, [join(import.meta.dirname, '../../bin/mirror.js'), 'status', '--account', victim.accountId, '--failed', '--json'], {
      env: { ...process.env, ...m.env },
      maxBuffer: 16 * 1024 * 1024,
    }).then(
      (r) => ({ code: 0, stdout: r.stdout }),
      (e: { code?: number; stdout?: string }) => ({ code: e.code ?? -1, stdout: e.stdout ?? '' }),
    );
    assert.equal(cli.code, 1, '`mirror status` exits 1 on a stalled stream');
    const json = JSON.parse(cli.stdout) as { accounts: { streams: { resource: string; state: string; lastError: string | null }[] }[] };
    const streams = json.accounts[0]!.streams;
    assert.deepEqual(
      streams.map((s) => [s.resource, s.state]),
      [['customers', 'stalled']],
      '`mirror status --failed` names the stalled stream only',
    );
    assert.match(streams[0]!.lastError ?? '', reason);
    const metrics = await m.apiFetch('/metrics');
    assert.match(metrics.text, new RegExp(`mirror_streams_stalled\\{source_system="crmcloud"\\} ${stalledStreams}\\n`));
    assert.match(metrics.text, new RegExp(`mirror_account_events_total\\{event="stream.stalled"\\} ${stallEvents}\\n`));
  }

  /** The other streams of the victim completed with exactly the upstream's records; nothing was marked deleted. */
  async function assertOthersExact(victim: LinkedTestAccount): Promise<void> {
    const streams = await m.streams(victim.accountId);
    assert.deepEqual(
      streams.filter((s) => s.resource !== 'customers' && s.state !== 'synced').map((s) => [s.resource, s.state]),
      [],
      "the account's other streams synced",
    );
    await m.assertExact(victim, { only: otherResources });
    const { rows } = await m.services.pool.query<{ n: number }>('SELECT count(*)::int AS n FROM records WHERE account_id = $1 AND deleted_at IS NOT NULL', [
      victim.accountId,
    ]);
    assert.equal(rows[0]!.n, 0, 'nothing was marked deleted');
  }

  it('the same page forever: stalled within the attempts, backs off one attempt a step, recovers when the page moves', async () => {
    await scenario(
      group,
      `same page forever: customers page 3 answers as page 2, has_more_results true (stalled after ${attempts} attempts, backoff ${backoffMs / 1000} s doubling)`,
      async () => {
        const victim = await m.link('crmcloud');
        await subscribe(victim, 'stream.stalled');
        await subscribe(victim, 'stream.recovered');
        const { id: fault } = await m.admin<{ id: string }>('POST', '/_admin/faults/stall', {
          resource: 'customers',
          page: 3,
          mode: 'same-page',
          source_system: 'crmcloud',
        });
        const before = await served(victim);
        const result = await passWithControl(victim);
        const first = (await served(victim)) - before;

        assert.deepEqual(result.failed, [], 'the stalled stream is not failed');
        let s = await stall(victim.accountId);
        assert.equal(s.state, 'stalled');
        assert.equal(s.stall_attempts, attempts, `stalled at the ${attempts}th attempt that did not move the checkpoint`);
        assert.match(s.last_error ?? '', /same page returned 3 times: customers page 3 came back as page 2 again/);
        // Pages 1 and 2, then page 3 once an attempt (and a page fetched ahead at most).
        assert.ok(first >= 2 + attempts && first <= 2 + 2 * attempts, `customers was asked ${first} times`);

        // Within the backoff: a pass asks nothing of it (it stays stalled, not failed).
        const quiet = await served(victim);
        assert.deepEqual((await m.runPass(victim.accountId)).failed, []);
        assert.ok(Date.now() < s.stall_retry_at!.getTime(), 'the pass ran within the backoff');
        assert.equal((await served(victim)) - quiet, 0, 'nothing asked during the backoff');
        assert.equal((await stall(victim.accountId)).stalls, 1);

        await assertOthersExact(victim);
        await assertVisible(victim, /same page returned 3 times/, 1, 1);
        await waitFor(
          'the stream.stalled event',
          () => received.find((e) => e.event === 'stream.stalled' && e.target === victim.accountId && e.source_data.data.resource === 'customers'),
          { timeoutMs: 30_000 },
        );

        // After the backoff: one attempt (page 3, once), stalled again at once, the backoff doubled.
        await sleep(Math.max(0, s.stall_retry_at!.getTime() - Date.now()) + 500);
        const step = await served(victim);
        assert.deepEqual((await m.runPass(victim.accountId)).failed, []);
        const stepRequests = (await served(victim)) - step;
        s = await stall(victim.accountId);
        assert.equal(s.state, 'stalled');
        assert.equal(s.stalls, 2, 'a second backoff step');
        assert.ok(stepRequests >= 1 && stepRequests <= 2, `one attempt after the backoff: customers was asked ${stepRequests} times`);
        const nextWait = s.stall_retry_at!.getTime() - Date.now();
        assert.ok(nextWait > backoffMs, `the backoff doubled: next try in ${nextWait} ms`);
        assert.match(s.last_error ?? '', /same page returned 4 times/);

        // The page moves again: the next try after the backoff resumes at page 3 and completes.
        await m.admin('DELETE', `/_admin/faults/${fault}`);
        await sleep(Math.max(0, s.stall_retry_at!.getTime() - Date.now()) + 500);
        const recovering = await served(victim);
        assert.deepEqual((await m.runPass(victim.accountId)).failed, []);
        const resumed = (await served(victim)) - recovering;
        s = await stall(victim.accountId);
        assert.equal(s.state, 'synced', 'recovered');
        assert.deepEqual([s.stall_attempts, s.stalls, s.stall_retry_at], [0, 0, null]);
        assert.ok(resumed <= 2, `resumed at the checkpoint (page 3), not from page 1: customers was asked ${resumed} times`);
        await m.assertExact(victim);
        await waitFor(
          'the stream.recovered event',
          () => received.find((e) => e.event === 'stream.recovered' && e.target === victim.accountId && e.source_data.data.resource === 'customers'),
          { timeoutMs: 30_000 },
        );
        const metrics = await m.apiFetch('/metrics');
        assert.doesNotMatch(metrics.text, /mirror_streams_stalled\{source_system="crmcloud"\} [1-9]/, 'no stalled stream left');
        return {
          tries: first + stepRequests,
          outcome:
            `stalled after ${attempts} attempts (${first} customers requests), not failed; a pass in the backoff asked nothing; ` +
            `one attempt (${stepRequests} requests) after it, backoff doubled; recovered at page 3 (${resumed} requests), exact; ` +
            'status page, mirror status, metrics, stream.stalled and stream.recovered events; other streams and the control account exact',
        };
      },
      file,
    );
  });

  it('a page that never answers: stalled within the attempts with its reason, not failed, other streams unaffected', async () => {
    await scenario(
      group,
      `page times out: customers page 2 never answered (client timeout ${timeoutMs / 1000} s, stalled after ${attempts} attempts)`,
      async () => {
        const victim = await m.link('crmcloud');
        const { id: fault } = await m.admin<{ id: string }>('POST', '/_admin/faults/stall', {
          resource: 'customers',
          page: 2,
          mode: 'timeout',
          source_system: 'crmcloud',
        });
        const before = await served(victim);
        const startedAt = Date.now();
        // Without the stall, Temporal's ten attempts with their backoff take minutes before the stream fails.
        const result = await passWithControl(victim, 150_000);
        const tookMs = Date.now() - startedAt;
        const requests = (await served(victim)) - before;
        await m.admin('DELETE', `/_admin/faults/${fault}`);

        assert.deepEqual(result.failed, [], 'the stalled stream is not failed');
        const s = await stall(victim.accountId);
        assert.equal(s.state, 'stalled');
        assert.equal(s.stall_attempts, attempts);
        assert.match(s.last_error ?? '', /page timed out 3 times: customers page 2 got no answer/);
        // Page 1, then page 2 three times an attempt (the client's own retries).
        assert.ok(requests <= 1 + 3 * attempts, `customers was asked ${requests} times`);
        await assertOthersExact(victim);
        const stalledNow = (await m.services.pool.query<{ n: number }>(`SELECT count(*)::int AS n FROM streams WHERE state = 'stalled'`)).rows[0]!.n;
        const events = (await m.services.pool.query<{ n: number }>(`SELECT count(*)::int AS n FROM account_events WHERE event = 'stream.stalled'`)).rows[0]!.n;
        await assertVisible(victim, /page timed out 3 times/, stalledNow, events);
        return {
          tries: requests,
          outcome: `stalled after ${attempts} attempts in ${Math.round(tookMs / 1000)} s (${requests} customers requests), not failed; other streams and the control account exact; visible`,
        };
      },
      file,
    );
  });
});
