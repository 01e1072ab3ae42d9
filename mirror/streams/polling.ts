// Adaptive polling (issue 22, item 5): when an incremental pass asks the upstream for a stream again,
// and why. A project's own list (one request per project and pass, whatever changed) that found nothing
// changed is asked less often: its interval doubles with each such poll, from the incremental period up
// to the full-pass period (so it is never staler than that, full passes or not), and starts over when a
// poll finds a change or an event names the scope. A stream the upstream's webhooks cover (the account
// registered CREATE, UPDATE and DELETE for its type and project) is listed by full passes only. Full
// passes list everything, due or not. The decision and its reason are kept with the stream.
// Project lists that back off in step (hundreds of projects linked at once) would all come due at the
// same pass: an incremental pass lists at most a budget of the lists due only by their clock (the most
// overdue first), and the rest wait, still due, for the next pass (see {@link withinBudget}).
import { allProjectsScope, parseScope, resourceForWebhookType } from '../../lib/resources.ts';
import { checkpointSchema, type StreamKey } from './streams.ts';
import { inTransaction, type Pool } from '../db/pool.ts';

export interface PollingPolicy {
  /** The incremental passes' period (SYNC_INCREMENTAL_MINUTES): the shortest interval. */
  incrementalMs: number;
  /** The full passes' period (SYNC_FULL_HOURS): the longest interval, the bound on staleness. */
  fullMs: number;
  /**
   * Most project lists due only by their clock that an incremental pass lists (SYNC_POLLS_PER_PASS);
   * 0 or unset: the number of resources the account's source system serves (see {@link pollsPerPass}).
   */
  pollsPerPass?: number;
}

export const defaultPollingPolicy: PollingPolicy = { incrementalMs: 15 * 60_000, fullMs: 24 * 3_600_000 };

/**
 * How a stream is polled: `project`, a project's own list (adaptive); `account`, an account-wide list
 * and `across`, a list across projects (one request each per idle pass: every incremental pass);
 * `children`, a parent's children (listed when the parent changed: mirror/streams/streams.ts `parentsToRefresh`).
 */
export type PollKind = 'account' | 'across' | 'project' | 'children';

export function pollKind(scope: string): PollKind {
  if (scope === '') return 'account';
  if (scope === allProjectsScope) return 'across';
  const parts = parseScope(scope);
  return parts.length === 1 && parts[0]![0] === 'project' ? 'project' : 'children';
}

/** Reasons that say a stream is not listed by incremental passes (see {@link pollingAfter}). */
export const webhookCoveredReason = 'webhook-covered: full pass only';
export const acrossReason = 'listed across projects';
/** A project list's poll that found a change (or an event named it): listed at the next pass, budget or not. */
export const changedReason = 'changed last poll';
export const firstReason = 'first listed';

/**
 * A pass's sweep may be due a little early: passes start on a schedule but reach a stream minutes in,
 * so a stream due at 10:15:20 would otherwise wait for the 10:30 pass when the 10:15 one reaches it at
 * 10:15:05. Half the incremental period: the stream is listed by the pass nearest its due time.
 */
export function dueSlackMs(policy: PollingPolicy): number {
  return policy.incrementalMs / 2;
}

/** The interval after `unchanged` polls in a row found nothing: the incremental period doubled each time, at most the full-pass period. */
export function pollInterval(policy: PollingPolicy, unchanged: number): number {
  const bound = Math.max(policy.incrementalMs, policy.fullMs);
  // 2^30 periods is past any bound; the exponent is kept small so the product stays exact.
  return Math.min(bound, policy.incrementalMs * 2 ** Math.min(unchanged, 30));
}

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

export interface PollPlan {
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
  if (o.covered) return { unchangedPolls, nextDueAt: at(Math.max(policy.incrementalMs, policy.fullMs)), reason: webhookCoveredReason };
  if (o.kind === 'account') return { unchangedPolls, nextDueAt: at(policy.incrementalMs), reason: 'account-wide list: every incremental pass' };
  if (o.kind === 'across') return { unchangedPolls, nextDueAt: at(policy.incrementalMs), reason: `${acrossReason}: every incremental pass` };
  const interval = pollInterval(policy, unchangedPolls);
  const every = `every ${formatEvery(interval)}${interval >= policy.fullMs && unchangedPolls > 0 ? ' (the bound: the full-pass period)' : ''}`;
  const reason = o.first
    ? `${firstReason}: ${every}`
    : o.changed
      ? `${changedReason}: ${every}`
      : `unchanged ${unchangedPolls} poll${unchangedPolls === 1 ? '' : 's'}: ${every}`;
  return { unchangedPolls, nextDueAt: at(interval), reason };
}

