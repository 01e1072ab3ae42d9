// The only code that writes mirrored records. A page of a pass goes in two phases: `stagePage`
// writes its records (and its row of stream_pages) in a transaction it leaves open, and the staged
// page's `commit` saves the checkpoint that holds once it is committed and commits, in one round trip.
// A pass that writes several pages at once commits them in order: it stages a page, waits for the
// one before it, and commits (activities/page-writer.ts); nothing here waits on the pass.
// How the records travel (the bytes the upstream sent, split from their source data, or objects) is
// mirror/records/page-encoding.ts's, with the SQL that reads each layout.
// Unchanged records (same content hash) are not rewritten; counts come out of the write itself.
// A full pass records each committed page (its ids and the digest of its body) in stream_pages: the
// seen-set for marking absentees deleted, and what lets the next pass keep a byte-identical page
// without parsing or writing it (`stageKeptPage`).
import { MirrorError } from '../../lib/errors.ts';
import type { PageRecords } from '../../lib/list-page.ts';
import { allProjectsScope, resourceDef } from '../../lib/resources.ts';
import { encodeBody, encodeObjects, isBodyRefusal, parseBody, rowSources, type EncodedRows, type RowsKind } from './page-encoding.ts';
import { inTransaction, type Pool, type PoolClient, type Transaction, type TransactionOptions } from '../db/pool.ts';
import { analyzeFirstLoad } from '../streams/first-load-statistics.ts';
import { computePositions, invalidatePositions } from '../reads/record-positions.ts';
import { recordScopeSql, saveCheckpointAndCommit, StalePassError, type Checkpoint, type StreamKey } from '../streams/streams.ts';

export interface WriteCounts {
  inserted: number;
  updated: number;
  unchanged: number;
}

export interface SeenPage {
  page: number;
  perPage: number;
  /** Digest (SHA-256) of the page's body as received (null: never to be reused). */
  digest: string | null;
  hasMore: boolean | null;
}

/** A page to write: its records (lib/list-page.ts), where they go, and what the write records of it. */
export interface PageStage {
  key: StreamKey;
  pass: { streamId: number; generation: number };
  records: PageRecords;
  /** Ordinal of the first item: keeps the upstream's order. */
  ordinalBase: number;
  /**
   * The page of a full pass this is: its ids go into stream_pages, so the pass can mark absentees
   * afterwards, and its digest lets the next pass recognise it unchanged.
   */
  seen?: SeenPage;
  /** Keep an existing record's place in the upstream order (single-object writes from events). */
  keepOrdinal?: boolean;
  /**
   * The page's records are likely all new (a pass that began on a stream without a record): they
   * are then inserted without `ON CONFLICT`, which costs Postgres 3.5 ms less per 1000 records. A
   * record that is there after all (pages that overlap, an event during the pass, a record deleted
   * earlier) rolls that attempt back, the page is upserted, and the staged page says so (`conflicted`).
   */
  insertOnly?: boolean;
  /** What the page is, for errors ("customers page 3"). */
  what?: string;
}

/** A page whose records are written in a transaction still open: commit it, or abandon it. */
export interface StagedPage {
  readonly counts: WriteCounts;
  /** Records the page holds (what the stream's record count grows by). */
  readonly records: number;
  /** A record of an `insertOnly` page was there after all: it was upserted. */
  readonly conflicted: boolean;
  /**
   * Saves `checkpoint` (the one that holds once this page is committed, its counts included) and
   * commits, in one round trip; fails, rolling the page back, if the pass was replaced meanwhile.
   */
  commit(checkpoint: Checkpoint): Promise<void>;
  /** Rolls the page back (a page before it failed). */
  abandon(): Promise<void>;
}

/** A page written at once: outside a pass, or (with `checkpoint`) a pass's page committed as it is staged. */
export interface PageWrite extends PageStage {
  /**
   * The checkpoint of the pages before this one: saved, with this page's counts added, as the page
   * commits. Omitted for writes outside a pass.
   */
  checkpoint?: Checkpoint;
}

/** Fields whose values change on every fetch (signed URLs) and so must not count as a change. */
function volatileFields(resource: string): string[] {
  return [...(resourceDef(resource)?.urlFields ?? [])];
}

/**
 * The content hash of a record: two 64-bit hashes of the parsed jsonb, of the object without its
 * volatile fields and of its source data. Computed from the parsed values, so no text is made:
 * md5 of their text cost Postgres a fifth of a page's write.
 */
