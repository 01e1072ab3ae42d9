// Stream state: which pass a stream is in, where it stopped, and how it ended. A checkpoint is
// written in the same transaction as the page it follows (see mirror/records/page-write.ts).
import { z } from 'zod';
import { MirrorError } from '../../lib/errors.ts';
import { allProjectsScope } from '../../lib/resources.ts';
import { inTransaction, type Pool, type PoolClient, type Transaction } from '../db/pool.ts';

type StreamState = 'never_synced' | 'syncing' | 'synced' | 'failed' | 'paused' | 'stalled';
export type PassMode = 'full' | 'incremental';

export const checkpointSchema = z.object({
  /** Identifies the pass: a retried or resumed activity continues the same pass. */
  passKey: z.string(),
  mode: z.enum(['full', 'incremental']),
  /** The next page to fetch. */
  page: z.number().int().min(1),
  perPage: z.number().int().min(1),
  /** Fingerprint of the last committed page (repeat detection across slices). */
  lastFingerprint: z.string().nullable(),
  /**
   * An incremental pass's committed pages, page 1 first, by the first 64 bits of their fingerprints
   * (`''` for an empty page): what a page that repeats an earlier one is compared with after a
   * resume. A full pass reads them from stream_pages instead ({@link committedPageIds}).
   */
  pageFingerprints: z.array(z.string()).optional(),
  /** Lower bound of an incremental pass (ISO), if any. */
  since: z.string().nullable(),
  done: z.boolean(),
  /** The last page said no more results although it was full: the next page only confirms the end. */
  confirming: z.boolean().optional(),
  /** The next page is being produced by an upstream async request: poll it instead of asking again. */
  pendingAsync: z.object({ id: z.string(), page: z.number().int().min(1), expiresAt: z.number().nullable() }).optional(),
  /** Async requests of the next page whose results expired unread (asked again once, then failed). */
  asyncExpiries: z.number().int().min(0).optional(),
  counts: z.object({ inserted: z.number(), updated: z.number(), unchanged: z.number(), deleted: z.number() }),
  /**
   * A full pass that began on a stream without a live record (a first sync): nothing can be absent
   * from it, so finishing it marks nothing deleted without looking.
   */
  startedEmpty: z.boolean().optional(),
});
export type Checkpoint = z.infer<typeof checkpointSchema>;

export interface StreamKey {
  accountId: string;
  resource: string;
  scope: string;
}

export interface StreamPass {
  streamId: number;
  generation: number;
  checkpoint: Checkpoint;
  /** True when this call started the pass (false when it resumes or finds it finished). */
  started: boolean;
}

/** A pass that another run has replaced: the caller must stop writing. */
export class StalePassError extends MirrorError {
  override readonly code = 'stale_pass';

  static of(streamId: number): StalePassError {
    return new StalePassError(`Stream ${streamId} moved on to another pass; this one stops.`);
  }
}

interface StreamRow {
  id: number;
  generation: number;
  state: StreamState;
  checkpoint: unknown;
  last_pass_started_at: Date | null;
}

/**
 * SQL that matches the records of a stream's scope in `column`, given the scope as parameter `param`:
 * that scope; or, for a stream across projects (`project=*`), every project's scope.
 */
export function recordScopeSql(scope: string, column: string, param: string): string {
  return scope === allProjectsScope ? `${column} LIKE replace(${param}::text, '*', '%')` : `${column} = ${param}`;
}

/**
 * Begins the pass named by `passKey`, or resumes it where its last committed page left it.
 * A different pass key on a stream whose pass was interrupted starts over (a new generation).
 */
