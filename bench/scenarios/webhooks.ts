// Scenario 6: webhook latency. The mirror registers its upstream webhooks (a pass with
// `registerWebhooks`), then the sandbox mutates customers at a steady rate through its admin API; each
// change is delivered to the mirror's API, lands in the inbox, wakes the change workflow, is fetched
// and written. Measured per mutation, from just before the mutation is sent:
// - until the read API answers the new value (GET /customers/<id>, polled, for a sample of mutations);
// - until the row was written (its `mirrored_at`, for every mutation).
import { performance } from 'node:perf_hooks';
import { setTimeout as sleep } from 'node:timers/promises';
import type { Linked, MirrorEnv, WorkerSet } from '../lib/mirror-env.ts';
import { percentile } from '../lib/report.ts';

export interface WebhookLatency {
  mutations: number;
  sent: number;
  /** Read-API polled sample. */
  polled: number;
  polledVisible: number;
  apiP50: number | null;
  apiP99: number | null;
  /** Every mutation, from the row's write time. */
  written: number;
  writeP50: number | null;
  writeP99: number | null;
  /** Every mutation including the warm-up's: from idle to 100/s, the ramp. */
  allWriteP99: number | null;
  warmup: number;
  /** From the mutation until its event was stored in the mirror's inbox (delivery + receiver). */
  inboxP50: number | null;
  inboxP99: number | null;
  /** Rows written per second, first to last: how fast the change path applied the events. */
  applyPerSecond: number | null;
  registered: number;
  deliveries: Record<string, number>;
  inbox: Record<string, number>;
  problems: string[];
}

const now = () => performance.timeOrigin + performance.now();

