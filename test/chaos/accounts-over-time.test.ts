// Chaos: accounts change under the mirror over months. A token revoked at the source mid-pass makes the
// account `credentials_refused` within that pass (its streams paused, not failed; its schedules paused;
// a probe with backoff, one request a step; an event to the application), and a re-link resumes it. An
// account unlinked at the source is `unlinked`: schedules gone, data purged after the retention (0
// here), other accounts untouched. A second link under the same reference id: each token answers
// through the mirror as the upstream answers it.
import assert from 'node:assert/strict';
import { createServer, type Server } from 'node:http';
import { after, before, describe, it } from 'node:test';
import { ScheduleNotFoundError } from '@temporalio/client';
import { linkWithPublicToken } from '../../api/link-service.ts';
import { createLinkToken } from '../../connectors/operations.ts';
import { accountSyncWorkflowId } from '../../lib/workflow-ids.ts';
import { accountsOverview } from '../../mirror/ops/metrics-overview.ts';
import { waitFor } from '../helpers/processes.ts';
import { startChaosMirror, type ChaosMirror, type LinkedTestAccount } from './env.ts';
import { printOwnRows, scaled, scenario } from './report.ts';

const file = import.meta.filename;
const group = 'accounts over time';

/** The account tables whose rows a purge of another account must leave alone. */
const accountTables = ['records', 'streams', 'stream_pages', 'inbox_events', 'webhook_registrations', 'account_tokens', 'record_position_sets'];