export async function beginOrResumePass(
  pool: Pool,
  key: StreamKey,
  pass: { passKey: string; mode: PassMode; perPage: number; overlapMs?: number },
): Promise<StreamPass> {
  return inTransaction(pool, async (client) => {
    await client.query(`INSERT INTO streams (account_id, resource, scope) VALUES ($1, $2, $3) ON CONFLICT (account_id, resource, scope) DO NOTHING`, [
      key.accountId,
      key.resource,
      key.scope,
    ]);
    const { rows } = await client.query<StreamRow>(
      `SELECT id, generation, state, checkpoint, last_pass_started_at FROM streams
        WHERE account_id = $1 AND resource = $2 AND scope = $3 FOR UPDATE`,
      [key.accountId, key.resource, key.scope],
    );
    const row = rows[0]!;
    const existing = checkpointSchema.safeParse(row.checkpoint);
    if (existing.success && existing.data.passKey === pass.passKey) {
      return { streamId: row.id, generation: row.generation, checkpoint: existing.data, started: false };
    }
    // A stalled pass is taken over by the next pass that tries the stream (after its backoff): it
    // resumes at the checkpoint that did not move, instead of asking every page before it again.
    if (existing.success && row.state === 'stalled' && !existing.data.done) {
      const adopted: Checkpoint = { ...existing.data, passKey: pass.passKey };
      await client.query(`UPDATE streams SET checkpoint = $2, updated_at = now() WHERE id = $1`, [row.id, JSON.stringify(adopted)]);
      return { streamId: row.id, generation: row.generation, checkpoint: adopted, started: false };
    }
    const mode: PassMode = pass.mode === 'incremental' && row.last_pass_started_at ? 'incremental' : 'full';
    const since =
      mode === 'incremental' && row.last_pass_started_at ? new Date(row.last_pass_started_at.getTime() - (pass.overlapMs ?? 5 * 60_000)).toISOString() : null;
    const checkpoint: Checkpoint = {
      passKey: pass.passKey,
      mode,
      page: 1,
      perPage: pass.perPage,
      lastFingerprint: null,
      since,
      done: false,
      counts: { inserted: 0, updated: 0, unchanged: 0, deleted: 0 },
    };
    if (mode === 'full') {
      const { rows: live } = await client.query<{ any: boolean }>(
        `SELECT EXISTS (SELECT 1 FROM records WHERE account_id = $1 AND resource = $2 AND ${recordScopeSql(key.scope, 'scope', '$3')} AND deleted_at IS NULL) AS any`,
        [key.accountId, key.resource, key.scope],
      );
      if (!live[0]!.any) checkpoint.startedEmpty = true;
    }
    const generation = row.generation + 1;
    await client.query(
      `UPDATE streams SET generation = $2, state = 'syncing', mode = $3, checkpoint = $4, pages = 0, records = 0,
              pass_started_at = now(), last_error = NULL, updated_at = now() WHERE id = $1`,
      [row.id, generation, mode, JSON.stringify(checkpoint)],
    );
    await client.query(`INSERT INTO sync_runs (stream_id, generation, mode) VALUES ($1, $2, $3) ON CONFLICT (stream_id, generation) DO NOTHING`, [
      row.id,
      generation,
      mode,
    ]);
    // Pages of earlier passes stay (the latest row of each page is what this pass compares its pages
    // with); they are dropped when this pass finishes.
    return { streamId: row.id, generation, checkpoint, started: true };
  });
}

/**
 * The UPDATE that saves a pass's checkpoint, with its values as SQL: parameters ({@link saveCheckpoint})
 * or literals ({@link saveCheckpointAndCommit}). It changes no row once the pass was replaced.
 */
const checkpointUpdate = (v: { id: string; generation: string; checkpoint: string; pages: string; records: string; passKey: string }) => `
  UPDATE streams SET checkpoint = ${v.checkpoint}, pages = pages + ${v.pages}, records = records + ${v.records}, updated_at = now()
   WHERE id = ${v.id} AND generation = ${v.generation} AND checkpoint->>'passKey' = ${v.passKey}`;

/** Writes the checkpoint that follows a committed page; fails if the pass was replaced meanwhile. */
export async function saveCheckpoint(
  client: Pick<PoolClient, 'query'>,
  pass: { streamId: number; generation: number },
  checkpoint: Checkpoint,
  delta: { pages: number; records: number },
): Promise<void> {
  const { rowCount } = await client.query(checkpointUpdate({ id: '$1', generation: '$2', checkpoint: '$3', pages: '$4', records: '$5', passKey: '$6' }), [
    pass.streamId,
    pass.generation,
    JSON.stringify(checkpoint),
    delta.pages,
    delta.records,
    checkpoint.passKey,
  ]);
  if (rowCount !== 1) throw StalePassError.of(pass.streamId);
}

/** Text of the cast that fails the checkpoint of a replaced pass (see {@link saveCheckpointAndCommit}). */
const stalePassCast = 'stale pass, checkpoint rows saved: ';

/**
 * Writes the checkpoint that follows a page and commits the page's transaction, in one round trip
 * (so the statement is literal SQL, sent with COMMIT). If the pass was replaced meanwhile the
 * statement fails, COMMIT does not run, and the page rolls back: {@link StalePassError}.
 */
export async function saveCheckpointAndCommit(
  client: Pick<PoolClient, 'escapeLiteral'>,
  tx: Transaction,
  pass: { streamId: number; generation: number },
  checkpoint: Checkpoint,
  delta: { pages: number; records: number },
): Promise<void> {
  const text = (v: string): string => client.escapeLiteral(v);
  const int = (n: number): string => {
    if (!Number.isSafeInteger(n)) throw new TypeError(`A checkpoint's numbers are integers, not ${n}`);
    return String(n);
  };
  try {
    await tx.commitWith(`
WITH saved AS (${checkpointUpdate({
      id: int(pass.streamId),
      generation: int(pass.generation),
      checkpoint: text(JSON.stringify(checkpoint)),
      pages: int(delta.pages),
      records: int(delta.records),
      passKey: text(checkpoint.passKey),
    })}
  RETURNING 1
)
-- No row saved: the cast fails, so COMMIT does not run. (Its text includes count(*): a constant
-- would be cast, and fail, at planning, whatever the count.)
SELECT CASE WHEN count(*) = 1 THEN 0 ELSE (${text(stalePassCast)} || count(*))::int END FROM saved`);
  } catch (error) {
    if ((error as { code?: string }).code === '22P02' && String((error as Error).message).includes(stalePassCast)) {
      throw StalePassError.of(pass.streamId);
    }
    throw error;
  }
}

