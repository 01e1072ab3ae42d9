// Freshness: when each list (stream) was last verified against the upstream, and how stale the lists
// of an account and resource are. A list is verified by a completed pass of it (as of the pass's start:
// a change made upstream after that may not be in it). A list across projects verifies each project's
// list (its pass writes theirs, mirror/records/finish-pass.ts coverProjects); a parent's children are verified with
// their parent (children change only with it: an incremental pass lists them under a changed parent).
import { allProjectsScope, parseScope, formatScope } from '../../lib/resources.ts';
import type { Pool } from '../db/pool.ts';
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

export interface StalenessStats {
  lists: number;
  /** Seconds since last verified, over the lists; null when none was ever verified. */
  p50: number | null;
  p95: number | null;
  max: number | null;
  /** Lists never verified (no pass completed). */
  never: number;
}

/** Nearest-rank percentile of sorted values. */
export function percentile(sorted: readonly number[], p: number): number | null {
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

export interface ListStaleness {
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
