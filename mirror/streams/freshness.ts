// Freshness: when each list (stream) was last verified against the upstream, and how stale the lists
// of an account and resource are. A list is verified by a completed pass of it (as of the pass's start:
// a change made upstream after that may not be in it). A list across projects verifies each project's
// list (its pass writes theirs, mirror/records/finish-pass.ts coverProjects); a parent's children are verified with
// their parent (children change only with it: an incremental pass lists them under a changed parent).
import { allProjectsScope, parseScope, formatScope } from '../../lib/resources.ts';
import { rateMemoryMs, targetReport } from './freshness-plan.ts';
import { planAccountVisits, webhookCoverage, type PollingPolicy } from './polling.ts';
import type { Pool } from '../db/pool.ts';
import type { Family } from '../ops/metrics.ts';
import type { StreamKey } from './streams.ts';

/**
 * When the scope `(account, resource, scope)` was last verified upstream: the start of the last
 * completed pass of its list (a project's list verified by the list across projects counts), or of its
 * parent's list for children (whichever is later). Null: never verified (no pass completed).
 */
export async function scopeLastVerifiedAt(pool: Pool, key: StreamKey): Promise<Date | null> {
  const candidates = verifyingStreams(key.resource, key.scope);
  const { rows } = await pool.query<{ at: Date | null }>(
    `SELECT max(s.last_pass_started_at) AS at
       FROM streams s JOIN unnest($2::text[], $3::text[]) AS k(resource, scope) ON s.resource = k.resource AND s.scope = k.scope
      WHERE s.account_id = $1`,
    [key.accountId, candidates.map((c) => c.resource), candidates.map((c) => c.scope)],
  );
  return rows[0]?.at ?? null;
}

/** The lists whose completed pass verifies a scope: its own; for a project's list, the list across projects; for children, their parent's. */
function verifyingStreams(resource: string, scope: string): { resource: string; scope: string }[] {
  const out = [{ resource, scope }];
  const parts = parseScope(scope);
  if (parts.length === 1 && parts[0]![0] === 'project' && scope !== allProjectsScope) out.push({ resource, scope: allProjectsScope });
  if (parts.length >= 1) {
    const [parentResource] = parts[parts.length - 1]!;
    const parentScope = formatScope(parts.slice(0, -1));
    // A child's last scope part names its parent (e.g. `ap-invoices=<id>`): the parent's list is the one that verifies it.
    if (parentResource !== 'project') {
      out.push({ resource: parentResource, scope: parentScope });
      const pp = parseScope(parentScope);
      if (pp.length === 1 && pp[0]![0] === 'project') out.push({ resource: parentResource, scope: allProjectsScope });
    }
  }
  return out;
}

interface StalenessStats {
  lists: number;
  /** Seconds since last verified, over the lists; null when none was ever verified. */
  p50: number | null;
  p95: number | null;
  max: number | null;
  /** Lists never verified (no pass completed). */
  never: number;
}

/** Nearest-rank percentile of sorted values. */
function percentile(sorted: readonly number[], p: number): number | null {
  if (sorted.length === 0) return null;
  const rank = Math.min(sorted.length, Math.max(1, Math.ceil((p / 100) * sorted.length)));
  return sorted[rank - 1]!;
}

export function stalenessStats(seconds: readonly (number | null)[]): StalenessStats {
  const known = seconds.filter((s): s is number => s !== null).sort((a, b) => a - b);
  return {
    lists: seconds.length,
    p50: percentile(known, 50),
    p95: percentile(known, 95),
    max: known.length > 0 ? known[known.length - 1]! : null,
    never: seconds.length - known.length,
  };
}

interface ListStaleness {
  accountId: string;
  sourceSystem: string;
  resource: string;
  scope: string;
  /** Seconds since the list was last verified (null: never). */
  stalenessSeconds: number | null;
}

/**
 * Every list of the linked accounts with its staleness (now minus its last verification, as
 * {@link scopeLastVerifiedAt} counts it). Lists across projects are left out: each project's list
 * stands for its part.
 */
export async function listStaleness(pool: Pool, filter: { accountId?: string } = {}): Promise<ListStaleness[]> {
  const { rows } = await pool.query<{ account_id: string; source_system: string; resource: string; scope: string; verified: Date | null; now: Date }>(
    `SELECT s.account_id, a.source_system, s.resource, s.scope, s.last_pass_started_at AS verified, now() AS now
       FROM streams s JOIN linked_accounts a ON a.id = s.account_id
      WHERE ($1::uuid IS NULL OR s.account_id = $1) AND a.status = 'linked'`,
    [filter.accountId ?? null],
  );
  const verified = new Map<string, Date | null>();
  for (const r of rows) verified.set(`${r.account_id}\n${r.resource}\n${r.scope}`, r.verified);
  const out: ListStaleness[] = [];
  for (const r of rows) {
    if (r.scope === allProjectsScope) continue;
    let at: Date | null = null;
    for (const v of verifyingStreams(r.resource, r.scope)) {
      const t = verified.get(`${r.account_id}\n${v.resource}\n${v.scope}`) ?? null;
      if (t && (!at || t > at)) at = t;
    }
    out.push({
      accountId: r.account_id,
      sourceSystem: r.source_system,
      resource: r.resource,
      scope: r.scope,
      stalenessSeconds: at ? Math.max(0, (r.now.getTime() - at.getTime()) / 1000) : null,
    });
  }
  return out;
}