describe('chaos: accounts over time', { timeout: scaled(600_000, 1_200_000) }, () => {
  let m: ChaosMirror;
  let receiver: Server;
  let receiverUrl: string;
  const received: { event: string; target: string; type: string }[] = [];

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
      name: 'accounts-over-time',
      sandbox: { size: 450 },
      env: {
        MIRROR_CALLBACK_ALLOW: '127.0.0.1',
        MIRROR_CREDENTIALS_PROBE_AFTER: '2s',
        MIRROR_CREDENTIALS_PROBE_MAX: '8s',
        MIRROR_RETENTION_AFTER_UNLINK: '0',
      },
    });
  });
  after(async () => {
    await m?.close();
    await new Promise<void>((resolve) => (receiver ? receiver.close(() => resolve()) : resolve()));
    printOwnRows();
  });

  const asAccount = (token: string) => ({ 'account-token': token });

  async function status(accountId: string): Promise<{ status: string; status_reason: string | null; purged_at: Date | null }> {
    const { rows } = await m.services.pool.query<{ status: string; status_reason: string | null; purged_at: Date | null }>(
      'SELECT status, status_reason, purged_at FROM linked_accounts WHERE id = $1',
      [accountId],
    );
    return rows[0]!;
  }

  /** Requests the sandbox counted for an account (refused ones included), by route. */
  async function served(account: LinkedTestAccount): Promise<Record<string, number>> {
    const stats = await m.admin<{ accounts: Record<string, { reference_id: string; source_system: string; by_path: Record<string, number> }> }>(
      'GET',
      '/_admin/stats',
    );
    const out: Record<string, number> = {};
    for (const a of Object.values(stats.accounts)) {
      if (a.reference_id !== account.referenceId || a.source_system !== account.sourceSystem) continue;
      for (const [route, n] of Object.entries(a.by_path)) out[route] = (out[route] ?? 0) + n;
    }
    return out;
  }

  /** Links the same reference id again, through the mirror's link service (as the API does it). */
  async function relink(account: LinkedTestAccount): Promise<string> {
    const linkToken = await createLinkToken(m.services.upstream, account.referenceId);
    const { public_token } = await m.admin<{ public_token: string }>('POST', '/_admin/link/public-token', {
      link_token: linkToken,
      source_system: account.sourceSystem,
    });
    const { account: registered, linked } = await linkWithPublicToken(
      { upstream: m.services.upstream, accounts: m.services.accounts, sync: m.sync },
      public_token,
    );
    assert.equal(registered.id, account.accountId, 'the same upstream user under the same reference id is the same account');
    m.extraSecrets.add(linked.account_token);
    return linked.account_token;
  }

  async function subscribe(account: LinkedTestAccount, token: string, event: string): Promise<void> {
    const r = await m.apiFetch('/webhooks', {
      method: 'POST',
      headers: { ...asAccount(token), 'content-type': 'application/json' },
      body: JSON.stringify({ callback_url: receiverUrl, event, type: 'account' }),
    });
    assert.equal(r.status, 201, r.text);
  }

  it('a token revoked upstream mid-pass: credentials_refused within the pass, streams not failed, probes back off, the application told; a re-link resumes it', async () => {
    await scenario(
      group,
      'token revoked at the source mid-pass, then re-linked',
      async () => {
        const victim = await m.link('crmcloud');
        await m.sync.ensureSchedules(victim.accountId, { incrementalMinutes: 60, fullHours: 24 });
        await subscribe(victim, victim.accountToken, 'account.credentials_refused');
        await subscribe(victim, victim.accountToken, 'account.relinked');
        // Slow pages keep the pass going while the token is revoked.
        const slow = await m.fault({
          match: { path: '^/(customers|contacts|leads)\\?page=2', source_system: 'crmcloud' },
          kind: 'slow',
          delay_ms: 1500,
          times: 3,
        });
        const pass = m.runPass(victim.accountId, { timeoutMs: 180_000 });
        await waitFor('the pass to commit a page', async () => (await m.streams(victim.accountId)).some((s) => s.pages > 0), { timeoutMs: 60_000 });
        await m.admin('POST', '/_admin/accounts/revoke', { account_token: victim.accountToken });
        const result = await pass;
        await m.admin('DELETE', `/_admin/faults/${slow}`).catch(() => undefined);

        assert.match(
          result.halted ?? '',
          /refuses the account's credentials|credentials_refused/,
          `the pass stopped on the refusal: ${JSON.stringify(result)}`,
        );
        assert.deepEqual(result.failed, [], 'no stream reported failed');
        const s = await status(victim.accountId);
        assert.equal(s.status, 'credentials_refused', 'within the one pass');
        assert.match(s.status_reason ?? '', /revoked/, 'with the upstream words');
        const streams = await m.streams(victim.accountId);
        assert.deepEqual(
          streams.filter((x) => x.state === 'failed'),
          [],
          'no stream marked failed',
        );
        for (const id of Object.values(m.sync.scheduleIds(victim.accountId))) {
          assert.equal((await m.temporal.schedule.getHandle(id).describe()).state.paused, true, `${id} paused`);
        }
        // Visible: counted in /metrics, first on the status page and in `mirror accounts`, with the upstream's words.
        const metrics = await m.apiFetch('/metrics');
        assert.match(metrics.text, /mirror_accounts\{status="credentials_refused"\} 1/);
        assert.match(metrics.text, /mirror_account_events_total\{event="account.credentials_refused"\} 1/);
        const overview = await accountsOverview(m.services.pool);
        assert.equal(overview[0]?.id, victim.accountId, 'the refused account comes first');
        assert.match(overview[0]?.statusReason ?? '', /revoked/);
        const page = await m.apiFetch('/status');
        assert.equal(page.status, 200);
        assert.match(page.text, /credentials_refused/);

        // The probe: at most one request a backoff step (2 s, 4 s, 8 s, 8 s ...), no list asked meanwhile.
        const before = await served(victim);
        const waitedMs = 15_000;
        await new Promise((resolve) => setTimeout(resolve, waitedMs));
        const afterProbes = await served(victim);
        const probes = (afterProbes['GET /link/account'] ?? 0) - (before['GET /link/account'] ?? 0);
        const others = Object.entries(afterProbes).reduce((n, [route, c]) => n + (route === 'GET /link/account' ? 0 : c - (before[route] ?? 0)), 0);
        assert.ok(probes >= 1 && probes <= 3, `probes in ${waitedMs} ms with steps of 2, 4, 8 s: ${probes}`);
        assert.equal(others, 0, 'nothing but probes is asked of the upstream');
        await waitFor(
          'the account.credentials_refused event',
          () => received.find((e) => e.event === 'account.credentials_refused' && e.target === victim.accountId),
          {
            timeoutMs: 30_000,
          },
        );

        // Re-linked under the same reference id: linked again, resumed, and its changes flow.
        const token = await relink(victim);
        assert.equal((await status(victim.accountId)).status, 'linked');
        await m.resultWithin(accountSyncWorkflowId(victim.accountId), 180_000);
        for (const id of Object.values(m.sync.scheduleIds(victim.accountId))) {
          assert.equal((await m.temporal.schedule.getHandle(id).describe()).state.paused, false, `${id} runs again`);
        }
        const created = await m.admin<{ id: string }>('POST', '/_admin/objects', {
          account_token: token,
          resource: 'customers',
          object: { name: 'After the re-link' },
        });
        const createdAt = Date.now();
        const again = await m.runPass(victim.accountId, { mode: 'incremental' });
        assert.deepEqual(again.failed, []);
        // The upstream's webhooks cover customers, so incremental passes do not list them (full passes do:
        // mirror/streams/polling.ts): the change comes through its webhook, applied by the account's change
        // workflow beside the pass, not by the pass. Wait for it rather than race the pass against it.
        await waitFor(
          'a change made after the re-link to be mirrored',
          async () =>
            (
              await m.services.pool.query('SELECT 1 FROM records WHERE account_id = $1 AND resource = $2 AND id = $3', [
                victim.accountId,
                'customers',
                created.id,
              ])
            ).rows.length === 1,
          { timeoutMs: 30_000, intervalMs: 100 },
        );
        const mirroredMs = Date.now() - createdAt;
        // The inbox writes a batch's records, then marks its events applied: wait for the mark too.
        const eventOutcomes = async () =>
          (
            await m.services.pool.query<{ outcome: string | null }>('SELECT outcome FROM inbox_events WHERE account_id = $1 AND target = $2', [
              victim.accountId,
              created.id,
            ])
          ).rows;
        await waitFor('its webhook event to be marked', async () => (await eventOutcomes()).every((e) => e.outcome !== null), {
          timeoutMs: 10_000,
          intervalMs: 50,
        });
        const events = await eventOutcomes();
        assert.deepEqual(
          events.map((e) => e.outcome),
          ['upserted'],
          'by its webhook event, applied',
        );
        await waitFor('the account.relinked event', () => received.find((e) => e.event === 'account.relinked' && e.target === victim.accountId), {
          timeoutMs: 30_000,
        });
        return {
          tries: 1,
          outcome: `credentials_refused in the pass, 0 streams failed, ${probes} probes in 15 s, events delivered; re-linked: linked, a change mirrored by its webhook in ${mirroredMs} ms`,
        };
      },
      file,
    );
  });

  it('an account unlinked at the source: unlinked, schedules gone, data purged (retention 0), other accounts untouched', async () => {
    await scenario(
      group,
      'account unlinked at the source',
      async () => {
        const other = await m.link('fieldops');
        const victim = await m.link('crmcloud');
        assert.deepEqual((await m.runPass(other.accountId)).failed, []);
        assert.deepEqual((await m.runPass(victim.accountId)).failed, []);
        await m.sync.ensureSchedules(victim.accountId, { incrementalMinutes: 60, fullHours: 24 });
        await subscribe(victim, victim.accountToken, 'account.unlinked');
        const counts = async (accountId: string) => {
          const out: Record<string, number> = {};
          for (const t of accountTables) {
            const sql =
              t === 'stream_pages'
                ? 'SELECT count(*)::int AS n FROM stream_pages WHERE stream_id IN (SELECT id FROM streams WHERE account_id = $1)'
                : `SELECT count(*)::int AS n FROM ${t} WHERE account_id = $1`;
            out[t] = (await m.services.pool.query<{ n: number }>(sql, [accountId])).rows[0]!.n;
          }
          return out;
        };
        const otherBefore = await counts(other.accountId);
        assert.ok(((await counts(victim.accountId)).records ?? 0) > 0);

        await m.admin('POST', '/_admin/accounts/unlink', { account_token: victim.accountToken });
        // The next pass finds it out; the unlink cancels that pass.
        await m.runPass(victim.accountId, { timeoutMs: 120_000 }).catch(() => undefined);
        await waitFor('the account to be unlinked and purged', async () => {
          const s = await status(victim.accountId);
          return s.status === 'unlinked' && s.purged_at !== null;
        });
        for (const id of Object.values(m.sync.scheduleIds(victim.accountId))) {
          await assert.rejects(m.temporal.schedule.getHandle(id).describe(), ScheduleNotFoundError, `${id} is gone`);
        }
        const purged = await counts(victim.accountId);
        assert.deepEqual(
          Object.entries(purged).filter(([, n]) => n > 0),
          [],
          'its data is purged',
        );
        assert.deepEqual(await counts(other.accountId), otherBefore, "the other account's rows are unchanged");
        const refused = await m.apiFetch('/customers', { headers: asAccount(victim.accountToken) });
        assert.equal(refused.status, 401, 'its token is refused, as the upstream refuses it');
        await waitFor('the account.unlinked event', () => received.find((e) => e.event === 'account.unlinked' && e.target === victim.accountId), {
          timeoutMs: 30_000,
        });
        return { tries: 1, outcome: `unlinked, schedules deleted, its rows in ${accountTables.length} tables purged, the other account's rows unchanged` };
      },
      file,
    );
  });

  it('a second link under the same reference id: both tokens answer through the mirror as the upstream answers them', async () => {
    await scenario(
      group,
      'second link under the same reference id',
      async () => {
        const first = await m.link('crmcloud');
        assert.deepEqual((await m.runPass(first.accountId)).failed, []);
        const second = await relink(first);
        const upstream = async (token: string) =>
          (await fetch(`${m.sandbox.url}/customers?per_page=5`, { headers: { ...m.upstreamHeaders, 'account-token': token } })).status;
        const mirror = async (token: string) => (await m.apiFetch('/customers?per_page=5', { headers: asAccount(token) })).status;
        assert.deepEqual([await upstream(first.accountToken), await upstream(second)], [200, 200]);
        assert.deepEqual([await mirror(first.accountToken), await mirror(second)], [200, 200], 'both tokens read through the mirror');

        // The first token revoked at the source: a forward shows the mirror the refusal, then it refuses that token too.
        await m.admin('POST', '/_admin/accounts/revoke', { account_token: first.accountToken });
        const forwarded = await m.apiFetch('/link/account', { headers: asAccount(first.accountToken) });
        assert.equal(forwarded.status, 401, 'the upstream answer is relayed');
        await waitFor('the mirror to refuse the revoked token', async () => (await mirror(first.accountToken)) === 401, { timeoutMs: 15_000, intervalMs: 500 });
        assert.deepEqual([await upstream(first.accountToken), await upstream(second)], [401, 200]);
        assert.deepEqual([await mirror(first.accountToken), await mirror(second)], [401, 200], 'the mirror answers each token as the upstream does');
        assert.equal((await status(first.accountId)).status, 'linked', 'the account stays linked: its current token works');
        return { tries: 2, outcome: 'both tokens 200 through the mirror; the revoked one 401 like upstream, the other still 200' };
      },
      file,
    );
  });
});
