// Polling: when an incremental pass asks the upstream for a stream again, and why. An account-wide list
// and a list across projects cost one request each an idle pass: every incremental pass lists them. A
// project's own list (one request per project and pass, whatever changed) is listed when the freshness
// scheduler picks it (mirror/streams/freshness-plan.ts): the pass's share of the polling budget goes to the
// lists an event named, the lists about to pass the floor (twice the cycle the budget allows), and the
// lists most overdue by their own interval (set by the square root of the change rate the mirror saw).
// A stream the upstream's webhooks cover is still visited at the floor (a webhook may be lost); an
// account-wide or cross-project one the webhooks cover is listed by full passes only. Full passes list
// everything. The decision and its reason are kept with the stream.
import { allProjectsScope, parseScope, resourceForWebhookType } from '../../lib/resources.ts';
import { checkpointSchema, type StreamKey } from './streams.ts';
import { learnedRates, planVisits, type FreshnessPlan } from './freshness-plan.ts';
import { inTransaction, type Pool } from '../db/pool.ts';

export interface PollingPolicy {
  /** The incremental passes' period (SYNC_INCREMENTAL_MINUTES): the time between two passes. */
  incrementalMs: number;
  /** The full passes' period (SYNC_FULL_HOURS). */
  fullMs: number;
  /**
   * Project lists a pass may visit where the source system's rate is not known (SYNC_POLLS_PER_PASS);
   * 0 or unset: the number of resources the account's source system serves (see {@link pollsPerPass}).
   */
  pollsPerPass?: number;
  /**
   * The share of each window the sync may spend (MIRROR_SYNC_BUDGET_SHARE); unset (the application's reserve
   * follows its use), polling counts on 0.8 of it.
   */
  syncShare?: number;
  /** The most of the sync's budget incremental polling may spend (SYNC_POLLING_SHARE). */
  pollingShare?: number;
  /** The staleness an operator wants every list kept within (SYNC_FRESHNESS_TARGET). */
  freshnessTargetMs?: number;
}

export const defaultPollingPolicy: Readonly<PollingPolicy> = {
  incrementalMs: 15 * 60_000,
  fullMs: 24 * 3_600_000,
  syncShare: 0.8,
  pollingShare: 0.5,
  freshnessTargetMs: 60 * 60_000,
};

/**
 * How a stream is polled: `project`, a project's own list (adaptive); `account`, an account-wide list
 * and `across`, a list across projects (one request each per idle pass: every incremental pass);
 * `children`, a parent's children (listed when the parent changed: mirror/streams/streams.ts `parentsToRefresh`).
 */
type PollKind = 'account' | 'across' | 'project' | 'children';

export function pollKind(scope: string): PollKind {
  if (scope === '') return 'account';
  if (scope === allProjectsScope) return 'across';
  const parts = parseScope(scope);
  return parts.length === 1 && parts[0]![0] === 'project' ? 'project' : 'children';
}

/** Reasons that say a stream is not listed by incremental passes (see {@link pollingAfter}). */
const webhookCoveredReason = 'webhook-covered: full pass only';
const acrossReason = 'listed across projects';
/** A project list's poll that found a change (or an event named it): listed at the next pass, budget or not. */
const firstReason = 'first listed';
/** A project's list, between two passes: the scheduler weighs it again at the next one. */
export const scheduledReason = 'freshness scheduler: weighed at each pass';

/** "15 min", "2 h", "1.5 h", "3 d". */
export function formatEvery(ms: number): string {
  const min = ms / 60_000;
  if (min < 60) return `${Math.round(min * 10) / 10} min`;
  const h = min / 60;
  if (h <= 48) return `${Math.round(h * 10) / 10} h`;
  return `${Math.round((h / 24) * 10) / 10} d`;
}

export interface PollOutcome {
  kind: PollKind;
  /** The upstream's webhooks cover the stream (see {@link WebhookCoverage}). */
  covered: boolean;
  /** The poll wrote a change (a record new, changed or deleted), or an event named the scope since the poll before. */
  changed: boolean;
  /** Unchanged polls in a row before this one. */
  unchangedBefore: number;
  /** When the poll began (the pass's start on this stream, Postgres's clock). */
  polledAt: Date;
  /** The stream's first recorded poll (its first load): not counted as a change. */
  first?: boolean;
}