/** Which streams of an account the upstream's webhooks cover: every event of their type, for their project. */
export interface WebhookCoverage {
  covers(resource: string, scope: string): boolean;
}

const webhookEvents = ['CREATE', 'UPDATE', 'DELETE'];

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
 * How a project's list stands at an incremental pass: `not-due` (its next due time is not reached,
 * within {@link dueSlackMs}); due because an `event` named it since its last poll, because its last poll
 * `changed` something (or none was recorded), because its last poll is as old as the bound allows
 * (`forced`: the full-pass period minus the slack, so it is never staler than that period), or only by
 * its `clock`: the one kind a pass's poll budget may defer ({@link withinBudget}).
 */
export type PollClass = 'not-due' | 'event' | 'changed' | 'forced' | 'clock';

export interface PollState {
  /** The last poll's start (`last_pass_started_at`). */
  lastPolledAt: Date;
  nextDueAt: Date | null;
  unchangedPolls: number;
  reason: string | null;
  /** When a record of the stream was last changed outside a pass (an event). */
  touchedAt: Date | null;
}

export function pollClass(s: PollState, now: Date, policy: PollingPolicy): PollClass {
  const slack = dueSlackMs(policy);
  if (s.touchedAt && s.touchedAt >= s.lastPolledAt) return 'event';
  if (now.getTime() - s.lastPolledAt.getTime() >= Math.max(policy.incrementalMs, policy.fullMs) - slack) return 'forced';
  if (s.nextDueAt && s.nextDueAt.getTime() > now.getTime() + slack) return 'not-due';
  if (!s.nextDueAt || (s.unchangedPolls === 0 && s.reason?.startsWith(changedReason))) return 'changed';
  return 'clock';
}

/**
 * Project lists due only by their clock that one incremental pass lists: SYNC_POLLS_PER_PASS, else the
 * number of resources the account's source system serves, so that an idle pass costs at most about
 * twice that (one request per account-wide or cross-project list, plus these).
 */
export function pollsPerPass(policy: PollingPolicy, resourcesServed: number): number {
  return policy.pollsPerPass !== undefined && policy.pollsPerPass > 0 ? Math.floor(policy.pollsPerPass) : Math.max(1, resourcesServed);
}

/** FNV-1a (32 bits) of a stream's resource and scope: the same order every pass, another in every account. */
export function scopeHash(resource: string, scope: string): number {
  let h = 0x811c9dc5;
  const text = keyOf(resource, scope);
  for (let i = 0; i < text.length; i++) {
    h ^= text.charCodeAt(i);
    h = Math.imul(h, 0x01000193) >>> 0;
  }
  return h;
}

export interface BudgetCandidate {
  resource: string;
  scope: string;
  nextDueAt: Date | null;
}

/**
 * A pass's poll budget: of the lists due only by their clock, the `room` most overdue (earliest next
 * due time; ties in the order of {@link scopeHash}) are listed, the others deferred. A deferred list
 * keeps its next due time, so it is ahead of the lists that come due after it at the next pass.
 */
export function withinBudget<T extends BudgetCandidate>(candidates: readonly T[], room: number): { granted: T[]; deferred: T[] } {
  const ordered = [...candidates].sort(
    (a, b) =>
      (a.nextDueAt?.getTime() ?? 0) - (b.nextDueAt?.getTime() ?? 0) ||
      scopeHash(a.resource, a.scope) - scopeHash(b.resource, b.scope) ||
      (a.scope < b.scope ? -1 : a.scope > b.scope ? 1 : 0),
  );
  const n = Math.max(0, room);
  return { granted: ordered.slice(0, n), deferred: ordered.slice(n) };
}

export function deferredReason(perPass: number): string {
  return `deferred: this pass's poll budget (${perPass} list${perPass === 1 ? '' : 's'}) went to longer-waiting ones`;
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
  unchanged_polls: number;
  poll_budget: string | null;
  now: Date;
}

const decisionColumns = `s.resource, s.scope, s.state, s.checkpoint->>'passKey' AS pass_key, s.last_pass_started_at, s.touched_at, s.next_due_at,
       s.due_reason, s.unchanged_polls, s.poll_budget, now() AS now`;

const stateOf = (r: DecisionRow & { last_pass_started_at: Date }): PollState => ({
  lastPolledAt: r.last_pass_started_at,
  nextDueAt: r.next_due_at,
  unchangedPolls: r.unchanged_polls,
  reason: r.due_reason,
  touchedAt: r.touched_at,
});

