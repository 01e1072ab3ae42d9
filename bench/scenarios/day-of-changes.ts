// Scenario 13, "a day of changes": how fresh the freshness scheduler keeps a 500-project account under
// its source system's published limit. Changes arrive upstream for a simulated day, skewed (a fifth of
// the projects get most of them, three fifths the rest, a fifth none), in the lists an incremental pass
// must poll project by project (BuildPro's budget line items: the sandbox does not list them across
// projects). Time is simulated as scenario 9 does: the passes of a day run one after the other, and
// before each the project lists' last verification moves back by the pass period ("as if that long had
// passed"). The mirror first lives the day after the link without webhooks, learning which lists
// change (other changes at the same rates; printed, not judged: the mirror is not told the rates, and
// in the unit simulation not even a learner told their distribution comes within 1.25x of the optimum
// on that day). Then one day's changes (the same lists, at the same simulated times) run twice: first
// with no upstream webhooks (every change waits for its list's visit), then with webhooks for the types the
// source system sends (budget-line-item is one: its changes arrive within seconds, measured in real
// time; the passes still visit every list at the floor). Measured per change: the time from the upstream
// change to its value visible through the read API. Computed from the same run (references, not
// judged): the round-robin cycle the budget allows, and the mean staleness of the best schedule for the
// true change rates under the same visits (each list at a rate proportional to the square root of its
// rate; a change waits half its list's interval on average), and the same keeping the mirror's floor
// (every list at least once per twice the cycle), the best a scheduler told the rates could do.
import { performance } from 'node:perf_hooks';
import type { IncomingMessage } from 'node:http';
import { setTimeout as sleep } from 'node:timers/promises';
import { knownProfile } from '../../connectors/source-systems/index.ts';
import { allProjectsScope } from '../../lib/resources.ts';
import { sqrtRates } from '../../mirror/streams/freshness-plan.ts';
import { defaultPollingPolicy, pollingVisitsPerMinute } from '../../mirror/streams/polling.ts';
import type { BenchShared, Linked, WorkerSet } from '../lib/mirror-env.ts';
import { MirrorEnv } from '../lib/mirror-env.ts';
import { percentile } from '../lib/report.ts';

export interface DayOfChangesOptions {
  projects: number;
  /** Changes over the day, and the simulated day's length. */
  changes: number;
  dayMinutes: number;
  /** The incremental passes' period (simulated minutes). */
  passMinutes: number;
  /** SYNC_POLLING_SHARE of the mirror's processes. */
  pollingShare: number;
}

export function dayOfChangesOptions(quick: boolean): DayOfChangesOptions {
  return quick
    ? { projects: 100, changes: 300, dayMinutes: 8 * 60, passMinutes: 15, pollingShare: 0.1 }
    : { projects: 500, changes: 1200, dayMinutes: 24 * 60, passMinutes: 15, pollingShare: 0.1 };
}

const resource = 'budget-line-items';
const system = 'buildpro';

export interface DayFigures {
  label: string;
  /**
   * The first day after the link: the mirror knows nothing of the lists' rates yet, and no learner can
   * come near the optimum for the true rates while it finds them out (printed, not judged); the days
   * after it are what a deployment lives.
   */
  firstDay: boolean;
  changes: number;
  /** Staleness of every change, simulated minutes (the webhook types' arrivals in real seconds, counted as minutes/60). */
  p50: number;
  p95: number;
  max: number;
  mean: number;
  /** Changes never seen by the end of the day (counted at the day's end). */
  unseen: number;
  /** Visits a minute the passes made to the polled lists, and upstream requests a minute in all. */
  visitsPerMinute: number;
  requestsPerMinute: number;
  /**
   * Of those, the passes' requests (every list they asked for: the polling cost, judged against the
   * polling share) and the single-object reads of the changed type (the webhook events' fetches: each
   * change's cost, not an idle one).
   */
  pollingRequestsPerMinute: number;
  objectFetchesPerMinute: number;
  /** The best schedule's mean staleness for the true rates under the same visits a minute. */
  optimumMean: number;
  /** The same with the floor the mirror keeps (every list at least once per twice the cycle): the best it could do knowing the rates. */
  flooredMean: number;
  /** Webhook types: change to visible in real seconds, p50/p99 (null without webhooks). */
  webhookP50Seconds: number | null;
  webhookP99Seconds: number | null;
  webhookSeen: number;
  problems: string[];
}