interface PollPlan {
  unchangedPolls: number;
  /** Null: not on a clock (children follow their parent). */
  nextDueAt: Date | null;
  reason: string;
}

/** What a completed poll means for the stream's next one. */
export function pollingAfter(o: PollOutcome, policy: PollingPolicy): PollPlan {
  // A stream's first poll (its first load) says nothing about how often it changes: its interval starts
  // at the incremental period, but it is not "changed" (which would put it outside the poll budget).
  const unchangedPolls = o.changed || o.first ? 0 : o.unchangedBefore + 1;
  const at = (ms: number) => new Date(o.polledAt.getTime() + ms);
  if (o.kind === 'children') return { unchangedPolls, nextDueAt: null, reason: 'children: listed when their parent changes' };
  if (o.covered && o.kind !== 'project') return { unchangedPolls, nextDueAt: at(Math.max(policy.incrementalMs, policy.fullMs)), reason: webhookCoveredReason };
  if (o.kind === 'account') return { unchangedPolls, nextDueAt: at(policy.incrementalMs), reason: 'account-wide list: every incremental pass' };
  if (o.kind === 'across') return { unchangedPolls, nextDueAt: at(policy.incrementalMs), reason: `${acrossReason}: every incremental pass` };
  // A project's list: the freshness scheduler sets its next visit at each pass (see {@link pollingDecisions}).
  return { unchangedPolls, nextDueAt: null, reason: o.first ? `${firstReason}: ${scheduledReason}` : scheduledReason };
}

/** Which streams of an account the upstream's webhooks cover: every event of their type, for their project. */
export interface WebhookCoverage {
  covers(resource: string, scope: string): boolean;
}

const webhookEvents = ['CREATE', 'UPDATE', 'DELETE'] as const;

export async function webhookCoverage(pool: Pool, accountId: string): Promise<WebhookCoverage> {
  const { rows } = await pool.query<{ type: string; project: string }>(
    `SELECT type, coalesce(project_id, '') AS project FROM webhook_registrations WHERE account_id = $1
      GROUP BY 1, 2 HAVING count(DISTINCT event) FILTER (WHERE event = ANY($2::text[])) = $3`,
    [accountId, webhookEvents, webhookEvents.length],
  );
  const covered = new Set<string>();
  const resources = new Set<string>();
  for (const r of rows) {
    const def = resourceForWebhookType(r.type);
    if (!def) continue;
    covered.add(`${def.name}|${r.project}`);
    resources.add(def.name);
  }
  // A list across projects is covered when every live project is (a project created since the
  // registrations has none: the list is polled).
  let projects: string[] | undefined;
  if (resources.size > 0) {
    const { rows: live } = await pool.query<{ id: string }>(
      `SELECT id FROM records WHERE account_id = $1 AND resource = 'projects' AND scope = '' AND deleted_at IS NULL`,
      [accountId],
    );
    projects = live.map((p) => p.id);
  }
  return {
    covers(resource, scope) {
      if (!resources.has(resource)) return false;
      const kind = pollKind(scope);
      if (kind === 'account') return covered.has(`${resource}|`);
      if (kind === 'project') return covered.has(`${resource}|${parseScope(scope)[0]![1]}`);
      if (kind === 'across') return (projects ?? []).length > 0 && projects!.every((p) => covered.has(`${resource}|${p}`));
      return false;
    },
  };
}

export interface PollDecision {
  due: boolean;
  /** Due because an event named the scope since its last poll (the poll then counts as a change). */
  event?: boolean;
  /** Not due: the stream's reason and next due time. */
  reason?: string;
  nextDueAt?: string;
}

const keyOf = (resource: string, scope: string) => `${resource}\n${scope}`;

/**
 * Project lists a pass may visit where the source system's rate is not known: SYNC_POLLS_PER_PASS, else
 * the number of resources the account's source system serves.
 */
function pollsPerPass(policy: PollingPolicy, resourcesServed: number): number {
  return policy.pollsPerPass !== undefined && policy.pollsPerPass > 0 ? Math.floor(policy.pollsPerPass) : Math.max(1, resourcesServed);
}

/**
 * Visits a minute incremental polling may spend on an account's project lists: the source system's
 * requests a minute (as the upstream reported them, else as its profile publishes them) times the
 * sync's share and the polling share, less the lists every pass lists anyway (one request each). Null
 * where the rate is not known.
 */