const contentHash = `(lpad(to_hex(jsonb_hash_extended(data - $6::text[], 0)), 16, '0')
          || lpad(to_hex(jsonb_hash_extended(coalesce(source_data, 'null'::jsonb), 0)), 16, '0'))::uuid`;

/** A page row written again (a retried page, a kept one) replaces the one there. */
const seenPageReplaces = `
  ON CONFLICT (stream_id, generation, page) DO UPDATE
     SET per_page = EXCLUDED.per_page, digest = EXCLUDED.digest, ids = EXCLUDED.ids, has_more = EXCLUDED.has_more, written_at = EXCLUDED.written_at`;

/** A full pass's page row (the seen-set of the pass, and what the next pass compares the page with). */
const seenPageSql = (p: (n: number) => string) => `
  INSERT INTO stream_pages (stream_id, generation, page, per_page, digest, ids, has_more, written_at)
  VALUES (${p(0)}, ${p(1)}, ${p(2)}, ${p(3)}, ${p(4)}, ${p(5)}, ${p(6)}, now())${seenPageReplaces}`;

// $1 account, $2 resource, $3 scope, $4 generation, $5 ordinal base, $6 volatile fields, $7 keep
// ordinals (only an upsert has $7); then, with `seen`, the page row's 7 values; last the rows. (The
// rows, up to megabytes, go last: the driver copies the parameters into a buffer it grows as it goes,
// and one that is big early on is copied again at every growth after it.)
const fixedParams = (upsert: boolean) => (upsert ? 7 : 6);
// A page of a list across projects (stream scope `project=*`): each record goes to its own project's
// scope, `project=<project_id>` (null without a project_id: the write fails, see `Staging.once`).
const writeSql = (rows: (param: string) => string, upsert: boolean, seen: boolean, perProject = false) => `
WITH input AS (${rows(`$${fixedParams(upsert) + (seen ? 7 : 0) + 1}`)}
), up AS (
  INSERT INTO records AS r (account_id, resource, scope, id, source_id, data, source_data, hash,
                            source_create_time, source_update_time, generation, ordinal)
  SELECT $1, $2, ${perProject ? `replace($3::text, '*', data->>'project_id')` : '$3'}, id, source_id, data, source_data, ${contentHash}, sct, sut, $4, ordinal
    FROM input${
      upsert
        ? `
  ON CONFLICT (account_id, resource, scope, id) DO UPDATE
     SET source_id = EXCLUDED.source_id, data = EXCLUDED.data, source_data = EXCLUDED.source_data,
         hash = EXCLUDED.hash, source_create_time = EXCLUDED.source_create_time,
         source_update_time = EXCLUDED.source_update_time, deleted_at = NULL,
         -- Only a change of content is a change (the changes feed and outbound webhooks follow
         -- mirrored_at); a record that only moved in the upstream order keeps it.
         mirrored_at = CASE WHEN r.hash IS DISTINCT FROM EXCLUDED.hash OR r.deleted_at IS NOT NULL THEN now() ELSE r.mirrored_at END,
         generation = EXCLUDED.generation, ordinal = CASE WHEN $7::boolean THEN r.ordinal ELSE EXCLUDED.ordinal END
   WHERE (r.hash IS DISTINCT FROM EXCLUDED.hash OR r.deleted_at IS NOT NULL
          -- A pass puts records back in the upstream's order (events insert new ones at the end).
          OR (NOT $7::boolean AND r.ordinal IS DISTINCT FROM EXCLUDED.ordinal))
     -- An older fetch never overwrites a newer state (events and passes race).
     AND (r.source_update_time IS NULL OR EXCLUDED.source_update_time IS NULL OR EXCLUDED.source_update_time >= r.source_update_time)`
        : ''
    }
  RETURNING (r.first_seen_at = now()) AS inserted, (r.mirrored_at = now()) AS changed
)${seen ? `, seen AS (${seenPageSql((i) => `$${fixedParams(upsert) + 1 + i}`)}\n)` : ''}
SELECT count(*) FILTER (WHERE inserted)::int AS inserted, count(*) FILTER (WHERE changed AND NOT inserted)::int AS updated,
       count(*)::int AS written FROM up`;
const statements = new Map<string, { name: string; text: string }>();
/**
 * The write's statement: of objects or of a body; an upsert or an insert; with the page's row or not.
 * Named, so each connection parses it once (see `genericPlan`).
 */
