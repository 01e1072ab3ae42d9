// Applying an account's webhook inbox, in stages like a list page's: read a batch of pending events,
// classify them (inbox-stages.ts, pure), fetch the changed objects from the upstream, group the
// answers by stream (pure), write each stream's objects and deletions, and mark the events applied.
// An object fetched before a newer state was written never overwrites it (the record write's guard).
import { Context } from '@temporalio/activity';
import pLimit from 'p-limit';
import { knownProfile } from '../connectors/source-systems/index.ts';
import { getObject, type AccountContext } from '../connectors/operations.ts';
import { UpstreamNotFoundError } from '../lib/errors.ts';
import { markApplied, pendingEvents, type PendingEvent } from '../mirror/streams/inbox.ts';
import { markDeleted } from '../mirror/records/deletes.ts';
import { applyObjects } from '../mirror/records/object-writes.ts';
import type { Pool } from '../mirror/db/pool.ts';
import { recordWritePosition } from '../mirror/db/write-positions.ts';
import type { UpstreamClient } from '../connectors/upstream-client.ts';
import { Outcomes, classifyEvents, groupByStream, type InboxObject, type StreamChanges } from './inbox-stages.ts';
import type { SyncDeps } from './sync.ts';

export interface ApplyInboxInput {
  accountId: string;
  /** Events per batch (default 500). */
  limit?: number;
  /** Objects fetched at once (default 16). */
  concurrency?: number;
  /** How long one activity drains before handing back to the workflow (default 20 s). */
  drainMs?: number;
}

export interface ApplyResult {
  applied: number;
  deleted: number;
  skipped: number;
  /** Types whose `target` was `<type>:*`: a pass over them is needed. */
  fullPassTypes: string[];
  more: boolean;
}

type InboxDeps = Pick<SyncDeps, 'pool' | 'accounts' | 'upstream' | 'logger'> & {
  /** With read replicas: a batch that changed records records its account's position (mirror/db/write-positions.ts). */
  recordWritePositions?: boolean;
};

/**
 * Drains the inbox: events that landed while a batch was applied are taken up at once, not after a
 * round trip through the workflow (100-180 ms a batch on a busy machine). Returns when the inbox is
 * empty, when a pass is requested, or after `drainMs` (more: true).
 */
export async function applyInbox(deps: InboxDeps, input: ApplyInboxInput): Promise<ApplyResult> {
  const limit = input.limit ?? 500;
  const deadline = Date.now() + (input.drainMs ?? 20_000);
  const total: ApplyResult = { applied: 0, deleted: 0, skipped: 0, fullPassTypes: [], more: false };
  for (;;) {
    const t0 = performance.now();
    const events = await pendingEvents(deps.pool, input.accountId, limit);
    if (events.length === 0) return total;
    const r = await applyBatch(deps, input, events, t0);
    total.applied += r.applied;
    total.deleted += r.deleted;
    total.skipped += r.skipped;
    total.fullPassTypes.push(...r.fullPassTypes);
    activityHeartbeat();
    // A worker shutting down cancels its activities: hand what is left to the next run.
    if (total.fullPassTypes.length > 0 || Date.now() >= deadline || activityCancelled()) return { ...total, more: true };
  }
}

/**
 * One batch of pending events: the objects are fetched concurrently (within the account's budget:
 * every request goes through the governor), then written in one statement per stream and marked
 * applied in one per outcome. What could not be fetched stays pending; the activity's retry takes it up.
 */
async function applyBatch(deps: InboxDeps, input: ApplyInboxInput, events: PendingEvent[], t0: number): Promise<ApplyResult> {
  const tRead = performance.now();
  const account = await deps.accounts.get(input.accountId);
  const profile = knownProfile(account.sourceSystem);
  const token = await deps.accounts.token(input.accountId);
  const outcomes = new Outcomes();
  const classified = classifyEvents(events, input.accountId, profile, outcomes);
  const context = { accountToken: token, accountId: input.accountId, sourceSystem: profile?.slug };
  const fetched = await fetchObjects(deps.upstream, context, classified.objects, input.concurrency ?? 16);
  const tFetched = performance.now();
  const { streams, failure } = groupByStream(classified.objects, fetched);
  const written = await writeStreams(deps.pool, streams, outcomes);
  for (const [outcome, ids] of outcomes.entries()) await markApplied(deps.pool, ids, outcome);
  if (deps.recordWritePositions && written.applied > 0) await recordWritePosition(deps.pool, input.accountId);
  deps.logger.debug(
    {
      events: events.length,
      objects: classified.objects.length,
      readMs: Math.round(tRead - t0),
      fetchMs: Math.round(tFetched - tRead),
      writeMs: Math.round(performance.now() - tFetched),
    },
    'inbox applied',
  );
  if (failure !== undefined) throw failure instanceof Error ? failure : new Error('fetching a changed object failed');
  return { ...written, skipped: classified.skipped, fullPassTypes: classified.fullPassTypes, more: false };
}

/** Stage 2: each object from the upstream, `undefined` where it answered 404 (DELETE events too: only the 404 confirms a deletion). */
async function fetchObjects(
  upstream: UpstreamClient,
  context: AccountContext,
  objects: readonly InboxObject[],
  concurrency: number,
): Promise<PromiseSettledResult<Record<string, unknown> | undefined>[]> {
  const limit = pLimit(concurrency);
  return Promise.allSettled(
    objects.map((o) =>
      limit(async () => {
        try {
          return (await getObject(upstream, { ...context, path: o.path, projectId: o.projectId, includeSourceData: true })).body;
        } catch (error) {
          if (error instanceof UpstreamNotFoundError) return undefined;
          throw error;
        }
      }),
    ),
  );
}

/** Stage 4: per stream, the fetched objects in one write and the gone ones in one update; their events settled. */
async function writeStreams(pool: Pool, streams: readonly StreamChanges[], outcomes: Outcomes): Promise<{ applied: number; deleted: number }> {
  const counts = { applied: 0, deleted: 0 };
  for (const stream of streams) {
    if (stream.items.length > 0) {
      await applyObjects(pool, stream.key, stream.items);
      counts.applied += stream.upserted.length + stream.refused.length;
      outcomes.settle('upserted', stream.upserted);
      outcomes.settle('not deleted: the upstream still has it (applied as an update)', stream.refused);
    }
    if (stream.gone.length > 0) {
      counts.deleted += await markDeleted(pool, stream.key, stream.gone);
      counts.applied += stream.deleted.length;
      outcomes.settle('deleted', stream.deleted);
    }
  }
  return counts;
}

/** Heartbeats when run as an activity (tests call activities directly too). */
function activityHeartbeat(): void {
  try {
    Context.current().heartbeat();
  } catch {
    // Not in an activity.
  }
}

function activityCancelled(): boolean {
  try {
    return Context.current().cancellationSignal.aborted;
  } catch {
    return false;
  }
}