export function pollingVisitsPerMinute(policy: PollingPolicy, q: { requestsPerMinute: number | null; everyPass: number }): number | null {
  if (q.requestsPerMinute === null || !(q.requestsPerMinute > 0)) return null;
  const share = (policy.syncShare ?? 0.8) * (policy.pollingShare ?? 0.5);
  const fixed = q.everyPass / (policy.incrementalMs / 60_000);
  // At least a visit a pass: a budget spent whole by the lists every pass lists would starve the others.
  return Math.max(60_000 / policy.incrementalMs, q.requestsPerMinute * share - fixed);
}

/** "every ~42 min (learned: 3.1 changes a day)": why a list is visited when it is. */
function scheduledWhy(why: string, intervalMs: number, ratePerMs: number): string {
  const perDay = ratePerMs * 86_400_000;
  return `freshness: ${why}, every ~${formatEvery(intervalMs)} (learned: ${perDay < 10 ? perDay.toFixed(1) : Math.round(perDay)} changes a day)`;
}

interface DecisionRow {
  resource: string;
  scope: string;
  state: string;
  pass_key: string | null;
  last_pass_started_at: Date | null;
  touched_at: Date | null;
  next_due_at: Date | null;
  due_reason: string | null;
  poll_budget: string | null;
  seen_changes: number;
  observed_ms: number;
  now: Date;
}

const decisionColumns = `s.resource, s.scope, s.state, s.checkpoint->>'passKey' AS pass_key, s.last_pass_started_at, s.touched_at, s.next_due_at,
       s.due_reason, s.poll_budget, s.seen_changes, s.observed_ms, now() AS now`;

/** A project list the freshness scheduler weighs: completed once, not listed across projects (webhook-covered or not). */
const scheduledList = (r: DecisionRow): r is DecisionRow & { last_pass_started_at: Date } =>
  r.state === 'synced' && r.last_pass_started_at !== null && pollKind(r.scope) === 'project' && !r.due_reason?.startsWith(acrossReason);

/** An event named the list since its last visit. */
const eventNamed = (r: DecisionRow & { last_pass_started_at: Date }) => r.touched_at !== null && r.touched_at >= r.last_pass_started_at;

/**
 * Which of an account's streams an adaptive incremental pass lists now. Not due: an account-wide or
 * cross-project stream the upstream's webhooks cover (full passes list it: its events bring its changes
 * meanwhile), and a project's list the freshness scheduler does not pick this pass. Everything else is
 * due, and so is any stream never completed, failed or interrupted, or already begun by this pass.
 * Children are left to `parentsToRefresh`. A covered stream's reason and due time (its next full pass,
 * about) are written here when coverage came after its last poll (webhooks are registered after the
 * first pass).
 *
 * With `budget` (a sweep of an account's pass): the project lists are weighed by the freshness scheduler
 * over the whole account, since the pass's sweeps each hold a part of its lists and run side by side.
 * The first sweep to meet such lists plans for all of the account's (under a lock per account) and
 * writes each visit or deferral with the stream (`poll_budget`, with the pass key); the others, and a
 * retried sweep, read them. Without it (a stream run on its own), a project's list is listed.
 */
