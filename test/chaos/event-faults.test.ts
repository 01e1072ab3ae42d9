// Chaos: webhook deliveries misbehave (the sandbox's delivery quirks): duplicated, reordered, delayed
// and dropped events, and a storm of events. Events are applied at least once with exactly-once
// effect: after the deliveries settle, the mirror equals the upstream (what a dropped event missed is
// repaired by the next full pass, and only that differs before it).
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { waitFor } from '../helpers/processes.ts';
import { canonical, startChaosMirror, type ChaosMirror, type LinkedTestAccount } from './env.ts';
import { printOwnRows, scaled, scenario } from './report.ts';

const file = import.meta.filename;
const group = 'events';

interface Delivery {
  webhook_id: string;
  delivery_id: string;
  event: string;
  target: string;
  status: number | string;
}

describe('chaos: webhook delivery faults', { timeout: scaled(300_000, 1_200_000) }, () => {
  let m: ChaosMirror;
  let crm: LinkedTestAccount;
  let hookIds: Set<string>;
  let mutation = 0;

  before(async () => {
    m = await startChaosMirror({ name: 'event-faults', sandbox: { size: 40 } });
    crm = await m.link('crmcloud');
    const first = await m.runPass(crm.accountId, { registerWebhooks: true });
    assert.deepEqual(first.failed, []);
    const { rows } = await m.services.pool.query<{ upstream_id: string }>(`SELECT upstream_id FROM webhook_registrations WHERE account_id = $1`, [
      crm.accountId,
    ]);
    hookIds = new Set(rows.map((r) => r.upstream_id));
    assert.ok(hookIds.size >= 12, 'CREATE, UPDATE and DELETE webhooks for each crmcloud type');
  });
  after(async () => {
    await m?.close();
    printOwnRows();
  });

  async function deliveries(): Promise<Delivery[]> {
    const { data } = await m.admin<{ data: Delivery[] }>('GET', '/_admin/webhook-deliveries');
    return data.filter((d) => hookIds.has(d.webhook_id));
  }

  async function quirks(q: { duplicate_probability?: number; reorder?: boolean; delay_ms?: number; loss_probability?: number }): Promise<void> {
    await m.admin('PUT', '/_admin/webhook-delivery', { duplicate_probability: 0, reorder: false, delay_ms: 0, loss_probability: 0, ...q });
  }

  async function liveIds(resource: string): Promise<string[]> {
    const { rows } = await m.services.pool.query<{ id: string }>(
      `SELECT id FROM records WHERE account_id = $1 AND resource = $2 AND deleted_at IS NULL ORDER BY ordinal`,
      [crm.accountId, resource],
    );
    return rows.map((r) => r.id);
  }

  /**
   * Changes upstream (admin API) that each announce one event: creates, updates (some objects twice,
   * so order matters), deletes (some right after an update), creates followed by an update.
   */
  async function mutate(n: number): Promise<number> {
    let events = 0;
    const change = async (method: string, body: Record<string, unknown>) => {
      const r = await m.admin<{ id?: string }>(method, '/_admin/objects', { account_token: crm.accountToken, ...body });
      events++;
      return r;
    };
    for (const resource of ['customers', 'leads']) {
      const ids = await liveIds(resource);
      for (let i = 0; i < n; i++) {
        const id = ids[i]!;
        await change('PATCH', { resource, id, patch: { name: `chaos ${++mutation}` } });
        if (i % 2 === 0) await change('PATCH', { resource, id, patch: { name: `chaos ${++mutation} again` } });
        if (i % 3 === 0) await change('DELETE', { resource, id });
        const created = await change('POST', { resource, object: { name: `chaos new ${++mutation}` } });
        if (i % 2 === 1) await change('PATCH', { resource, id: created.id, patch: { name: `chaos ${++mutation} renamed` } });
      }
    }
    return events;
  }

  /** Waits until `expected` more deliveries are in the sandbox's log and the mirror's inbox is applied. */
  async function settle(before: number, expected: number, timeoutMs = 120_000): Promise<Delivery[]> {
    await waitFor(`${expected} deliveries to be attempted`, async () => (await deliveries()).length - before >= expected, { timeoutMs, intervalMs: 200 });
    await waitFor(
      'the inbox to be applied',
      async () => {
        const { rows } = await m.services.pool.query<{ n: number }>(
          `SELECT count(*)::int AS n FROM inbox_events WHERE account_id = $1 AND applied_at IS NULL`,
          [crm.accountId],
        );
        return rows[0]!.n === 0;
      },
      { timeoutMs, intervalMs: 200 },
    );
    return (await deliveries()).slice(before);
  }

  async function inboxCount(): Promise<number> {
    const { rows } = await m.services.pool.query<{ n: number }>(`SELECT count(*)::int AS n FROM inbox_events WHERE account_id = $1`, [crm.accountId]);
    return rows[0]!.n;
  }

  const rounds = scaled(4, 15);

  it('applies duplicated deliveries once', async () => {
    await scenario(
      group,
      'every delivery sent twice (duplicate_probability 1)',
      async () => {
        await quirks({ duplicate_probability: 1 });
        const before = (await deliveries()).length;
        const inboxBefore = await inboxCount();
        const events = await mutate(rounds);
        const log = await settle(before, events * 2);
        assert.equal(log.length, events * 2, 'each event was delivered twice');
        assert.ok(
          log.every((d) => d.status === 200),
          'every delivery was acknowledged',
        );
        assert.equal((await inboxCount()) - inboxBefore, events, 'each event is in the inbox once');
        const exact = await m.assertExact(crm, { ordered: false });
        return { tries: log.length, outcome: `${events} events delivered twice, stored once; ${exact.records} records exact without a full pass` };
      },
      file,
    );
  });

  it('ends in the upstream state whatever order events arrive in', async () => {
    await scenario(
      group,
      'deliveries reordered (independent random delays)',
      async () => {
        await quirks({ reorder: true, delay_ms: 300 });
        const before = (await deliveries()).length;
        const events = await mutate(rounds);
        const log = await settle(before, events);
        assert.ok(log.every((d) => d.status === 200));
        const exact = await m.assertExact(crm, { ordered: false });
        return { tries: log.length, outcome: `${events} events in shuffled order; ${exact.records} records exact without a full pass` };
      },
      file,
    );
  });

  it('catches up with delayed deliveries', async () => {
    await scenario(
      group,
      'deliveries delayed by 2 s',
      async () => {
        await quirks({ delay_ms: 2000 });
        const before = (await deliveries()).length;
        const events = await mutate(Math.max(1, Math.floor(rounds / 2)));
        const log = await settle(before, events);
        assert.ok(log.every((d) => d.status === 200));
        const exact = await m.assertExact(crm, { ordered: false });
        return { tries: log.length, outcome: `${events} events 2 s late; ${exact.records} records exact without a full pass` };
      },
      file,
    );
  });

  it('differs only by dropped events until the next full pass repairs them', async () => {
    await scenario(
      group,
      'deliveries dropped (loss_probability 0.3), then a full pass',
      async () => {
        await quirks({ loss_probability: 0.3 });
        const before = (await deliveries()).length;
        const events = await mutate(rounds);
        const log = await settle(before, events);
        await quirks({});
        const lost = log.filter((d) => d.status === 'lost');
        assert.ok(lost.length > 0, 'some deliveries were dropped');
        const lostTargets = new Set(lost.map((d) => d.target));
        const [truth, mirror] = [await m.oracle(crm), await m.mirrored(crm.accountId)];
        const stale: string[] = [];
        for (const [k, list] of truth) {
          const mine = new Map((mirror.get(k) ?? []).map((o) => [String(o.id), canonical(o)]));
          const theirs = new Map(list.map((o) => [String(o.id), canonical(o)]));
          for (const id of new Set([...mine.keys(), ...theirs.keys()])) if (mine.get(id) !== theirs.get(id)) stale.push(id);
        }
        assert.deepEqual(
          stale.filter((id) => !lostTargets.has(id)),
          [],
          'only objects of dropped events differ',
        );
        const repair = await m.runPass(crm.accountId);
        assert.deepEqual(repair.failed, []);
        const exact = await m.assertExact(crm, { ordered: false });
        return {
          tries: log.length,
          outcome: `${lost.length} of ${log.length} dropped; ${stale.length} objects stale, all explained by drops; after a full pass ${exact.records} records exact`,
        };
      },
      file,
    );
  });

  it('absorbs a storm of events', async () => {
    const total = scaled(1_000, 10_000);
    const perSecond = scaled(200, 500);
    await scenario(
      group,
      `storm: ${total} events at up to ${perSecond}/s (churn: creates, updates, deletes)`,
      async () => {
        await quirks({});
        const startTotal = m.inbound.total;
        const statusesBefore = new Map(m.inbound.statuses);
        const started = Date.now();
        // Churn until the mirror has been sent `total` events (a busy machine ticks slower than asked).
        while (m.inbound.total - startTotal < total) {
          const seconds = Math.max(1, Math.ceil((total - (m.inbound.total - startTotal)) / perSecond));
          await m.admin('POST', '/_admin/churn', { account_token: crm.accountToken, per_second: perSecond, seconds });
          await waitFor('the churn to end', async () => (await m.admin<{ data: unknown[] }>('GET', '/_admin/churn')).data.length === 0, {
            timeoutMs: seconds * 4000 + 30_000,
            intervalMs: 250,
          });
          let last = -1;
          await waitFor(
            'deliveries to settle',
            () => {
              const stable = m.inbound.inFlight === 0 && m.inbound.total === last;
              last = m.inbound.total;
              return stable;
            },
            { timeoutMs: 120_000, intervalMs: 1000 },
          );
        }
        const sent = m.inbound.total - startTotal;
        await waitFor(
          'the inbox to be applied',
          async () => {
            const { rows } = await m.services.pool.query<{ n: number }>(
              `SELECT count(*)::int AS n FROM inbox_events WHERE account_id = $1 AND applied_at IS NULL`,
              [crm.accountId],
            );
            return rows[0]!.n === 0;
          },
          { timeoutMs: scaled(180_000, 900_000), intervalMs: 500 },
        );
        const drained = Date.now() - started;
        const answers = [...m.inbound.statuses].map(([status, n]) => [status, n - (statusesBefore.get(status) ?? 0)] as const).filter(([, n]) => n > 0);
        assert.deepEqual(
          answers.filter(([status]) => status !== 200),
          [],
          'every delivery of the storm was acknowledged',
        );
        assert.ok(m.api.crashes.length === 0 && m.worker.crashes.length === 0, 'no process crashed');
        const exact = await m.assertExact(crm, { ordered: false });
        const { rows } = await m.services.pool.query<{ outcome: string; n: number }>(
          `SELECT outcome, count(*)::int AS n FROM inbox_events WHERE account_id = $1 GROUP BY outcome ORDER BY outcome`,
          [crm.accountId],
        );
        return {
          tries: sent,
          outcome: `${sent} deliveries, all acknowledged (200); inbox applied ${drained} ms after the storm began (${rows.map((r) => `${r.outcome}: ${r.n}`).join(', ')}); ${exact.records} records exact without a full pass`,
        };
      },
      file,
    );
  });

  it('leaks no secret into logs or error bodies, and keeps account tokens unreadable without the key', async () => {
    await scenario(
      'secrets',
      'scan of event-fault logs and error bodies (webhook Authorization values included)',
      async () => {
        assert.ok(m.webhookAuthorizations.size > 0, 'the webhook Authorization values were seen');
        const scan = m.scanForSecrets();
        assert.deepEqual(scan.findings, []);
        return {
          tries: scan.lines + scan.bodies,
          outcome: `${scan.lines} log lines, ${scan.bodies} error bodies, ${scan.secrets} secrets (${m.webhookAuthorizations.size} webhook Authorization values): none found`,
        };
      },
      file,
    );
  });
});
