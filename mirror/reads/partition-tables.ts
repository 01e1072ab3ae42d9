// The partition of `records` that holds each resource's rows (list partitions by resource; the default
// partition is not listed), as one reader of a pool knows it, read again after `partitionsTtlMs`. A list
// page names it in place of `records`: a statement on the parent is planned for each execution (its
// generic plan locks and prunes every partition at each run: 0.5 s with the real catalog's 96, where a
// custom plan costs ~0.5 ms of the page's ~1.1 ms of Postgres CPU), one on the partition is planned once
// per connection. Every statement still compares `resource`, so a partition holding several resources
// answers the same.
import type { Pool } from '../db/pool.ts';

const partitionsTtlMs = 10_000;

export class PartitionTables {
  readonly #pool: Pool;
  #known: { at: number; map: Promise<Map<string, string>> } | undefined;

  constructor(pool: Pool) {
    this.#pool = pool;
  }

  /** The table a list of `resource` reads: its own partition (quoted), else `records`. */
  async tableOf(resource: string): Promise<string> {
    const now = Date.now();
    let entry = this.#known;
    if (entry === undefined || now - entry.at > partitionsTtlMs) {
      const map = loadPartitions(this.#pool);
      const loaded = (entry = { at: now, map });
      // A failed read is not remembered: the next page asks again (and this one reads the parent).
      map.catch(() => {
        if (this.#known === loaded) this.#known = undefined;
      });
      this.#known = entry;
    }
    const name = await entry.map.then(
      (m) => m.get(resource),
      () => undefined,
    );
    return name === undefined ? 'records' : `"${name.replace(/"/g, '""')}"`;
  }
}

function loadPartitions(pool: Pool): Promise<Map<string, string>> {
  return pool
    .query<{ name: string; bound: string }>(
      `SELECT c.relname AS name, pg_get_expr(c.relpartbound, c.oid) AS bound
         FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
        WHERE i.inhparent = 'records'::regclass AND c.relnamespace = current_schema()::regnamespace`,
    )
    .then(({ rows }) => {
      const map = new Map<string, string>();
      for (const r of rows) {
        if (!r.bound.startsWith('FOR VALUES IN (')) continue;
        for (const m of r.bound.matchAll(/'((?:[^']|'')*)'/g)) map.set(m[1]!.replace(/''/g, "'"), r.name);
      }
      return map;
    });
}