export async function pollingDecisions(
  pool: Pool,
  q: {
    accountId: string;
    passKey: string;
    streams: readonly { resource: string; scope: string }[];
    policy: PollingPolicy;
    coverage?: WebhookCoverage;
    /** Plan the pass's visits; `resources`: the resources the account's source system serves; `requestsPerMinute`: its published rate. */
    budget?: { resources?: number; requestsPerMinute?: number; sourceSystem?: string };
  },
): Promise<Map<string, PollDecision>> {
  const out = new Map<string, PollDecision>();
  const candidates = q.streams.filter((s) => pollKind(s.scope) !== 'children');
  for (const s of q.streams) out.set(keyOf(s.resource, s.scope), { due: true });
  if (candidates.length === 0) return out;
  const coverage = q.coverage ?? (await webhookCoverage(pool, q.accountId));
  const { rows } = await pool.query<DecisionRow>(
    `SELECT ${decisionColumns}
       FROM streams s JOIN unnest($2::text[], $3::text[]) AS k(resource, scope) ON s.resource = k.resource AND s.scope = k.scope
      WHERE s.account_id = $1`,
    [q.accountId, candidates.map((s) => s.resource), candidates.map((s) => s.scope)],
  );
  const bound = Math.max(q.policy.incrementalMs, q.policy.fullMs);
  const newlyCovered: { resource: string; scope: string; nextDueAt: Date }[] = [];
  /** Project lists of this sweep that no event named: the scheduler decides. */
  const weighed: DecisionRow[] = [];
  for (const r of rows) {
    const key = keyOf(r.resource, r.scope);
    if (r.state !== 'synced' || !r.last_pass_started_at || r.pass_key === q.passKey) continue;
    const kind = pollKind(r.scope);
    if (kind !== 'project' && coverage.covers(r.resource, r.scope)) {
      let nextDueAt = r.next_due_at;
      let reason = r.due_reason;
      if (reason !== webhookCoveredReason) {
        // Covered since its last poll (webhooks are registered after the first pass): the next full pass lists it.
        nextDueAt = new Date(r.last_pass_started_at.getTime() + bound);
        reason = webhookCoveredReason;
        newlyCovered.push({ resource: r.resource, scope: r.scope, nextDueAt });
      }
      out.set(key, { due: false, reason, nextDueAt: (nextDueAt ?? new Date(r.last_pass_started_at.getTime() + bound)).toISOString() });
      continue;
    }
    // Account-wide and cross-project lists (every pass), and project lists of a resource listed across projects: listed.
    if (!scheduledList(r)) continue;
    // An event on a list the webhooks cover brought its change: the list waits for the scheduler like the others.
    if (eventNamed(r) && !coverage.covers(r.resource, r.scope)) out.set(key, { due: true, event: true });
    else if (q.budget) weighed.push(r);
  }
  if (newlyCovered.length > 0) {
    await pool.query(
      `UPDATE streams s SET due_reason = $5, next_due_at = k.due FROM unnest($2::text[], $3::text[], $4::timestamptz[]) AS k(resource, scope, due)
        WHERE s.account_id = $1 AND s.resource = k.resource AND s.scope = k.scope`,
      [q.accountId, newlyCovered.map((c) => c.resource), newlyCovered.map((c) => c.scope), newlyCovered.map((c) => c.nextDueAt), webhookCoveredReason],
    );
  }
  if (weighed.length > 0 && q.budget) {
    const verdicts = await passPlan(pool, { accountId: q.accountId, passKey: q.passKey, policy: q.policy, coverage, ...q.budget });
    for (const r of weighed) {
      const verdict = verdicts.get(keyOf(r.resource, r.scope));
      // Not among the account's lists the plan weighed (its project is gone from the mirror): listed as before.
      if (!verdict || verdict.visit) continue;
      out.set(keyOf(r.resource, r.scope), { due: false, reason: verdict.reason, ...(verdict.nextDueAt ? { nextDueAt: verdict.nextDueAt.toISOString() } : {}) });
    }
  }
  return out;
}

/** The account's project lists of live projects (a removed project's lists are not swept: they would hold budget the pass never spends). */
const accountListsSql = `SELECT ${decisionColumns}
   FROM streams s
  WHERE s.account_id = $1 AND s.scope LIKE 'project=%' AND s.scope <> $2 AND position('/' in s.scope) = 0
    AND EXISTS (SELECT 1 FROM records p WHERE p.account_id = s.account_id AND p.resource = 'projects' AND p.scope = ''
                   AND p.deleted_at IS NULL AND s.scope = 'project=' || p.id)`;

/** Lists every incremental pass lists whatever the scheduler says: account-wide and cross-project ones the webhooks do not cover. */
async function everyPassLists(pool: Pick<Pool, 'query'>, accountId: string, coverage: WebhookCoverage): Promise<number> {
  const { rows } = await pool.query<{ resource: string; scope: string }>(
    `SELECT resource, scope FROM streams WHERE account_id = $1 AND (scope = '' OR scope = $2) AND state <> 'never_synced'`,
    [accountId, allProjectsScope],
  );
  return rows.filter((r) => !coverage.covers(r.resource, r.scope)).length;
}