function statement(kind: RowsKind, upsert: boolean, seen: boolean, perProject = false): { name: string; text: string } {
  const name = `mirror-write:${kind}:${upsert}:${seen}${perProject ? ':per-project' : ''}`;
  let sql = statements.get(name);
  if (!sql) statements.set(name, (sql = { name, text: writeSql(rowSources[kind], upsert, seen, perProject) }));
  return sql;
}
const notNullViolation = '23502';

/** A list across projects (`Project-Id: *`) whose records do not say which project they belong to. */
export class CrossProjectScopeError extends MirrorError {
  override readonly statusCode = 422;
  override readonly code = 'cross_project_refused';
}
const uniqueViolation = '23505';

/**
 * The key of a record of a list across projects, as its page's ids and the pass's seen-set hold it:
 * ids are unique only within a project, so its project's scope goes with it. A record without a
 * project_id cannot be placed: the write fails.
 */
export function crossProjectKey(item: Record<string, unknown>, resource: string): string {
  const project = item.project_id;
  if (typeof project !== 'string' || project === '') {
    throw new CrossProjectScopeError(
      `A record of the ${resource} list across projects (Project-Id: *) has no project_id (record ${String(item.id)}): the mirror cannot tell which project it belongs to`,
    );
  }
  return `project=${project}|${String(item.id)}`;
}

/** Records the page a full pass committed (a retried page replaces its row). */
async function recordSeenPage(
  client: Pick<PoolClient, 'query'>,
  pass: { streamId: number; generation: number },
  seen: SeenPage,
  ids: readonly string[],
): Promise<void> {
  await client.query(
    seenPageSql((i) => `$${i + 1}`),
    seenPageValues(pass, seen, ids),
  );
}

function seenPageValues(pass: { streamId: number; generation: number }, seen: SeenPage, ids: readonly string[]): unknown[] {
  return [pass.streamId, pass.generation, seen.page, seen.perPage, seen.digest, ids, seen.hasMore];
}

/** The checkpoint that follows a page: the pages before it (`base`) and this page's counts. */
function checkpointAfter(base: Checkpoint, counts: WriteCounts): Checkpoint {
  const c = base.counts;
  return {
    ...base,
    counts: { inserted: c.inserted + counts.inserted, updated: c.updated + counts.updated, unchanged: c.unchanged + counts.unchanged, deleted: c.deleted },
  };
}

const genericPlanSetup = 'SET LOCAL plan_cache_mode = force_generic_plan';

/**
 * Page writes of a pass commit without waiting for the WAL flush: a page and its checkpoint are one
 * transaction, so a Postgres crash can only lose both (the pass then fetches the page again), never
 * one without the other. Saves a flush per page; set with BEGIN, in its round trip (with the generic
 * plan of `genericPlan`).
 */
const relaxedCommit: TransactionOptions = { setup: `SET LOCAL synchronous_commit = off; ${genericPlanSetup}` };

/**
 * A write's plan does not depend on its values, but Postgres plans a statement afresh for its first
 * executions (and an unnamed one every time) with the values as constants: it then folds the 1 MB
 * page into the plan and copies it about. That was 9% of Postgres's CPU in a full pass. The named
 * statement (`statement`) under a generic plan is planned once per connection. Page writes of a
 * pass set this with `relaxedCommit`.
 */
const genericPlan: TransactionOptions = { setup: genericPlanSetup };