/**
 * The SET clause of a completed pass that adds it to the list's change history (`observe` in
 * mirror/streams/freshness-plan.ts, the same arithmetic): the time since the pass before (`last_pass_started_at`
 * as it was) and the records the pass changed, `counts` (a boolean parameter) only for an incremental
 * pass after an earlier one. `changes` is the parameter with the count.
 */
export function observeChangesSql(counts: string, changes: string): string {
  const interval = `greatest(0, extract(epoch FROM pass_started_at - last_pass_started_at) * 1000)`;
  const decay = `exp(-${interval} / ${rateMemoryMs})`;
  const when = `${counts}::boolean AND last_pass_started_at IS NOT NULL AND pass_started_at IS NOT NULL`;
  return (
    `seen_changes = CASE WHEN ${when} THEN seen_changes * ${decay} + ${changes}::float8 ELSE seen_changes END, ` +
    `observed_ms = CASE WHEN ${when} THEN observed_ms * ${decay} + ${interval} ELSE observed_ms END`
  );
}

/** What the freshness views need besides Postgres: the polling policy, and each source system's published rate (connectors' profiles). */
export interface FreshnessSettings {
  policy: PollingPolicy;
  publishedRate(sourceSystem: string): number | undefined;
}

export interface ResourceFreshness extends StalenessStats {
  accountId: string;
  sourceSystem: string;
  resource: string;
  targetSeconds: number;
  /** Every list of the resource verified within the target. */
  met: boolean;
}

export interface AccountFreshness {
  accountId: string;
  sourceSystem: string;
  targetSeconds: number;
  /** The scheduler's plan keeps every polled project list within the target. */
  met: boolean;
  /** Project lists the scheduler weighs, and those whose planned interval is longer than the target (the first few, and how many). */
  polledLists: number;
  missing: string[];
  missingCount: number;
  /** The source system's requests a minute (reported by the upstream, else published); null: not known. */
  requestsPerMinute: number | null;
  visitsPerMinute: number;
  /** Lists / visits a minute, and the longest a list waits (twice that), in seconds. */
  cycleSeconds: number;
  floorSeconds: number;
  /** Visits a minute that would meet the target, and the polling share (SYNC_POLLING_SHARE) that would give them (null: rate not known, or above 1). */
  visitsPerMinuteNeeded: number;
  pollingShareNeeded: number | null;
}

const missingShown = 10;

/**
 * Freshness per account and resource (staleness p50/p95/max of its lists, and whether each is within
 * the target) and per account (whether the scheduler's plan meets the target, which lists miss it, and
 * what budget would meet it).
 */
export async function freshnessOverview(
  pool: Pool,
  s: FreshnessSettings,
  filter: { accountId?: string } = {},
): Promise<{ resources: ResourceFreshness[]; accounts: AccountFreshness[] }> {
  const targetMs = s.policy.freshnessTargetMs ?? 60 * 60_000;
  const lists = await listStaleness(pool, filter);
  const byResource = new Map<string, ListStaleness[]>();
  for (const l of lists) {
    const key = `${l.accountId}\n${l.resource}`;
    byResource.set(key, [...(byResource.get(key) ?? []), l]);
  }
  const resources: ResourceFreshness[] = [...byResource.values()].map((group) => {
    const stats = stalenessStats(group.map((l) => l.stalenessSeconds));
    return {
      accountId: group[0]!.accountId,
      sourceSystem: group[0]!.sourceSystem,
      resource: group[0]!.resource,
      ...stats,
      targetSeconds: targetMs / 1000,
      met: stats.never === 0 && (stats.max ?? 0) * 1000 <= targetMs,
    };
  });
  const accounts: AccountFreshness[] = [];
  const seen = new Map<string, string>();
  for (const l of lists) seen.set(l.accountId, l.sourceSystem);
  for (const [accountId, sourceSystem] of seen) {
    const coverage = await webhookCoverage(pool, accountId);
    const published = s.publishedRate(sourceSystem);
    const { plan, visitsPerMinute, requestsPerMinute, everyPass } = await planAccountVisits(pool, {
      accountId,
      policy: s.policy,
      coverage,
      sourceSystem,
      ...(published !== undefined ? { requestsPerMinute: published } : {}),
    });
    const report = targetReport(plan, targetMs, s.policy.incrementalMs);
    const share = (s.policy.syncShare ?? 0.8) * (requestsPerMinute ?? 0);
    const neededShare = share > 0 ? (report.visitsPerMinuteNeeded + everyPass / (s.policy.incrementalMs / 60_000)) / share : null;
    accounts.push({
      accountId,
      sourceSystem,
      targetSeconds: targetMs / 1000,
      met: report.met,
      polledLists: plan.lists.length,
      missing: report.missing.slice(0, missingShown).map((k) => k.replace('\n', ' ')),
      missingCount: report.missing.length,
      requestsPerMinute,
      visitsPerMinute,
      cycleSeconds: plan.cycleMs / 1000,
      floorSeconds: plan.floorMs / 1000,
      visitsPerMinuteNeeded: report.visitsPerMinuteNeeded,
      pollingShareNeeded: neededShare !== null && neededShare <= 1 ? neededShare : null,
    });
  }
  return { resources, accounts };
}