/** The ids of each page a full pass committed before `page`, from stream_pages (its pages, known again after a resume). */
export async function committedPageIds(pool: Pool, pass: { streamId: number; generation: number }, page: number): Promise<{ page: number; ids: string[] }[]> {
  const { rows } = await pool.query<{ page: number; ids: string[] }>(
    'SELECT page, ids FROM stream_pages WHERE stream_id = $1 AND generation = $2 AND page < $3 ORDER BY page',
    [pass.streamId, pass.generation, page],
  );
  return rows;
}

/**
 * Drops a stream that will never run again (a list across projects the upstream refused: the
 * resource is listed project by project instead), with its runs and committed page ids. Its records
 * stay: each is keyed under its own project, where the per-project streams reconcile it.
 */
export async function retireStream(pool: Pool, key: StreamKey): Promise<void> {
  await pool.query(`DELETE FROM stream_pages WHERE stream_id IN (SELECT id FROM streams WHERE account_id = $1 AND resource = $2 AND scope = $3)`, [
    key.accountId,
    key.resource,
    key.scope,
  ]);
  await pool.query(`DELETE FROM streams WHERE account_id = $1 AND resource = $2 AND scope = $3`, [key.accountId, key.resource, key.scope]);
}

/**
 * A stream whose pass stopped because the account's credentials were refused: `paused`, not failed
 * (nothing is wrong with the stream itself); its pass resumes from its checkpoint once the account is
 * linked again. Its run stays open for that pass. Only a stream in a pass (`syncing`) or before its
 * first is paused: a stalled one stays stalled (its backoff and its checkpoint are what its next
 * pass takes over), and a synced or failed one keeps what its last pass said.
 */
export async function markStreamPaused(pool: Pool, key: StreamKey): Promise<void> {
  // Typed as the states the code writes, so that a state no code writes cannot be named here.
  const pausable: readonly StreamState[] = ['syncing', 'never_synced'];
  await pool.query(
    `UPDATE streams SET state = 'paused', updated_at = now()
      WHERE account_id = $1 AND resource = $2 AND scope = $3 AND state = ANY($4::text[])`,
    [key.accountId, key.resource, key.scope, pausable],
  );
}

export async function markStreamFailed(pool: Pool, key: StreamKey, message: string): Promise<void> {
  await pool.query(
    `UPDATE streams SET state = 'failed', last_error = $4, updated_at = now()
      WHERE account_id = $1 AND resource = $2 AND scope = $3`,
    [key.accountId, key.resource, key.scope, message.slice(0, 2000)],
  );
  await pool.query(
    `UPDATE sync_runs r SET status = 'failed', error = $4, finished_at = now()
       FROM streams s WHERE r.stream_id = s.id AND r.generation = s.generation
        AND s.account_id = $1 AND s.resource = $2 AND s.scope = $3 AND r.status = 'running'`,
    [key.accountId, key.resource, key.scope, message.slice(0, 2000)],
  );
}

/**
 * The parents whose children an incremental pass lists again: live records of `parentResource` in
 * `parentScopes` that changed (were written: new, changed, or named by an event) since their
 * children's stream began its last complete pass, or whose children's stream never completed one.
 * Both times are Postgres's own clock. By parent scope, in the upstream's order.
 */
export async function parentsToRefresh(
  pool: Pool,
  q: { accountId: string; parentResource: string; parentScopes: readonly string[]; childResource: string; passKey?: string; every?: boolean },
): Promise<Map<string, string[]>> {
  // `every`: every live parent (a full pass), due or not.
  // With `passKey`, parents whose children this very pass already listed stay in: a workflow that
  // continues as new asks again and must get the same list.
  const { rows } = await pool.query<{ scope: string; id: string }>(
    `SELECT p.scope, p.id FROM records p
       LEFT JOIN streams s ON s.account_id = p.account_id AND s.resource = $3
            AND s.scope = CASE WHEN p.scope = '' THEN '' ELSE p.scope || '/' END || p.resource || '=' || p.id
      WHERE p.account_id = $1 AND p.resource = $2 AND p.scope = ANY($4::text[]) AND p.deleted_at IS NULL
        AND ($6 OR s.last_pass_started_at IS NULL OR s.state <> 'synced' OR p.mirrored_at >= s.last_pass_started_at
             OR s.checkpoint->>'passKey' = $5)
      ORDER BY p.scope, p.ordinal, p.id`,
    [q.accountId, q.parentResource, q.childResource, q.parentScopes, q.passKey ?? null, q.every ?? false],
  );
  const out = new Map<string, string[]>();
  for (const r of rows) {
    const list = out.get(r.scope);
    if (list) list.push(r.id);
    else out.set(r.scope, [r.id]);
  }
  return out;
}