/** A transaction `work` began and left open, for `end` (then COMMIT, unless it committed) or `abandon` (ROLLBACK). */
interface OpenTransaction<T> {
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
function openTransaction<T>(pool: Pool, options: TransactionOptions, work: (client: PoolClient) => Promise<T>): Promise<OpenTransaction<T>> {
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

/**
 * Stages a page of a pass: writes its records and its row of stream_pages in a transaction left
 * open for the staged page's `commit` (or `abandon`). A list body goes as its bytes (split from its
 * source data where the scan found it); a body Postgres refuses, or one with repeated ids, goes as
 * the objects parsed from it.
 */
export async function stagePage(pool: Pool, stage: PageStage): Promise<StagedPage> {
  const write = new Staging(pool, stage, relaxedCommit);
  const opened = await write.run();
  return {
    counts: opened.value.counts,
    records: opened.value.records,
    conflicted: write.conflicted,
    commit: (checkpoint) =>
      opened.end(async (client, tx) => {
        // After the page before this one committed (the caller commits pages in order), so no page
        // holds what the page before it waits for (the position sets' row locks, see record-positions.ts).
        await opened.value.invalidate?.(client);
        await saveCheckpointAndCommit(client, tx, stage.pass, checkpoint, { pages: 1, records: opened.value.records });
      }),
    abandon: () => opened.abandon(),
  };
}

/**
 * Writes a page at once: with `checkpoint`, as a pass's page (staged and committed with the
 * checkpoint that follows it); without, outside any pass (the stream is noted as touched).
 */
export async function writePage(pool: Pool, write: PageWrite): Promise<WriteCounts> {
  const { checkpoint } = write;
  if (checkpoint) {
    const staged = await stagePage(pool, write);
    await staged.commit(checkpointAfter(checkpoint, staged.counts));
    return staged.counts;
  }
  const opened = await new Staging(pool, write, genericPlan).run();
  await opened.end(async (client) => {
    // Position sets before the stream's row, in every writer and in finishPass: one lock order.
    await opened.value.invalidate?.(client);
    const { counts } = opened.value;
    if (counts.inserted + counts.updated > 0) await touchStream(client, write.key);
  });
  return opened.value.counts;
}

/** What a staged write left for its commit. */
interface Staged {
  counts: WriteCounts;
  records: number;
  /** Marks the positions of the scopes it wrote out of date, where it inserted or rewrote a record. */
  invalidate?: (client: PoolClient) => Promise<void>;
}

/** One page's write, through its fallbacks (an insert that meets a record, a body Postgres refuses). */
class Staging {
  private insertOnly: boolean;
  /** An insert met a record that was there: the write went on as an upsert. */
  conflicted = false;

  constructor(
    private readonly pool: Pool,
    private readonly stage: PageStage,
    private readonly options: TransactionOptions,
  ) {
    this.insertOnly = stage.insertOnly ?? false;
  }

  private get what(): string {
    return this.stage.what ?? `${this.stage.key.resource} page`;
  }

  async run(): Promise<OpenTransaction<Staged>> {
    const { records, key } = this.stage;
    if (key.scope === allProjectsScope) {
      // A list across projects: its objects, keyed by project and id (ids repeat across projects).
      const items = 'bytes' in records ? parseBody(records.bytes, this.what) : records.items;
      const rows = encodeObjects(items, (item) => crossProjectKey(item, key.resource));
      const scopes = [...new Set(items.map((item) => allProjectsScope.replace('*', String(item.project_id))))];
      return this.rows(rows, scopes);
    }
    if ('bytes' in records) {
      // Repeated ids need the last-copy-wins of the objects' path (one statement cannot upsert a key twice).
      if (new Set(records.ids).size === records.ids.length) {
        const rows = encodeBody(records);
        try {
          return await this.rows(rows);
        } catch (error) {
          if (!isBodyRefusal(error)) throw error;
        } finally {
          // The driver read the buffer before the write's answer: it serves the next page.
          rows.release?.();
        }
      }
      return this.rows(encodeObjects(parseBody(records.bytes, this.what)));
    }
    return this.rows(encodeObjects(records.items));
  }

  /** The write: inserted where the records are likely all new (and upserted where that fails), else upserted. */
  private async rows(rows: EncodedRows, scopes?: readonly string[]): Promise<OpenTransaction<Staged>> {
    if (this.insertOnly) {
      try {
        return await this.once(rows, false, scopes);
      } catch (error) {
        if ((error as { code?: string }).code !== uniqueViolation) throw error;
        this.insertOnly = false;
        this.conflicted = true;
      }
    }
    return this.once(rows, true, scopes);
  }

  /**
   * The write itself: the records with the page's seen ids, in a transaction left open (BEGIN; the
   * records with the page's row; then the commit's round trip, the checkpoint with COMMIT).
   */
  private once(rows: EncodedRows, upsert: boolean, scopes: readonly string[] | undefined): Promise<OpenTransaction<Staged>> {
    const write = this.stage;
    const count = rows.ids.length;
    return openTransaction(this.pool, this.options, async (client) => {
      const counts: WriteCounts = { inserted: 0, updated: 0, unchanged: 0 };
      // Records inserted or rewritten (content, liveness or place in the order): the stream's positions no longer hold.
      let written = 0;
      if (count > 0) {
        const params: unknown[] = [
          write.key.accountId,
          write.key.resource,
          write.key.scope,
          write.pass.generation,
          write.ordinalBase,
          volatileFields(write.key.resource),
        ];
        if (upsert) params.push(write.keepOrdinal ?? false);
        if (write.seen) params.push(...seenPageValues(write.pass, write.seen, rows.ids));
        params.push(rows.param);
        const perProject = write.key.scope === allProjectsScope;
        const { rows: result } = await client
          .query<{ inserted: number; updated: number; written: number }>({ ...statement(rows.kind, upsert, Boolean(write.seen), perProject), values: params })
          .catch((error: unknown) => {
            if (perProject && (error as { code?: string }).code === notNullViolation) {
              throw new CrossProjectScopeError(
                `A record of the ${write.key.resource} list across projects (Project-Id: *) has no project_id: the mirror cannot tell which project it belongs to`,
                { cause: error },
              );
            }
            throw error;
          });
        counts.inserted = result[0]!.inserted;
        counts.updated = result[0]!.updated;
        counts.unchanged = count - counts.inserted - counts.updated;
        written = result[0]!.written;
      } else if (write.seen) {
        await recordSeenPage(client, write.pass, write.seen, rows.ids);
      }
      const invalidate =
        written > 0
          ? (client: PoolClient) =>
              invalidatePositions(
                client,
                write.key.accountId,
                (scopes ?? [write.key.scope]).map((scope) => ({ resource: write.key.resource, scope })),
              )
          : undefined;
      return { counts, records: count, ...(invalidate && { invalidate }) };
    });
  }
}

/**
 * Completes a pass. A full pass marks every live record it did not see as deleted: safe only here,
 * after every page of the pass was committed. Returns how many were marked.
 */
export async function finishPass(pool: Pool, key: StreamKey, pass: { streamId: number; generation: number }, checkpoint: Checkpoint): Promise<number> {
  const deleted = await finishPassInTransaction(pool, key, pass, checkpoint);
  // The partition's first statistics, if it has none yet (first-load-statistics.ts): not waited for,
  // the pass is done. Only a pass that inserted records can be a first load (a pass of an empty or
  // unchanged list asks nothing).
  if (checkpoint.counts.inserted > 0) void analyzeFirstLoad(pool, key.accountId, key.resource);
  return deleted;
}

function finishPassInTransaction(pool: Pool, key: StreamKey, pass: { streamId: number; generation: number }, checkpoint: Checkpoint): Promise<number> {
  return inTransaction(pool, async (client) => {
    let deleted = 0;
    if (checkpoint.mode === 'full' && !checkpoint.startedEmpty) {
      // A hash anti-join, whatever the statistics say: right after a first load (before autovacuum
      // has analyzed either table) the planner takes both sides for tiny and picks a nested loop
      // that is quadratic in the stream's size (minutes at 50k records).
      await client.query('SET LOCAL enable_nestloop = off');
      // Records written since the pass began (by events) are the upstream's too, seen or not.
      // A list across projects saw its records by project and id (`crossProjectKey`).
      const seenKey = key.scope === allProjectsScope ? `r.scope || '|' || r.id` : 'r.id';
      const res = await client.query<{ scope: string; n: number }>(
        `WITH seen AS MATERIALIZED (
           SELECT DISTINCT unnest(ids) AS id FROM stream_pages WHERE stream_id = $4 AND generation = $5
         ), marked AS (
         UPDATE records r SET deleted_at = now(), mirrored_at = now()
          WHERE r.account_id = $1 AND r.resource = $2 AND ${recordScopeSql(key.scope, 'r.scope', '$3')} AND r.deleted_at IS NULL
            AND r.mirrored_at < (SELECT pass_started_at FROM streams WHERE id = $4)
            AND NOT EXISTS (SELECT 1 FROM seen s WHERE s.id = ${seenKey})
         RETURNING r.scope
         )
         SELECT scope, count(*)::int AS n FROM marked GROUP BY scope`,
        [key.accountId, key.resource, key.scope, pass.streamId, pass.generation],
      );
      deleted = res.rows.reduce((sum, r) => sum + r.n, 0);
      // The scopes it marked records of have positions no more (this stream's own are computed below).
      await invalidatePositions(
        client,
        key.accountId,
        res.rows.map((r) => ({ resource: key.resource, scope: r.scope })),
      );
    }
    // The stream's dense positions, for pages at any offset (record-positions.ts): computed here, where
    // its records are as complete as a pass leaves them, before the stream's row is locked (below) so
    // the computation (~1 s at 200k records on a loaded machine) does not hold it. A list across
    // projects keeps OFFSET reads; its projects' positions are computed by their own passes.
    if (key.scope !== allProjectsScope) await computePositions(client, key);
    if (checkpoint.mode === 'full') {
      // This pass's pages are the next pass's reference; older passes' are not needed any more.
      await client.query('DELETE FROM stream_pages WHERE stream_id = $1 AND generation < $2', [pass.streamId, pass.generation]);
    }
    const c = checkpoint.counts;
    const done: Checkpoint = { ...checkpoint, done: true, counts: { ...c, deleted } };
    const { rowCount } = await client.query(
      `UPDATE streams SET state = 'synced', checkpoint = $3, last_fresh_at = now(), last_pass_started_at = pass_started_at,
              last_error = NULL, updated_at = now()
        WHERE id = $1 AND generation = $2 AND checkpoint->>'passKey' = $4`,
      [pass.streamId, pass.generation, JSON.stringify(done), checkpoint.passKey],
    );
    if (rowCount !== 1) throw StalePassError.of(pass.streamId);
    if (key.scope === allProjectsScope) await coverProjects(client, key, pass.streamId);
    await client.query(
      `UPDATE sync_runs SET status = 'succeeded', finished_at = now(), pages = (SELECT pages FROM streams WHERE id = $1),
              inserted = $3, updated = $4, unchanged = $5, deleted = $6
        WHERE stream_id = $1 AND generation = $2`,
      [pass.streamId, pass.generation, c.inserted, c.updated, c.unchanged, deleted],
    );
    return deleted;
  });
}

/**
 * A pass across projects is each live project's pass too: their streams (per project, as reads and
 * the status page know them) are as fresh as it, and as far along for their next incremental pass.
 * Their stored pages are marked touched, so a later per-project pass checks them record by record
 * (this pass rewrote their records without them).
 */
async function coverProjects(client: Pick<PoolClient, 'query'>, key: StreamKey, streamId: number): Promise<void> {
  await client.query(
    `INSERT INTO streams (account_id, resource, scope, state, last_fresh_at, last_pass_started_at, touched_at, updated_at)
     SELECT $1, $2, 'project=' || p.id, 'synced', now(), s.pass_started_at, now(), now()
       FROM records p, streams s
      WHERE p.account_id = $1 AND p.resource = 'projects' AND p.scope = '' AND p.deleted_at IS NULL AND s.id = $3
     ON CONFLICT (account_id, resource, scope) DO UPDATE
        SET state = 'synced', last_fresh_at = now(), last_pass_started_at = EXCLUDED.last_pass_started_at, last_error = NULL,
            touched_at = now(), updated_at = now()
      WHERE streams.state <> 'syncing'`,
    [key.accountId, key.resource, streamId],
  );
}

/**
 * After a complete full pass of an account's projects (the one of pass `passKey`): every record in the
 * scope of a project that pass did not find (`project=<id>`, and its children's `project=<id>/...`)
 * is marked deleted, as a full pass marks its own absentees. Nothing when that pass did not complete.
 * Returns how many were marked.
 */
export async function retireRemovedProjects(pool: Pool, accountId: string, passKey: string): Promise<number> {
  return inTransaction(pool, async (client) => {
    const { rows } = await client.query<{ started: Date }>(
      `SELECT pass_started_at AS started FROM streams
        WHERE account_id = $1 AND resource = 'projects' AND scope = '' AND mode = 'full' AND state = 'synced'
          AND checkpoint->>'passKey' = $2 AND (checkpoint->>'done')::boolean AND pass_started_at IS NOT NULL`,
      [accountId, passKey],
    );
    if (!rows[0]) return 0;
    // Records written since the projects' pass began (an event of a project created meanwhile) stay.
    const res = await client.query<{ resource: string; scope: string; n: number }>(
      `WITH marked AS (
         UPDATE records r SET deleted_at = now(), mirrored_at = now()
          WHERE r.account_id = $1 AND r.resource <> 'projects' AND r.scope LIKE 'project=%' AND r.deleted_at IS NULL
            AND r.mirrored_at < $2
            AND NOT EXISTS (SELECT 1 FROM records p WHERE p.account_id = $1 AND p.resource = 'projects' AND p.scope = ''
                               AND p.deleted_at IS NULL AND p.id = split_part(substr(r.scope, 9), '/', 1))
         RETURNING r.resource, r.scope
       )
       SELECT resource, scope, count(*)::int AS n FROM marked GROUP BY resource, scope`,
      [accountId, rows[0].started],
    );
    await invalidatePositions(client, accountId, res.rows);
    return res.rows.reduce((sum, r) => sum + r.n, 0);
  });
}

/**
 * Notes that records of the stream changed outside a pass, in the writing transaction: a page an
 * earlier pass committed before this is then checked record by record before it is kept.
 */
async function touchStream(client: Pick<PoolClient, 'query'>, key: StreamKey): Promise<void> {
  await client.query(`UPDATE streams SET touched_at = now() WHERE account_id = $1 AND resource = $2 AND scope = $3`, [key.accountId, key.resource, key.scope]);
}

/** Marks records deleted by id (a DELETE event, or a parent that disappeared). */
export async function markDeleted(pool: Pool, key: StreamKey, ids: readonly string[]): Promise<number> {
  return inTransaction(pool, async (client) => {
    const res = await client.query(
      `UPDATE records SET deleted_at = now(), mirrored_at = now()
        WHERE account_id = $1 AND resource = $2 AND scope = $3 AND id = ANY($4::text[]) AND deleted_at IS NULL`,
      [key.accountId, key.resource, key.scope, ids],
    );
    if ((res.rowCount ?? 0) > 0) {
      await invalidatePositions(client, key.accountId, [key]);
      await touchStream(client, key);
    }
    return res.rowCount ?? 0;
  });
}

/**
 * A record the upstream just deleted at the mirror's request (the answer to a DELETE through it),
 * soft-deleted as a pass's delete detection would mark it, with the records listed under it
 * (`childScope`, of the `children` resources: an AP invoice's line items), which the upstream no
 * longer serves either. One transaction; the streams it changed are noted as touched. Returns how
 * many were marked.
 */
export async function markDeletedWithChildren(
  pool: Pool,
  key: StreamKey,
  id: string,
  children: { resources: readonly string[]; scope: string },
): Promise<number> {
  return inTransaction(pool, async (client) => {
    const res = await client.query<{ resource: string; scope: string; n: number }>(
      `WITH marked AS (
         UPDATE records SET deleted_at = now(), mirrored_at = now()
          WHERE account_id = $1 AND deleted_at IS NULL
            AND ((resource = $2 AND scope = $3 AND id = $4) OR (resource = ANY($5::text[]) AND scope = $6))
         RETURNING resource, scope
       )
       SELECT resource, scope, count(*)::int AS n FROM marked GROUP BY resource, scope`,
      [key.accountId, key.resource, key.scope, id, children.resources, children.scope],
    );
    const marked = res.rows.reduce((sum, r) => sum + r.n, 0);
    if (marked > 0) {
      await invalidatePositions(client, key.accountId, res.rows);
      await client.query(
        `UPDATE streams SET touched_at = now()
          WHERE account_id = $1 AND ((resource = $2 AND scope = $3) OR (resource = ANY($4::text[]) AND scope = $5))`,
        [key.accountId, key.resource, key.scope, children.resources, children.scope],
      );
    }
    return marked;
  });
}

/**
 * Writes objects the upstream just returned outside any pass (a webhook's object, the answer to a
 * write): an existing record keeps its place in the upstream order, a new one goes after every
 * known one, as the upstream appends it.
 */
export async function applyObjects(pool: Pool, key: StreamKey, items: readonly Record<string, unknown>[]): Promise<WriteCounts> {
  if (items.length === 0) return { inserted: 0, updated: 0, unchanged: 0 };
  const { rows } = await pool.query<{ n: number | null }>(`SELECT max(ordinal) + 1 AS n FROM records WHERE account_id = $1 AND resource = $2 AND scope = $3`, [
    key.accountId,
    key.resource,
    key.scope,
  ]);
  return writePage(pool, { key, pass: { streamId: 0, generation: 0 }, records: { items }, ordinalBase: rows[0]?.n ?? 0, keepOrdinal: true });
}

/**
 * Keeps fresh storage URLs a record was read again for. URL fields are not content (they are left
 * out of the hash), so this is no change: `mirrored_at` and the changes feed stay as they are.
 */
export async function refreshUrlFields(pool: Pool, key: StreamKey, id: string, object: Record<string, unknown>): Promise<void> {
  const urls = Object.fromEntries(
    volatileFields(key.resource)
      .filter((f) => typeof object[f] === 'string')
      .map((f) => [f, object[f]]),
  );
  if (Object.keys(urls).length === 0) return;
  await pool.query(`UPDATE records SET data = data || $5::jsonb WHERE account_id = $1 AND resource = $2 AND scope = $3 AND id = $4`, [
    key.accountId,
    key.resource,
    key.scope,
    id,
    JSON.stringify(urls),
  ]);
}

/** A page an earlier pass of the stream committed, as stream_pages holds it. */
export interface KnownPage {
  /** The pass (generation) that committed it. */
  generation: number;
  page: number;
  perPage: number;
  digest: string;
  ids: string[];
  hasMore: boolean | null;
  writtenAt: Date;
}

/**
 * The latest page rows of earlier passes of a stream, for pages `from` to `to`: what each looked like
 * when last committed. Only rows with a digest (rows a pass could reuse).
 */
export async function knownPages(
  pool: Pool,
  pass: { streamId: number; generation: number },
  range: { from: number; to: number },
): Promise<Map<number, KnownPage>> {
  const { rows } = await pool.query<{
    generation: number;
    page: number;
    per_page: number;
    digest: string;
    ids: string[];
    has_more: boolean | null;
    written_at: Date;
  }>(
    `SELECT DISTINCT ON (page) generation, page, per_page, digest, ids, has_more, written_at FROM stream_pages
      WHERE stream_id = $1 AND generation < $2 AND page BETWEEN $3 AND $4 AND digest IS NOT NULL
      ORDER BY page, generation DESC`,
    [pass.streamId, pass.generation, range.from, range.to],
  );
  return new Map(
    rows.map((r) => [
      r.page,
      { generation: r.generation, page: r.page, perPage: r.per_page, digest: r.digest, ids: r.ids, hasMore: r.has_more, writtenAt: r.written_at },
    ]),
  );
}

/**
 * Stages a page whose body is byte for byte the one an earlier pass committed (`known`), without
 * writing its records: only if every one of them is still in the mirror, live, and unchanged since
 * (nothing moved `mirrored_at` past the time the page was written: no event, no deletion). Then the
 * mirror already holds exactly what writing the page would leave. Null when that does not hold (the
 * caller writes the page the ordinary way); else a staged page to commit as `stagePage`'s.
 */
export async function stageKeptPage(
  pool: Pool,
  input: { key: StreamKey; pass: { streamId: number; generation: number }; known: KnownPage },
): Promise<StagedPage | null> {
  const distinct = [...new Set(input.known.ids)];
  const opened = await openTransaction(pool, relaxedCommit, async (client) => {
    // Times are compared in SQL: written_at and mirrored_at have microseconds, a JS Date has not.
    // Nothing changed outside a pass since the page was written: its records are as it left them
    // (a pass changes a record only through a page that holds it). Else each record is looked at.
    const { rows } = await client.query<{ quiet: boolean }>(
      `SELECT (s.touched_at IS NULL OR s.touched_at <= p.written_at) AS quiet
         FROM streams s JOIN stream_pages p ON p.stream_id = s.id AND p.generation = $2 AND p.page = $3
        WHERE s.id = $1`,
      [input.pass.streamId, input.known.generation, input.known.page],
    );
    if (!rows[0]) return false;
    if (!rows[0].quiet && !(await recordsIntact(client, input.key, input.pass.streamId, input.known, distinct))) return false;
    // The page's records are as they were when it was written: that time stays its own.
    await client.query(
      `INSERT INTO stream_pages (stream_id, generation, page, per_page, digest, ids, has_more, written_at)
       SELECT stream_id, $3, page, per_page, digest, ids, has_more, written_at FROM stream_pages
        WHERE stream_id = $1 AND generation = $2 AND page = $4${seenPageReplaces}`,
      [input.pass.streamId, input.known.generation, input.pass.generation, input.known.page],
    );
    return true;
  });
  if (!opened.value) {
    // Nothing was written: the transaction only ends.
    await opened.end(() => Promise.resolve());
    return null;
  }
  return {
    counts: { inserted: 0, updated: 0, unchanged: distinct.length },
    records: distinct.length,
    conflicted: false,
    commit: (checkpoint) => opened.end((client, tx) => saveCheckpointAndCommit(client, tx, input.pass, checkpoint, { pages: 1, records: distinct.length })),
    abandon: () => opened.abandon(),
  };
}

/** Whether every record of a known page is in the mirror, live, and unchanged since it was written. */
async function recordsIntact(
  client: Pick<PoolClient, 'query'>,
  key: StreamKey,
  streamId: number,
  known: KnownPage,
  distinct: readonly string[],
): Promise<boolean> {
  const { rows } = await client.query<{ n: number; intact: boolean }>(
    `SELECT count(*)::int AS n, coalesce(bool_and(r.deleted_at IS NULL AND r.mirrored_at <= p.written_at), true) AS intact
       FROM stream_pages p JOIN records r ON r.account_id = $1 AND r.resource = $2 AND r.scope = $3 AND r.id = ANY($4::text[])
      WHERE p.stream_id = $5 AND p.generation = $6 AND p.page = $7`,
    [key.accountId, key.resource, key.scope, distinct, streamId, known.generation, known.page],
  );
  return rows[0]!.n === distinct.length && rows[0]!.intact;
}
