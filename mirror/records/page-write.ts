// The write of a page of records (mirror/records/ holds every record write). A page of a pass goes
// in two phases: `stagePage` writes its records (and its row of stream_pages) in a transaction it
// leaves open, and the staged page's `commit` saves the checkpoint that holds once it is committed
// and commits, in one round trip.
// A pass that writes several pages at once commits them in order: it stages a page, waits for the
// one before it, and commits (activities/page-writer.ts); nothing here waits on the pass.
// How the records travel (the bytes the upstream sent, split from their source data, or objects) is
// mirror/records/page-encoding.ts's, with the SQL that reads each layout.
// Unchanged records (same content hash) are not rewritten; counts come out of the write itself.
// A full pass records each committed page (its ids and the digest of its body) in stream_pages: the
// seen-set for marking absentees deleted, and what lets the next pass keep a byte-identical page
// without parsing or writing it (`stageKeptPage`).
import { BufferPool } from '../../lib/buffer-pool.ts';
import { MirrorError } from '../../lib/errors.ts';
import type { PageRecords } from '../../lib/list-page.ts';
import { allProjectsScope, resourceDef } from '../../lib/resources.ts';
import { encodeBody, encodeObjects, isBodyRefusal, parseBody, rowSources, type EncodedRows, type RowsKind } from './page-encoding.ts';
import type { Pool, PoolClient, TransactionOptions } from '../db/pool.ts';
import { invalidatePositions } from '../reads/record-positions.ts';
import { saveCheckpointAndCommit, type Checkpoint, type StreamKey } from '../streams/streams.ts';
import { genericPlan, openTransaction, relaxedCommit, type OpenTransaction } from './open-transaction.ts';

export interface WriteCounts {
  inserted: number;
  updated: number;
  unchanged: number;
}

interface SeenPage {
  page: number;
  perPage: number;
  /** Digest (SHA-256) of the page's body as received (null: never to be reused). */
  digest: string | null;
  hasMore: boolean | null;
}

/** A page to write: its records (lib/list-page.ts), where they go, and what the write records of it. */
interface PageStage {
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
  /**
   * Buffers of encoded bodies, used again page after page by a process that writes many (see
   * lib/buffer-pool.ts); without them each page's body gets a buffer of its own.
   */
  buffers?: BufferPool;
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
interface PageWrite extends PageStage {
  /**
   * The checkpoint of the pages before this one: saved, with this page's counts added, as the page
   * commits. Omitted for writes outside a pass.
   */
  checkpoint?: Checkpoint;
}

/** Fields whose values change on every fetch (signed URLs) and so must not count as a change. */
export function volatileFields(resource: string): string[] {
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
export const seenPageReplaces = `
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
/**
 * The write's statement: of objects or of a body; an upsert or an insert; with the page's row or not.
 * Named, so each connection parses it once (see `genericPlan`); its text is built for each page (a few
 * microseconds against the page's milliseconds), so no process keeps a registry of them.
 */
function statement(kind: RowsKind, upsert: boolean, seen: boolean, perProject = false): { name: string; text: string } {
  return { name: `mirror-write:${kind}:${upsert}:${seen}${perProject ? ':per-project' : ''}`, text: writeSql(rowSources[kind], upsert, seen, perProject) };
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
        const rows = encodeBody(records, this.stage.buffers ?? new BufferPool(0));
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
 * Notes that records of the stream changed outside a pass, in the writing transaction: a page an
 * earlier pass committed before this is then checked record by record before it is kept.
 */
export async function touchStream(client: Pick<PoolClient, 'query'>, key: StreamKey): Promise<void> {
  await client.query(`UPDATE streams SET touched_at = now() WHERE account_id = $1 AND resource = $2 AND scope = $3`, [key.accountId, key.resource, key.scope]);
}