export interface DayOfChangesResult {
  lists: number;
  /** The source system's published requests a minute, the sync's share of it, and polling's share of that. */
  publishedPerMinute: number;
  syncShare: number;
  pollingShare: number;
  /**
   * Lists / the sync's requests a minute; lists / the requests a minute polling may spend; and lists /
   * the visits a minute that leaves these lists (less the lists every pass lists anyway: the scheduler's
   * cycle, the floor's unit), in minutes.
   */
  syncCycleMinutes: number;
  pollingCycleMinutes: number;
  scheduleCycleMinutes: number;
  passMinutes: number;
  dayMinutes: number;
  days: DayFigures[];
}

/** A small deterministic generator (mulberry32): the same day every run. */
function random(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

interface PlannedChange {
  /** Simulated minute of the day. */
  at: number;
  scope: string;
  projectId: string;
  id: string;
}

type DayList = { scope: string; projectId: string; ids: string[] };

/**
 * The day's changes: Poisson arrivals per list, a fifth of the projects with 80% of them, three fifths
 * the rest, a fifth none. Also the day before it (`before`): other changes at the same rates, the day
 * the mirror learns them from.
 */
function planDay(lists: DayList[], o: DayOfChangesOptions): { changes: PlannedChange[]; before: PlannedChange[]; rates: number[] } {
  const rnd = random(43);
  const order = lists.map((_, i) => i).sort(() => rnd() - 0.5);
  const hot = Math.round(lists.length / 5);
  const warm = Math.round((3 * lists.length) / 5);
  const rates = new Array<number>(lists.length).fill(0);
  order.forEach((li, rank) => {
    rates[li] = rank < hot ? (0.8 * o.changes) / hot / o.dayMinutes : rank < hot + warm ? (0.2 * o.changes) / warm / o.dayMinutes : 0;
  });
  const changes = arrivals(lists, rates, o, rnd);
  return { changes, before: arrivals(lists, rates, o, random(44)), rates };
}

function arrivals(lists: DayList[], rates: readonly number[], o: DayOfChangesOptions, rnd: () => number): PlannedChange[] {
  const changes: PlannedChange[] = [];
  lists.forEach((l, i) => {
    const rate = rates[i]!;
    if (rate === 0) return;
    for (let t = -Math.log(1 - rnd()) / rate; t < o.dayMinutes; t += -Math.log(1 - rnd()) / rate) {
      changes.push({ at: t, scope: l.scope, projectId: l.projectId, id: l.ids[Math.floor(rnd() * l.ids.length)]! });
    }
  });
  changes.sort((a, b) => a.at - b.at);
  return changes;
}

/** The mean staleness of visiting each list at a rate proportional to the square root of its change rate, `visits` a minute in all. */
export function optimumMeanStaleness(rates: readonly number[], visitsPerMinute: number): number {
  const roots = rates.map((r) => Math.sqrt(r));
  const rootSum = roots.reduce((a, b) => a + b, 0);
  const total = rates.reduce((a, b) => a + b, 0);
  if (total === 0 || visitsPerMinute <= 0) return 0;
  // f_i = V sqrt(r_i) / sum sqrt(r); a change waits 1 / (2 f_i) on average.
  return rates.reduce((a, r, i) => (r === 0 ? a : a + (r * rootSum) / (2 * visitsPerMinute * roots[i]!)), 0) / total;
}

/**
 * The mean staleness of the best schedule for the true rates that also visits every list at least once
 * per twice the cycle (the mirror's floor): never-changing lists take that floor's visits, the others
 * share the rest by the square roots of their rates.
 */
function flooredMeanStaleness(rates: readonly number[], visitsPerMinute: number): number {
  const total = rates.reduce((a, b) => a + b, 0);
  if (total === 0 || visitsPerMinute <= 0) return 0;
  const visits = sqrtRates(rates, visitsPerMinute, visitsPerMinute / (2 * rates.length));
  return rates.reduce((a, r, i) => a + r / (2 * visits[i]!), 0) / total;
}

export async function dayOfChanges(shared: BenchShared, o: DayOfChangesOptions, say: (line: string) => void): Promise<DayOfChangesResult> {
  const env = await MirrorEnv.start(shared, {
    name: 'day',
    sandbox: {
      sizes: { projects: o.projects, vendors: 20, customers: 20 },
      projectSkew: { bigProjects: Math.max(1, Math.round(o.projects / 100)), big: 50, small: 2 },
    },
    assumeLimits: false,
    api: true,
    env: {
      SYNC_INCREMENTAL_MINUTES: String(o.passMinutes),
      SYNC_POLLING_SHARE: String(o.pollingShare),
      SYNC_FRESHNESS_TARGET: '1h',
    },
  });
  try {
    const workers = await env.startWorkers(1);
    const account = await env.link(system, 'bench-day-of-changes');
    say(`[13] ${o.projects} projects: full pass ...`);
    await passOf(workers, account, 'full');
    const { rows } = await env.services.pool.query<{ scope: string; ids: string[] }>(
      `SELECT scope, array_agg(id ORDER BY id) AS ids FROM records WHERE account_id = $1 AND resource = $2 AND deleted_at IS NULL AND scope <> $3
        GROUP BY scope ORDER BY scope`,
      [account.accountId, resource, allProjectsScope],
    );
    const lists = rows.map((r) => ({ scope: r.scope, projectId: r.scope.slice('project='.length), ids: r.ids }));
    const { rows: polled } = await env.services.pool.query<{ n: number }>(
      `SELECT count(*)::int AS n FROM streams WHERE account_id = $1 AND scope LIKE 'project=%' AND scope <> $2 AND position('/' in scope) = 0
          AND coalesce(due_reason, '') NOT LIKE 'listed across projects%'`,
      [account.accountId, allProjectsScope],
    );
    const listCount = polled[0]!.n;
    const published = knownProfile(system)!.requestsPerMinute!;
    // Unset, the application's reserve follows its use; the scheduler then counts on the sync's usual 0.8.
    const syncShare = env.config.MIRROR_SYNC_BUDGET_SHARE ?? defaultPollingPolicy.syncShare!;
    const { changes, before, rates } = planDay(lists, o);
    // The visits a minute the polling budget leaves these lists, as the scheduler counts them.
    const { rows: everyPass } = await env.services.pool.query<{ n: number }>(
      `SELECT count(*)::int AS n FROM streams WHERE account_id = $1 AND (scope = '' OR scope = $2) AND state <> 'never_synced'`,
      [account.accountId, allProjectsScope],
    );
    const visitsPerMinute = pollingVisitsPerMinute(
      { ...defaultPollingPolicy, incrementalMs: o.passMinutes * 60_000, syncShare, pollingShare: o.pollingShare },
      { requestsPerMinute: published, everyPass: everyPass[0]!.n },
    )!;
    say(
      `[13] ${listCount} polled lists, ${changes.length} changes over ${o.dayMinutes / 60} simulated hours; the first day after the link, without webhooks ...`,
    );
    const days: DayFigures[] = [];
    days.push(
      await runDay(env, workers, account, o, before, rates, { label: 'first day after the link, no upstream webhooks', tag: 'f', firstDay: true }, say),
    );
    say(`[13] the next day, still without webhooks ...`);
    days.push(await runDay(env, workers, account, o, changes, rates, { label: 'the day after, no upstream webhooks', tag: 'p', firstDay: false }, say));
    say(`[13] registering upstream webhooks, then the same changes again ...`);
    await passOf(workers, account, 'full', true);
    days.push(await runDay(env, workers, account, o, changes, rates, { label: 'with webhooks', tag: 'w', firstDay: false, webhooks: true }, say));
    return {
      lists: listCount,
      publishedPerMinute: published,
      syncShare,
      pollingShare: o.pollingShare,
      syncCycleMinutes: listCount / (published * syncShare),
      pollingCycleMinutes: listCount / (published * syncShare * o.pollingShare),
      scheduleCycleMinutes: listCount / visitsPerMinute,
      passMinutes: o.passMinutes,
      dayMinutes: o.dayMinutes,
      days,
    };
  } finally {
    await env.close();
  }
}

async function passOf(workers: WorkerSet, account: Linked, mode: 'full' | 'incremental', registerWebhooks = false): Promise<void> {
  const result = await (await workers.sync.start({ accountId: account.accountId, mode, ...(registerWebhooks ? { registerWebhooks } : {}) })).result();
  if (result.failed.length > 0) throw new Error(`a ${mode} pass failed: ${JSON.stringify(result.failed.slice(0, 3))}`);
}

async function runDay(
  env: MirrorEnv,
  workers: WorkerSet,
  account: Linked,
  o: DayOfChangesOptions,
  changes: readonly PlannedChange[],
  rates: readonly number[],
  day: { label: string; tag: string; firstDay: boolean; webhooks?: boolean },
  say: (line: string) => void,
): Promise<DayFigures> {
  const { label, tag, firstDay } = day;
  const webhooks = day.webhooks === true;
  const pool = env.services.pool;
  const problems: string[] = [];
  let requests = 0;
  let objectFetches = 0;
  const listener = (req: IncomingMessage) => {
    if (req.headers['account-token'] !== account.accountToken) return;
    requests++;
    const path = (req.url ?? '').split('?')[0]!.split('/').filter(Boolean);
    if (req.method === 'GET' && path.length === 2 && path[0] === resource) objectFetches++;
  };
  let visits = 0;
  const visitListener = (req: IncomingMessage) => {
    if (req.headers['account-token'] !== account.accountToken) return;
    if ((req.url ?? '').split('?')[0] === `/${resource}` && req.headers['project-id'] !== '*') visits++;
  };
  const mirror = env.mirrorHeaders(account.accountToken);
  const staleness: number[] = [];
  const webhookSeconds: number[] = [];
  const pending: (PlannedChange & { value: string })[] = [];
  const visible = async (c: { scope: string; projectId: string; id: string; value: string }): Promise<boolean> => {
    const res = await fetch(`${env.api!.url}/${resource}/${encodeURIComponent(c.id)}`, { headers: { ...mirror, 'project-id': c.projectId } });
    const body = (await res.json().catch(() => ({}))) as Record<string, unknown>;
    const forwarded = [...res.headers.keys()].some((k) => k.endsWith('-warnings'));
    return res.ok && body.description === c.value && !forwarded;
  };
  // Several changes of one record between two visits: the last one is what the read API can show; the
  // earlier ones are seen when it is (their value is gone upstream too).
  const latest = new Map<string, string>();
  env.sandbox.app.server.on('request', listener);
  env.sandbox.app.server.on('request', visitListener);
  try {
    let next = 0;
    const passes = Math.round(o.dayMinutes / o.passMinutes);
    for (let k = 1; k <= passes; k++) {
      const t = k * o.passMinutes;
      // The changes of this period, upstream, in order.
      for (; next < changes.length && changes[next]!.at <= t; next++) {
        const c = changes[next]!;
        const value = `${tag} ${next} at ${c.at.toFixed(1)}`;
        const sent = performance.now();
        const res = await fetch(`${env.sandbox.url}/_admin/objects`, {
          method: 'PATCH',
          headers: { ...env.upstreamHeaders, 'content-type': 'application/json' },
          body: JSON.stringify({ account_token: account.accountToken, resource, id: c.id, project_id: c.projectId, patch: { description: value } }),
        });
        if (!res.ok) throw new Error(`patching ${resource} ${c.id} failed: ${res.status} ${await res.text()}`);
        latest.set(`${c.scope}|${c.id}`, value);
        if (webhooks) {
          // The webhook's change, polled through the read API until it shows (real time).
          let seen = false;
          for (let waited = 0; waited < 20_000; waited = performance.now() - sent) {
            if (await visible({ ...c, value })) {
              seen = true;
              break;
            }
            await sleep(50);
          }
          if (seen) {
            const seconds = (performance.now() - sent) / 1000;
            webhookSeconds.push(seconds);
            staleness.push(seconds / 60);
            continue;
          }
          if (problems.length < 5) problems.push(`${c.id}: not visible 20 s after its webhook`);
        }
        pending.push({ ...c, value });
      }
      // As if a pass period had passed since the lists were last verified.
      await pool.query(
        `UPDATE streams SET last_pass_started_at = last_pass_started_at - make_interval(secs => $2), touched_at = touched_at - make_interval(secs => $2),
                next_due_at = next_due_at - make_interval(secs => $2)
          WHERE account_id = $1 AND scope LIKE 'project=%' AND scope <> $3 AND position('/' in scope) = 0`,
        [account.accountId, o.passMinutes * 60, allProjectsScope],
      );
      const started = new Date();
      await passOf(workers, account, 'incremental');
      // The lists this pass visited: their pending changes must be visible now.
      const { rows } = await pool.query<{ scope: string }>(`SELECT scope FROM streams WHERE account_id = $1 AND resource = $2 AND last_fresh_at >= $3`, [
        account.accountId,
        resource,
        started,
      ]);
      const visited = new Set(rows.map((r) => r.scope));
      for (let i = pending.length - 1; i >= 0; i--) {
        const c = pending[i]!;
        if (!visited.has(c.scope)) continue;
        const current = latest.get(`${c.scope}|${c.id}`)!;
        if (await visible({ ...c, value: current })) {
          staleness.push(t - c.at);
          pending.splice(i, 1);
        } else if (problems.length < 5) problems.push(`${c.id} (${c.scope}): its list was visited, the read API does not show ${current}`);
      }
      if (k % 16 === 0) say(`[13] ${label}: ${((k * o.passMinutes) / 60).toFixed(0)} h simulated, ${staleness.length} changes seen, ${pending.length} waiting`);
    }
  } finally {
    env.sandbox.app.server.off('request', listener);
    env.sandbox.app.server.off('request', visitListener);
  }
  // Changes still waiting at the day's end count from their change to the end of the day (a lower bound).
  for (const c of pending) staleness.push(o.dayMinutes - c.at);
  const sorted = [...staleness].sort((a, b) => a - b);
  const visitsPerMinute = visits / o.dayMinutes;
  const w = [...webhookSeconds].sort((a, b) => a - b);
  return {
    label,
    firstDay,
    changes: changes.length,
    p50: percentile(sorted, 50) ?? 0,
    p95: percentile(sorted, 95) ?? 0,
    max: sorted[sorted.length - 1] ?? 0,
    mean: sorted.reduce((a, b) => a + b, 0) / Math.max(1, sorted.length),
    unseen: pending.length,
    visitsPerMinute,
    requestsPerMinute: requests / o.dayMinutes,
    pollingRequestsPerMinute: (requests - objectFetches) / o.dayMinutes,
    objectFetchesPerMinute: objectFetches / o.dayMinutes,
    optimumMean: optimumMeanStaleness(rates, visitsPerMinute),
    flooredMean: flooredMeanStaleness(rates, visitsPerMinute),
    webhookP50Seconds: webhooks ? (percentile(w, 50) ?? null) : null,
    webhookP99Seconds: webhooks ? (percentile(w, 99) ?? null) : null,
    webhookSeen: w.length,
    problems,
  };
}