/** A project list an adaptive pass polls on a clock (not covered by webhooks, not listed across projects). */
const adaptiveProjectList = (r: DecisionRow, coverage: WebhookCoverage): r is DecisionRow & { last_pass_started_at: Date } =>
  r.state === 'synced' &&
  r.last_pass_started_at !== null &&
  pollKind(r.scope) === 'project' &&
  !coverage.covers(r.resource, r.scope) &&
  r.due_reason !== webhookCoveredReason &&
  !r.due_reason?.startsWith(acrossReason);

/**
 * Which of an account's streams an adaptive incremental pass lists now. Not due: a stream the
 * upstream's webhooks cover (full passes list it: its events bring its changes meanwhile), and a
 * project's list whose next due time is not reached (within {@link dueSlackMs}) and that no event named
 * since its last poll. Everything else is due, and so is any stream never completed, failed or
 * interrupted, or already begun by this pass. Children are left to `parentsToRefresh`. A covered
 * stream's reason and due time (its next full pass, about) are written here when coverage came after its
 * last poll (webhooks are registered after the first pass).
 *
 * With `budget` (a sweep of an account's pass): of the project lists due only by their clock, the pass
 * lists at most its poll budget ({@link pollsPerPass}), decided over the whole account, since the
 * pass's sweeps each hold a part of its lists and run side by side. The first sweep to meet such lists
 * decides for all of the account's (under a lock per account) and writes each grant or deferral with the
 * stream (`poll_budget`, with the pass key); the others, and a retried sweep, read them, and give what
 * budget is left to lists that came due since.
 */
