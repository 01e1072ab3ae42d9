// Pages a pass keeps without writing them: a page whose body is byte for byte the one an earlier pass
// committed, when its records are still as that pass left them.
import type { Pool, PoolClient } from '../db/pool.ts';
import { saveCheckpointAndCommit, type StreamKey } from '../streams/streams.ts';
import { openTransaction, relaxedCommit } from './open-transaction.ts';
import { seenPageReplaces, type StagedPage } from './page-write.ts';

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