/** The source system's requests a minute: as the upstream reported its window (rate_budgets), else `published`. */
async function requestsPerMinute(
  pool: Pick<Pool, 'query'>,
  accountId: string,
  sourceSystem: string | undefined,
  published: number | undefined,
): Promise<number | null> {
  if (sourceSystem) {
    const { rows } = await pool.query<{ total: number | null; window_ms: number | null }>(`SELECT total, window_ms FROM rate_budgets WHERE key = $1`, [
      `source:${accountId}:${sourceSystem.toLowerCase()}`,
    ]);
    const r = rows[0];
    if (r?.total && r.window_ms) return (r.total * 60_000) / r.window_ms;
  }
  return published ?? null;
}

interface AccountPlanInput {
  accountId: string;
  policy: PollingPolicy;
  coverage: WebhookCoverage;
  resources?: number;
  requestsPerMinute?: number;
  sourceSystem?: string;
}

/**
 * The freshness scheduler's plan for an account's project lists now: each list's staleness and learned
 * rate, the visits a minute the budget allows, and which the pass visits. Read-only: the status views
 * call it to say whether the target is met.
 */
export async function planAccountVisits(
  pool: Pick<Pool, 'query'>,
  q: AccountPlanInput,
): Promise<{
  plan: FreshnessPlan;
  rows: (DecisionRow & { last_pass_started_at: Date })[];
  /** Each row's learned change rate (changes a millisecond). */
  rates: number[];
  visitsPerMinute: number;
  requestsPerMinute: number | null;
  /** Lists every pass lists anyway (a request each). */
  everyPass: number;
}> {
  const { rows } = await pool.query<DecisionRow>(accountListsSql, [q.accountId, allProjectsScope]);
  const lists = rows.filter(scheduledList);
  const rpm = await requestsPerMinute(pool, q.accountId, q.sourceSystem, q.requestsPerMinute);
  const everyPass = await everyPassLists(pool, q.accountId, q.coverage);
  const known = pollingVisitsPerMinute(q.policy, { requestsPerMinute: rpm, everyPass });
  // The rate not known: as many visits a pass as SYNC_POLLS_PER_PASS (or the resources served) say.
  const visitsPerMinute = known ?? pollsPerPass(q.policy, q.resources ?? 1) / (q.policy.incrementalMs / 60_000);
  // Each list's rate, from its polls weighed against how its resource's lists' rates are spread and how
  // active its project's other lists are.
  const rates = learnedRates(
    lists.map((r) => ({ changes: r.seen_changes, observedMs: r.observed_ms, resource: r.resource, project: parseScope(r.scope)[0]![1] })),
  );
  const plan = planVisits({
    lists: lists.map((r, i) => {
      const covered = q.coverage.covers(r.resource, r.scope);
      return {
        key: keyOf(r.resource, r.scope),
        stalenessMs: Math.max(0, r.now.getTime() - r.last_pass_started_at.getTime()),
        rate: rates[i]!,
        observedMs: r.observed_ms,
        event: eventNamed(r) && !covered,
        covered,
      };
    }),
    visitsPerMinute,
    passMs: q.policy.incrementalMs,
  });
  return { plan, rows: lists, rates, visitsPerMinute, requestsPerMinute: rpm, everyPass };
}

interface Verdict {
  visit: boolean;
  reason: string;
  nextDueAt: Date | null;
}

/**
 * The pass's plan over all of the account's project lists (see {@link pollingDecisions}): visits and
 * deferrals already written for this pass stand; otherwise the scheduler plans now and writes each
 * list's verdict, reason and the time its interval brings it round again. Serialised per account, so
 * two sweeps never both spend the budget.
 */
