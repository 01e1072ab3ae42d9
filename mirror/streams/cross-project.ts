// Which source systems' lists of a project-scoped resource accept `Project-Id: *` (one list of every
// project's records), as learned from the upstream: a refusal is remembered, so later passes list
// such a resource per project without asking again (until the row is deleted).
import type { Pool } from '../db/pool.ts';

/** What is known per resource of a source system: accepted (true), refused (false); absent: not asked yet. */
export async function crossProjectSupport(pool: Pool, sourceSystem: string): Promise<Map<string, boolean>> {
  const { rows } = await pool.query<{ resource: string; accepted: boolean }>('SELECT resource, accepted FROM cross_project_lists WHERE source_system = $1', [
    sourceSystem,
  ]);
  return new Map(rows.map((r) => [r.resource, r.accepted]));
}

/** Remembers the upstream's answer for a (source system, resource) pair; a later answer replaces it. */
export async function rememberCrossProject(pool: Pool, sourceSystem: string, resource: string, accepted: boolean, reason?: string): Promise<void> {
  await pool.query(
    `INSERT INTO cross_project_lists (source_system, resource, accepted, reason, learned_at) VALUES ($1, $2, $3, $4, now())
     ON CONFLICT (source_system, resource) DO UPDATE SET accepted = EXCLUDED.accepted, reason = EXCLUDED.reason, learned_at = now()`,
    [sourceSystem, resource, accepted, reason?.slice(0, 2000) ?? null],
  );
}
