// Adaptive polling (issue 22, item 5): when an incremental pass asks the upstream for a stream again,
// and why. A project's own list (one request per project and pass, whatever changed) that found nothing
// changed is asked less often: its interval doubles with each such poll, from the incremental period up
// to the full-pass period (so it is never staler than that, full passes or not), and starts over when a
// poll finds a change or an event names the scope. A stream the upstream's webhooks cover (the account
// registered CREATE, UPDATE and DELETE for its type and project) is listed by full passes only. Full
// passes list everything, due or not. The decision and its reason are kept with the stream.
import { allProjectsScope, parseScope, resourceForWebhookType } from '../lib/resources.ts';
import { checkpointSchema, type StreamKey } from './streams.ts';
import { inTransaction, type Pool } from './pool.ts';

export interface PollingPolicy {
  /** The incremental passes' period (SYNC_INCREMENTAL_MINUTES): the shortest interval. */
  incrementalMs: number;
  /** The full passes' period (SYNC_FULL_HOURS): the longest interval, the bound on staleness. */
  fullMs: number;
}

export const defaultPollingPolicy: PollingPolicy = { incrementalMs: 15 * 60_000, fullMs: 24 * 3_600_000 };

/**
 * How a stream is polled: `project`, a project's own list (adaptive); `account`, an account-wide list
 * and `across`, a list across projects (one request each per idle pass: every incremental pass);
 * `children`, a parent's children (listed when the parent changed: mirror/streams.ts `parentsToRefresh`).
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
}

export interface PollPlan {
  unchangedPolls: number;
  /** Null: not on a clock (children follow their parent). */
  nextDueAt: Date | null;
  reason: string;
}

/** What a completed poll means for the stream's next one. */
export function pollingAfter(o: PollOutcome, policy: PollingPolicy): PollPlan {
  const unchangedPolls = o.changed ? 0 : o.unchangedBefore + 1;
  const at = (ms: number) => new Date(o.polledAt.getTime() + ms);
  if (o.kind === 'children') return { unchangedPolls, nextDueAt: null, reason: 'children: listed when their parent changes' };
  if (o.covered) return { unchangedPolls, nextDueAt: at(Math.max(policy.incrementalMs, policy.fullMs)), reason: webhookCoveredReason };
  if (o.kind === 'account') return { unchangedPolls, nextDueAt: at(policy.incrementalMs), reason: 'account-wide list: every incremental pass' };
  if (o.kind === 'across') return { unchangedPolls, nextDueAt: at(policy.incrementalMs), reason: `${acrossReason}: every incremental pass` };
  const interval = pollInterval(policy, unchangedPolls);
  const every = `every ${formatEvery(interval)}${interval >= policy.fullMs && unchangedPolls > 0 ? ' (the bound: the full-pass period)' : ''}`;
  const reason = o.changed ? `changed last poll: ${every}` : `unchanged ${unchangedPolls} poll${unchangedPolls === 1 ? '' : 's'}: ${every}`;
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
    const { rows: live } = await pool.query<{ id: string }>(`SELECT id FROM records WHERE account_id = $1 AND resource = 'projects' AND scope = '' AND deleted_at IS NULL`, [accountId]);
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
 * Which of an account's streams an adaptive incremental pass lists now. Not due: a stream the
 * upstream's webhooks cover (full passes list it: its events bring its changes meanwhile), and a
 * project's list whose next due time is not reached (within {@link dueSlackMs}) and that no event named
 * since its last poll. Everything else is due, and so is any stream never completed, failed or
 * interrupted, or already begun by this pass. Children are left to `parentsToRefresh`. A covered
 * stream's reason and due time (its next full pass, about) are written here when coverage came after its
 * last poll (webhooks are registered after the first pass).
 */
export async function pollingDecisions(
  pool: Pool,
  q: { accountId: string; passKey: string; streams: readonly { resource: string; scope: string }[]; policy: PollingPolicy; coverage?: WebhookCoverage },
): Promise<Map<string, PollDecision>> {
  const out = new Map<string, PollDecision>();
  const candidates = q.streams.filter((s) => pollKind(s.scope) !== 'children');
  for (const s of q.streams) out.set(keyOf(s.resource, s.scope), { due: true });
  if (candidates.length === 0) return out;
  const coverage = q.coverage ?? (await webhookCoverage(pool, q.accountId));
  const { rows } = await pool.query<{
    resource: string;
    scope: string;
    state: string;
    pass_key: string | null;
    last_pass_started_at: Date | null;
    touched_at: Date | null;
    next_due_at: Date | null;
    due_reason: string | null;
    now: Date;
  }>(
    `SELECT s.resource, s.scope, s.state, s.checkpoint->>'passKey' AS pass_key, s.last_pass_started_at, s.touched_at, s.next_due_at, s.due_reason, now() AS now
       FROM streams s JOIN unnest($2::text[], $3::text[]) AS k(resource, scope) ON s.resource = k.resource AND s.scope = k.scope
      WHERE s.account_id = $1`,
    [q.accountId, candidates.map((s) => s.resource), candidates.map((s) => s.scope)],
  );
  const bound = Math.max(q.policy.incrementalMs, q.policy.fullMs);
  const newlyCovered: { resource: string; scope: string; nextDueAt: Date }[] = [];
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
    if (r.touched_at && r.touched_at >= r.last_pass_started_at) {
      out.set(key, { due: true, event: true });
      continue;
    }
    if (!nextDueAt || nextDueAt.getTime() <= r.now.getTime() + dueSlackMs(q.policy)) continue;
    out.set(key, { due: false, reason: reason ?? 'not due', nextDueAt: nextDueAt.toISOString() });
  }
  if (newlyCovered.length > 0) {
    await pool.query(
      `UPDATE streams s SET due_reason = $5, next_due_at = k.due FROM unnest($2::text[], $3::text[], $4::timestamptz[]) AS k(resource, scope, due)
        WHERE s.account_id = $1 AND s.resource = k.resource AND s.scope = k.scope`,
      [q.accountId, newlyCovered.map((c) => c.resource), newlyCovered.map((c) => c.scope), newlyCovered.map((c) => c.nextDueAt), webhookCoveredReason],
    );
  }
  return out;
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
    const { rows } = await client.query<{ id: number; generation: number; polled_generation: number | null; unchanged_polls: number; state: string; checkpoint: unknown; last_pass_started_at: Date | null }>(
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
