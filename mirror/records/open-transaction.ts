// A record write's transaction left open between its two phases (a page is staged, then committed
// with its checkpoint), and the session settings record writes run under.
import { inTransaction, type Pool, type PoolClient, type Transaction, type TransactionOptions } from '../db/pool.ts';

const genericPlanSetup = 'SET LOCAL plan_cache_mode = force_generic_plan';

/**
 * Page writes of a pass commit without waiting for the WAL flush: a page and its checkpoint are one
 * transaction, so a Postgres crash can only lose both (the pass then fetches the page again), never
 * one without the other. Saves a flush per page; set with BEGIN, in its round trip (with the generic
 * plan of `genericPlan`).
 */
export const relaxedCommit: Readonly<TransactionOptions> = { setup: `SET LOCAL synchronous_commit = off; ${genericPlanSetup}` };

/**
 * A write's plan does not depend on its values, but Postgres plans a statement afresh for its first
 * executions (and an unnamed one every time) with the values as constants: it then folds the 1 MB
 * page into the plan and copies it about. That was 9% of Postgres's CPU in a full pass. The named
 * statement (`statement`) under a generic plan is planned once per connection. Page writes of a
 * pass set this with `relaxedCommit`.
 */
export const genericPlan: Readonly<TransactionOptions> = { setup: genericPlanSetup };

/** A transaction `work` began and left open, for `end` (then COMMIT, unless it committed) or `abandon` (ROLLBACK). */
export interface OpenTransaction<T> {
  value: T;
  end(fn: (client: PoolClient, tx: Transaction) => Promise<void>): Promise<void>;
  abandon(): Promise<void>;
}

class Abandoned extends Error {}

/**
 * Runs `work` in a transaction (`inTransaction`: its rollback on any error, its care of a lost
 * connection) and hands back what it returned with the transaction still open: the connection stays
 * checked out until `end` or `abandon`. Fails as `work` fails, the transaction rolled back.
 */
export function openTransaction<T>(pool: Pool, options: TransactionOptions, work: (client: PoolClient) => Promise<T>): Promise<OpenTransaction<T>> {
  return new Promise((resolve, reject) => {
    let decide!: (fn: ((client: PoolClient, tx: Transaction) => Promise<void>) | undefined) => void;
    const decided = new Promise<((client: PoolClient, tx: Transaction) => Promise<void>) | undefined>((r) => (decide = r));
    let opened = false;
    const done: Promise<void> = inTransaction(
      pool,
      async (client, tx) => {
        const value = await work(client);
        opened = true;
        resolve({
          value,
          end: (fn) => {
            decide(fn);
            return done;
          },
          abandon: () => {
            decide(undefined);
            return done.catch((error: unknown) => {
              if (!(error instanceof Abandoned)) throw error;
            });
          },
        });
        const fn = await decided;
        if (!fn) throw new Abandoned();
        await fn(client, tx);
      },
      options,
    );
    done.catch((error: unknown) => {
      if (!opened) reject(error instanceof Error ? error : new Error(String(error)));
    });
  });
}