async function passPlan(pool: Pool, q: AccountPlanInput & { passKey: string }): Promise<Map<string, Verdict>> {
  return inTransaction(pool, async (client) => {
    await client.query(`SELECT pg_advisory_xact_lock(hashtext($1))`, [`poll-budget:${q.accountId}`]);
    const granted = `granted:${q.passKey}`;
    const deferred = `deferred:${q.passKey}`;
    const verdicts = new Map<string, Verdict>();
    const { rows: decided } = await client.query<{ resource: string; scope: string; poll_budget: string; due_reason: string | null; next_due_at: Date | null }>(
      `SELECT resource, scope, poll_budget, due_reason, next_due_at FROM streams WHERE account_id = $1 AND poll_budget = ANY($2::text[])`,
      [q.accountId, [granted, deferred]],
    );
    if (decided.length > 0) {
      for (const r of decided)
        verdicts.set(keyOf(r.resource, r.scope), { visit: r.poll_budget === granted, reason: r.due_reason ?? '', nextDueAt: r.next_due_at });
      return verdicts;
    }
    const { plan, rows, rates } = await planAccountVisits(client, q);
    const write = { resource: [] as string[], scope: [] as string[], budget: [] as string[], reason: [] as string[], due: [] as Date[] };
    plan.lists.forEach((p, i) => {
      const r = rows[i]!;
      const reason = scheduledWhy(p.visit ? `visited (${p.why})` : 'deferred', p.intervalMs, rates[i]!);
      const nextDueAt = new Date(r.last_pass_started_at.getTime() + Math.min(p.intervalMs, plan.floorMs));
      verdicts.set(p.key, { visit: p.visit, reason, nextDueAt });
      write.resource.push(r.resource);
      write.scope.push(r.scope);
      write.budget.push(p.visit ? granted : deferred);
      write.reason.push(reason);
      write.due.push(nextDueAt);
    });
    if (write.resource.length > 0) {
      await client.query(
        `UPDATE streams s SET poll_budget = k.budget, due_reason = k.reason, next_due_at = k.due
           FROM unnest($2::text[], $3::text[], $4::text[], $5::text[], $6::timestamptz[]) AS k(resource, scope, budget, reason, due)
          WHERE s.account_id = $1 AND s.resource = k.resource AND s.scope = k.scope`,
        [q.accountId, write.resource, write.scope, write.budget, write.reason, write.due],
      );
    }
    return verdicts;
  });
}

export function pollingDecision(decisions: Map<string, PollDecision>, resource: string, scope: string): PollDecision {
  return decisions.get(keyOf(resource, scope)) ?? { due: true };
}

/**
 * After a stream's pass completed: counts the poll (changed or not) and writes when the stream is due
 * next and why. Once per pass (a retried activity finds it counted). A list across projects also
 * writes its projects' streams' due time (they are listed with it).
 */
export async function recordPoll(pool: Pool, key: StreamKey, o: { policy: PollingPolicy; covered: boolean; event?: boolean }): Promise<PollPlan | undefined> {
  return inTransaction(pool, async (client) => {
    const { rows } = await client.query<{
      id: number;
      generation: number;
      polled_generation: number | null;
      unchanged_polls: number;
      state: string;
      checkpoint: unknown;
      last_pass_started_at: Date | null;
    }>(
      `SELECT id, generation, polled_generation, unchanged_polls, state, checkpoint, last_pass_started_at FROM streams
        WHERE account_id = $1 AND resource = $2 AND scope = $3 FOR UPDATE`,
      [key.accountId, key.resource, key.scope],
    );
    const row = rows[0];
    if (!row || row.state !== 'synced' || !row.last_pass_started_at || row.polled_generation === row.generation) return undefined;
    const checkpoint = checkpointSchema.safeParse(row.checkpoint);
    if (!checkpoint.success || !checkpoint.data.done) return undefined;
    const c = checkpoint.data.counts;
    const plan = pollingAfter(
      {
        kind: pollKind(key.scope),
        covered: o.covered,
        first: row.polled_generation === null,
        changed: Boolean(o.event) || c.inserted + c.updated + c.deleted > 0,
        unchangedBefore: row.unchanged_polls,
        polledAt: row.last_pass_started_at,
      },
      o.policy,
    );
    // A project's list keeps the due time and reason the scheduler wrote when it planned the pass.
    const planned = pollKind(key.scope) === 'project' && row.polled_generation !== null;
    await client.query(
      `UPDATE streams SET unchanged_polls = $2, next_due_at = CASE WHEN $5 THEN next_due_at ELSE $3 END,
              due_reason = CASE WHEN $5 THEN due_reason ELSE $4 END, polled_generation = generation WHERE id = $1`,
      [row.id, plan.unchangedPolls, plan.nextDueAt, plan.reason, planned],
    );
    if (key.scope === allProjectsScope) {
      await client.query(
        `UPDATE streams SET next_due_at = $3, due_reason = $4 WHERE account_id = $1 AND resource = $2 AND scope LIKE 'project=%' AND scope <> $5 AND position('/' in scope) = 0`,
        [key.accountId, key.resource, plan.nextDueAt, o.covered ? plan.reason : acrossReason, allProjectsScope],
      );
    }
    return plan;
  });
}