export async function pollingDecisions(
  pool: Pool,
  q: {
    accountId: string;
    passKey: string;
    streams: readonly { resource: string; scope: string }[];
    policy: PollingPolicy;
    coverage?: WebhookCoverage;
    /** Apply the pass's poll budget; `resources`: the resources the account's source system serves, when known. */
    budget?: { resources?: number };
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
  /** Lists of this sweep due only by their clock: the pass's budget decides. */
  const byClock: DecisionRow[] = [];
  for (const r of rows) {
    const key = keyOf(r.resource, r.scope);
    if (r.state !== 'synced' || !r.last_pass_started_at || r.pass_key === q.passKey) continue;
    const kind = pollKind(r.scope);
    const covered = coverage.covers(r.resource, r.scope);
    let nextDueAt = r.next_due_at;
    let reason = r.due_reason;
    if (covered) {
      if (reason !== webhookCoveredReason) {
        // Covered since its last poll (webhooks are registered after the first pass): the next full pass lists it.
        nextDueAt = new Date(r.last_pass_started_at.getTime() + bound);
        reason = webhookCoveredReason;
        newlyCovered.push({ resource: r.resource, scope: r.scope, nextDueAt });
      }
      out.set(key, { due: false, reason, nextDueAt: (nextDueAt ?? new Date(r.last_pass_started_at.getTime() + bound)).toISOString() });
      continue;
    }
    // Not adaptive, or polled until now as covered or across projects: listed.
    if (kind !== 'project' || reason === webhookCoveredReason || reason?.startsWith(acrossReason)) continue;
    const cls = pollClass(stateOf({ ...r, last_pass_started_at: r.last_pass_started_at }), r.now, q.policy);
    if (cls === 'event') out.set(key, { due: true, event: true });
    else if (cls === 'not-due') out.set(key, { due: false, reason: reason ?? 'not due', nextDueAt: nextDueAt!.toISOString() });
    else if (cls === 'clock' && q.budget) byClock.push(r);
  }
  if (newlyCovered.length > 0) {
    await pool.query(
      `UPDATE streams s SET due_reason = $5, next_due_at = k.due FROM unnest($2::text[], $3::text[], $4::timestamptz[]) AS k(resource, scope, due)
        WHERE s.account_id = $1 AND s.resource = k.resource AND s.scope = k.scope`,
      [q.accountId, newlyCovered.map((c) => c.resource), newlyCovered.map((c) => c.scope), newlyCovered.map((c) => c.nextDueAt), webhookCoveredReason],
    );
  }
  if (byClock.length > 0 && q.budget) {
    const budget = await passBudget(pool, { accountId: q.accountId, passKey: q.passKey, policy: q.policy, coverage, resources: q.budget.resources });
    for (const r of byClock) {
      const verdict = budget.verdicts.get(keyOf(r.resource, r.scope));
      // Not among the account's lists the budget weighed (its project is gone from the mirror): listed as before.
      if (verdict !== 'deferred') continue;
      out.set(keyOf(r.resource, r.scope), {
        due: false,
        reason: deferredReason(budget.perPass),
        ...(r.next_due_at ? { nextDueAt: r.next_due_at.toISOString() } : {}),
      });
    }
  }
  return out;
}

/**
 * The pass's poll budget over all of the account's project lists (see {@link pollingDecisions}): grants
 * and deferrals already written for this pass stand; lists due only by their clock and not yet weighed
 * share what is left, the most overdue first. Serialised per account, so two sweeps never both spend it.
 */
async function passBudget(
  pool: Pool,
  q: { accountId: string; passKey: string; policy: PollingPolicy; coverage: WebhookCoverage; resources: number | undefined },
): Promise<{ perPass: number; verdicts: Map<string, 'granted' | 'deferred'> }> {
  return inTransaction(pool, async (client) => {
    await client.query(`SELECT pg_advisory_xact_lock(hashtext($1))`, [`poll-budget:${q.accountId}`]);
    let resources = q.resources;
    if (resources === undefined) {
      const { rows } = await client.query<{ n: number }>(`SELECT count(DISTINCT resource)::int AS n FROM streams WHERE account_id = $1`, [q.accountId]);
      resources = rows[0]!.n;
    }
    const perPass = pollsPerPass(q.policy, resources);
    // The account's project lists of live projects (a removed project's lists are not swept: they
    // would hold budget the pass never spends).
    const { rows } = await client.query<DecisionRow>(
      `SELECT ${decisionColumns}
         FROM streams s
        WHERE s.account_id = $1 AND s.scope LIKE 'project=%' AND s.scope <> $2 AND position('/' in s.scope) = 0
          AND EXISTS (SELECT 1 FROM records p WHERE p.account_id = s.account_id AND p.resource = 'projects' AND p.scope = ''
                         AND p.deleted_at IS NULL AND s.scope = 'project=' || p.id)`,
      [q.accountId, allProjectsScope],
    );
    const granted = `granted:${q.passKey}`;
    const deferred = `deferred:${q.passKey}`;
    const verdicts = new Map<string, 'granted' | 'deferred'>();
    let spent = 0;
    const open: (DecisionRow & BudgetCandidate)[] = [];
    for (const r of rows) {
      if (r.poll_budget === granted) {
        verdicts.set(keyOf(r.resource, r.scope), 'granted');
        spent++;
      } else if (r.poll_budget === deferred) {
        verdicts.set(keyOf(r.resource, r.scope), 'deferred');
      } else if (r.pass_key !== q.passKey && adaptiveProjectList(r, q.coverage) && pollClass(stateOf(r), r.now, q.policy) === 'clock') {
        open.push({ ...r, nextDueAt: r.next_due_at });
      }
    }
    const split = withinBudget(open, perPass - spent);
    for (const r of split.granted) verdicts.set(keyOf(r.resource, r.scope), 'granted');
    for (const r of split.deferred) verdicts.set(keyOf(r.resource, r.scope), 'deferred');
    const write = async (list: readonly DecisionRow[], value: string, reason: string | null) => {
      if (list.length === 0) return;
      await client.query(
        `UPDATE streams s SET poll_budget = $4, due_reason = coalesce($5, s.due_reason) FROM unnest($2::text[], $3::text[]) AS k(resource, scope)
          WHERE s.account_id = $1 AND s.resource = k.resource AND s.scope = k.scope`,
        [q.accountId, list.map((r) => r.resource), list.map((r) => r.scope), value, reason],
      );
    };
    await write(split.granted, granted, null);
    // The deferred keep their next due time (the most overdue come first next pass); their reason says why.
    await write(split.deferred, deferred, deferredReason(perPass));
    return { perPass, verdicts };
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
    await client.query(`UPDATE streams SET unchanged_polls = $2, next_due_at = $3, due_reason = $4, polled_generation = generation WHERE id = $1`, [
      row.id,
      plan.unchangedPolls,
      plan.nextDueAt,
      plan.reason,
    ]);
    if (key.scope === allProjectsScope) {
      await client.query(
        `UPDATE streams SET next_due_at = $3, due_reason = $4 WHERE account_id = $1 AND resource = $2 AND scope LIKE 'project=%' AND scope <> $5 AND position('/' in scope) = 0`,
        [key.accountId, key.resource, plan.nextDueAt, o.covered ? plan.reason : acrossReason, allProjectsScope],
      );
    }
    return plan;
  });
}
