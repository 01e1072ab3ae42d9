// Statistics for a partition of records right after its first load. Without any (autovacuum has not
// analyzed it yet, or is off), the planner takes every index of the partition for a page long and
// empty, and a single-object read chose the (scope, ordinal) index over the primary key, filtering
// every record of the stream for the one it wanted: 163-220 ms at 200k records, 1.45 ms once analyzed
// (bench [2]'s note). Autovacuum gets there within a minute or so where it runs; the mirror does not
// wait for it after a partition's first pass, and leaves every later one to autovacuum.
import { inTransaction, type Pool } from '../db/pool.ts';

/** The first statistics of the partitions a process loads through one pool: each resource's asked for once. */
export class FirstLoadStatistics {
  readonly #pool: Pool;
  /** Resources whose partition was seen with statistics, or is being analyzed now. */
  readonly #settled = new Set<string>();

  constructor(pool: Pool) {
    this.#pool = pool;
  }

  /**
   * ANALYZE the partition that holds `resource`'s records if it has never been analyzed
   * (`pg_class.reltuples < 0`). Resolves once done or skipped: when another session holds the partition
   * for an ANALYZE or VACUUM of its own (lock wait over 100 ms), that one will do. At most once per
   * resource while it succeeds; never throws (statistics are an optimisation).
   */
  async analyze(accountId: string, resource: string): Promise<boolean> {
    if (this.#settled.has(resource)) return false;
    this.#settled.add(resource);
    const settled = await analyzeFirstLoad(this.#pool, accountId, resource);
    if (settled === undefined) this.#settled.delete(resource);
    return settled ?? false;
  }
}

/** Whether the partition was analyzed now (true), had statistics (false), or is to be asked again (undefined). */
async function analyzeFirstLoad(pool: Pool, accountId: string, resource: string): Promise<boolean | undefined> {
  try {
    const { rows } = await pool.query<{ name: string; never: boolean }>(
      `SELECT c.oid::regclass::text AS name, c.reltuples < 0 AS never FROM pg_class c
        WHERE c.oid = (SELECT tableoid FROM records WHERE account_id = $1 AND resource = $2 LIMIT 1)`,
      [accountId, resource],
    );
    // No record of it yet: nothing to learn from, and a later pass may load it.
    if (rows.length === 0) return undefined;
    const { name, never } = rows[0]!;
    if (!never) return false;
    // A regclass's text is the table's name as SQL wants it (quoted where it must be).
    await inTransaction(pool, (client) => client.query(`ANALYZE ${name}`), { setup: `SET LOCAL lock_timeout = '100ms'` });
    return true;
  } catch {
    // Not settled: the next pass of the resource tries again.
    return undefined;
  }
}