/** Seconds; a list's staleness (the /metrics histogram's buckets). */
const stalenessBuckets: readonly number[] = [60, 300, 900, 1800, 3600, 7200, 21600, 86400];

/** The /metrics families of freshness: each list's staleness as a histogram per account and resource, and whether each account's plan meets the target. */
export async function freshnessMetrics(pool: Pool, s: FreshnessSettings): Promise<Family[]> {
  const lists = await listStaleness(pool);
  const groups = new Map<string, { labels: Record<string, string>; values: number[] }>();
  for (const l of lists) {
    if (l.stalenessSeconds === null) continue;
    const key = `${l.accountId}\n${l.resource}`;
    let g = groups.get(key);
    if (!g) groups.set(key, (g = { labels: { account: l.accountId, source_system: l.sourceSystem, resource: l.resource }, values: [] }));
    g.values.push(l.stalenessSeconds);
  }
  const histogram: Family = {
    name: 'mirror_list_staleness_seconds',
    type: 'histogram',
    help: 'Time since each list (stream) was last verified against the upstream, per account and resource.',
    samples: [],
  };
  for (const g of groups.values()) {
    for (const b of stalenessBuckets) histogram.samples.push({ labels: { ...g.labels, le: String(b) }, value: g.values.filter((v) => v <= b).length });
    histogram.samples.push({ labels: { ...g.labels, le: '+Inf' }, value: g.values.length });
    histogram.samples.push({ labels: { ...g.labels, __suffix: '_sum' }, value: g.values.reduce((a, b) => a + b, 0) });
    histogram.samples.push({ labels: { ...g.labels, __suffix: '_count' }, value: g.values.length });
  }
  const { accounts } = await freshnessOverview(pool, s);
  return [
    histogram,
    {
      name: 'mirror_freshness_target_met',
      type: 'gauge',
      help: "1 when the freshness scheduler's plan keeps every polled list of the account within SYNC_FRESHNESS_TARGET, else 0.",
      samples: accounts.map((a) => ({ labels: { account: a.accountId, source_system: a.sourceSystem }, value: a.met ? 1 : 0 })),
    },
    {
      name: 'mirror_freshness_lists_missing_target',
      type: 'gauge',
      help: 'Polled lists whose planned interval is longer than SYNC_FRESHNESS_TARGET.',
      samples: accounts.map((a) => ({ labels: { account: a.accountId, source_system: a.sourceSystem }, value: a.missingCount })),
    },
  ];
}

interface ScopesVerification {
  /** The oldest verification among the scopes (as {@link scopeLastVerifiedAt} counts each); null: none verified. */
  at: Date | null;
  /** Whether every scope was verified at least once (a scope never verified is as stale as can be). */
  complete: boolean;
}

/**
 * The verification of what one read covers: one resource in some scopes of an account, or in every
 * scope it has (`'all'`: every project's list, `Project-Id: *`), as the oldest of theirs.
 */
export async function scopesLastVerifiedAt(
  pool: Pool,
  q: { accountId: string; resource: string; scopes: readonly string[] | 'all' },
): Promise<ScopesVerification> {
  let ats: (Date | null)[];
  if (q.scopes === 'all') {
    const { rows } = await pool.query<{ scope: string; at: Date | null }>(
      `SELECT scope, last_pass_started_at AS at FROM streams WHERE account_id = $1 AND resource = $2`,
      [q.accountId, q.resource],
    );
    const across = rows.find((r) => r.scope === allProjectsScope)?.at ?? null;
    const own = rows.filter((r) => r.scope !== allProjectsScope);
    ats = own.length === 0 ? [across] : own.map((r) => (r.at && (!across || r.at > across) ? r.at : (across ?? r.at)));
  } else {
    ats = await Promise.all([...new Set(q.scopes)].map((scope) => scopeLastVerifiedAt(pool, { accountId: q.accountId, resource: q.resource, scope })));
  }
  const known = ats.filter((a): a is Date => a !== null);
  return {
    at: known.length === 0 ? null : new Date(Math.min(...known.map((a) => a.getTime()))),
    complete: ats.length > 0 && known.length === ats.length,
  };
}