export async function webhookLatency(
  env: MirrorEnv,
  workers: WorkerSet,
  account: Linked,
  options: { perSecond: number; seconds: number; warmupSeconds: number; sampleEvery: number; pollMs: number; timeoutMs: number },
): Promise<WebhookLatency> {
  if (!env.api) throw new Error('the read API is not running (webhooks are delivered to it)');
  const problems: string[] = [];
  // 1. A (small) pass that registers the account's upstream webhooks when it is done.
  const handle = await workers.sync.start({ accountId: account.accountId, mode: 'full', resource: 'projects', registerWebhooks: true });
  const pass = await handle.result();
  for (const f of pass.failed) problems.push(`registration pass: ${f.resource} ${f.scope}: ${f.error ?? ''}`);
  const hooks = await fetch(`${env.sandbox.url}/webhooks`, { headers: { ...env.upstreamHeaders, 'account-token': account.accountToken } });
  const registeredCount = hooks.ok ? ((await hooks.json()) as { data: unknown[] }).data.length : 0;
  if (registeredCount === 0) problems.push('no upstream webhooks were registered for the account');

  // 2. Targets: distinct customers, each mutated once. The first `warmupSeconds` of mutations take the
  // change path from idle to the steady rate; they are applied and checked, but not in the percentiles.
  const warmup = Math.round(options.perSecond * options.warmupSeconds);
  const count = warmup + Math.round(options.perSecond * options.seconds);
  const { rows } = await env.services.pool.query<{ id: string }>(
    `SELECT id FROM records WHERE account_id = $1 AND resource = 'customers' AND deleted_at IS NULL ORDER BY ordinal LIMIT $2`,
    [account.accountId, count],
  );
  const targets = rows.map((r) => r.id);
  // The sandbox indexes a list's ids on the first lookup by id (a second or so at 200k records):
  // have that done before the clock starts, as a real upstream would have.
  if (targets[0])
    await fetch(`${env.sandbox.url}/customers/${targets[0]}`, { headers: { ...env.upstreamHeaders, 'account-token': account.accountToken } }).then((r) =>
      r.arrayBuffer(),
    );
  const tag = `bench-${Date.now().toString(36)}`;
  const sentAt = new Map<string, number>();
  const names = new Map<string, string>();
  const apiLatency: number[] = [];
  const polls: Promise<void>[] = [];
  const mirrorHeaders = env.mirrorHeaders(account.accountToken);
  const adminHeaders = { ...env.upstreamHeaders, 'content-type': 'application/json' };

  const poll = async (id: string, name: string, t0: number) => {
    const deadline = t0 + options.timeoutMs;
    while (now() < deadline) {
      const res = await fetch(`${env.api!.url}/customers/${id}`, { headers: mirrorHeaders }).catch(() => undefined);
      const body = res?.ok ? ((await res.json()) as { name?: unknown }) : undefined;
      if (body?.name === name) {
        apiLatency.push(now() - t0);
        return;
      }
      await sleep(options.pollMs);
    }
  };

  // 3. Mutations at a steady rate (each sent on its own schedule, not after the previous answer).
  const mutations: Promise<void>[] = [];
  const start = now();
  for (let i = 0; i < targets.length; i++) {
    const due = start + (i * 1000) / options.perSecond;
    const wait = due - now();
    if (wait > 1) await sleep(wait);
    const id = targets[i]!;
    const name = `${tag}-${i}`;
    const t0 = now();
    sentAt.set(id, t0);
    names.set(id, name);
    mutations.push(
      fetch(`${env.sandbox.url}/_admin/objects`, {
        method: 'PATCH',
        headers: adminHeaders,
        body: JSON.stringify({ account_token: account.accountToken, resource: 'customers', id, patch: { name } }),
      }).then(async (res) => {
        if (!res.ok) problems.push(`PATCH ${id}: ${res.status} ${(await res.text()).slice(0, 200)}`);
      }),
    );
    if (i >= warmup && i % options.sampleEvery === 0) polls.push(poll(id, name, t0));
  }
  await Promise.all(mutations);
  await Promise.all(polls);

  // 4. Every mutation's write time, once they have all landed (or the time is up).
  const deadline = now() + options.timeoutMs;
  let written: { id: string; at: number; name: string | null }[];
  for (;;) {
    const res = await env.services.pool.query<{ id: string; at: number; name: string | null }>(
      `SELECT id, extract(epoch FROM mirrored_at) * 1000 AS at, data->>'name' AS name FROM records
        WHERE account_id = $1 AND resource = 'customers' AND id = ANY($2::text[])`,
      [account.accountId, targets],
    );
    written = res.rows.filter((r) => r.name === names.get(r.id));
    if (written.length === targets.length || now() > deadline) break;
    await sleep(250);
  }
  const measured = new Set(targets.slice(warmup));
  const allWriteLatency = written.map((r) => Number(r.at) - sentAt.get(r.id)!);
  const writeLatency = written.filter((r) => measured.has(r.id)).map((r) => Number(r.at) - sentAt.get(r.id)!);
  if (process.env.BENCH_DUMP_DIR) {
    const { writeFileSync } = await import('node:fs');
    writeFileSync(
      `${process.env.BENCH_DUMP_DIR}/webhooks.json`,
      JSON.stringify(written.map((r) => ({ sent: sentAt.get(r.id)! - start, ms: Number(r.at) - sentAt.get(r.id)! }))),
    );
  }
  const writeTimes = written.map((r) => Number(r.at));
  const span = writeTimes.length > 1 ? (Math.max(...writeTimes) - Math.min(...writeTimes)) / 1000 : 0;
  const applyPerSecond = span > 0 ? (writeTimes.length - 1) / span : null;

  const received = await env.services.pool.query<{ target: string; at: number }>(
    `SELECT target, extract(epoch FROM min(received_at)) * 1000 AS at FROM inbox_events WHERE account_id = $1 AND target = ANY($2::text[]) GROUP BY target`,
    [account.accountId, targets],
  );
  const inboxLatency = received.rows.filter((r) => sentAt.has(r.target) && measured.has(r.target)).map((r) => Number(r.at) - sentAt.get(r.target)!);

  const deliveries: Record<string, number> = {};
  const log = await fetch(`${env.sandbox.url}/_admin/webhook-deliveries`, { headers: env.upstreamHeaders });
  if (log.ok) {
    const body = (await log.json()) as { data: { status: number | string }[] };
    for (const d of body.data) deliveries[String(d.status)] = (deliveries[String(d.status)] ?? 0) + 1;
  }
  const inbox: Record<string, number> = {};
  const inboxRows = await env.services.pool
    .query<{ state: string; n: number }>(
      `SELECT CASE WHEN applied_at IS NULL THEN 'pending' ELSE coalesce(outcome, 'applied') END AS state, count(*)::int AS n FROM inbox_events WHERE account_id = $1 GROUP BY 1`,
      [account.accountId],
    )
    .catch((error: unknown) => {
      problems.push(`reading the inbox: ${(error as Error).message}`);
      return { rows: [] as { state: string; n: number }[] };
    });
  for (const r of inboxRows.rows) inbox[r.state] = r.n;

  return {
    mutations: targets.length,
    sent: sentAt.size,
    polled: polls.length,
    polledVisible: apiLatency.length,
    apiP50: percentile(apiLatency, 50),
    apiP99: apiLatency.length === polls.length ? percentile(apiLatency, 99) : null,
    written: written.length,
    writeP50: percentile(writeLatency, 50),
    writeP99: written.length === targets.length ? percentile(writeLatency, 99) : null,
    allWriteP99: written.length === targets.length ? percentile(allWriteLatency, 99) : null,
    warmup,
    applyPerSecond,
    inboxP50: percentile(inboxLatency, 50),
    inboxP99: percentile(inboxLatency, 99),
    registered: registeredCount,
    deliveries,
    inbox,
    problems,
  };
}
