// What the sync activities share: their dependencies, the slice runner (which keeps passes' page
// histories between slices in this process), and the steps every stream's pass takes whichever
// activity runs it: the account checked first, slices run to the end, a 401 judged, the poll recorded.
import { setTimeout as sleep } from 'node:timers/promises';
import { knownProfile, type SourceSystemProfile } from '../connectors/source-systems/index.ts';
import { CredentialsRefusedError, MirrorError, UpstreamAuthError } from '../lib/errors.ts';
import { positionsSnapshotMs, recordWritePosition } from '../mirror/db/write-positions.ts';
import { defaultPollingPolicy, recordPoll, type PollingPolicy, type WebhookCoverage } from '../mirror/streams/polling.ts';
import { markStreamFailed, markStreamPaused, type StreamKey } from '../mirror/streams/streams.ts';
import { StallAttemptError, StallGuard } from './stalls.ts';
import { defaultMaxPagesPerPass, SliceRunner, type SliceCounts, type SyncSliceInput } from './sync-slice.ts';
import type { SyncDeps } from './sync-types.ts';

const countKeys = ['pages', 'records', 'inserted', 'updated', 'unchanged', 'deleted'] as const;

export const emptyCounts = (): SliceCounts => ({ pages: 0, records: 0, inserted: 0, updated: 0, unchanged: 0, deleted: 0 });

/** How one stream's pass ended in an activity that runs it to its end: failed for good, stalled, or neither (done). */
interface StreamEnd {
  failed?: string;
  stalled?: string;
}

/** How a completed pass counts as a poll: the account's webhook coverage, and whether an event made it due. */
interface PollNote {
  coverage?: WebhookCoverage;
  event?: boolean;
}

export class SyncContext {
  readonly slices: SliceRunner;
  readonly polling: PollingPolicy;
  /** Around each attempt at a stream: stalled streams wait out their backoff, attempts that do not move a checkpoint are counted. */
  readonly stalls: StallGuard;

  constructor(readonly deps: SyncDeps) {
    const { upstream, pool, accounts, logger } = deps;
    this.polling = deps.polling ?? defaultPollingPolicy;
    this.slices = new SliceRunner({ upstream, pool, accounts, logger, pageBound: deps.maxPagesPerPass ?? defaultMaxPagesPerPass });
    this.stalls = new StallGuard({ pool, logger, ...(deps.stalls ? { policy: deps.stalls } : {}) });
  }

  /** An account whose credentials are refused, or which is unlinked, asks the upstream nothing. */
  async usable(accountId: string): Promise<void> {
    const { status, reason } = await this.deps.accounts.status(accountId);
    if (status !== 'linked')
      throw new CredentialsRefusedError(`The account is ${status}${reason ? `: ${reason}` : ''}; its passes wait until it is linked again.`);
  }

  /**
   * The error that stops a pass because the account's credentials are refused, when `error` is one:
   * a 401 counts only once the upstream refuses the token on a cheap call too (else it is the list's own).
   */
  async refusedCredentials(accountId: string, error: unknown): Promise<CredentialsRefusedError | undefined> {
    if (error instanceof CredentialsRefusedError) return error;
    const { credentials, logger } = this.deps;
    if (!(error instanceof UpstreamAuthError) || error.upstreamStatus !== 401 || !credentials) return undefined;
    const verdict = await credentials.confirm(accountId).catch((e: unknown) => {
      logger.warn({ err: e }, 'could not check whether the upstream still takes the account token');
      return undefined;
    });
    if (!verdict?.refused) return undefined;
    return new CredentialsRefusedError(`The upstream refuses the account's credentials: ${verdict.reason}`, { cause: error });
  }

  async profileFor(accountId: string): Promise<SourceSystemProfile | undefined> {
    const account = await this.deps.accounts.get(accountId);
    return knownProfile(account.sourceSystem);
  }

  /**
   * Runs one stream's pass to its end, slice after slice, adding its counts to `totals`. A failure is
   * recorded on the stream; a permanent one is returned (`failed`: its message), a transient one
   * thrown, so the activity fails and Temporal retries it. A stream that is stalled ends here for
   * now, and says why (`stalled`).
   */
  async streamToEnd(spec: SyncSliceInput, key: StreamKey, totals: SliceCounts, poll: PollNote = {}): Promise<StreamEnd> {
    try {
      await this.usable(key.accountId);
      for (;;) {
        const r = await this.stalls.attempt(key, () => this.slices.run(spec, key));
        for (const k of countKeys) totals[k] += r[k];
        if (r.done) {
          if (r.stalled !== undefined) return { stalled: r.stalled };
          await this.notePoll(key, poll);
          return {};
        }
      }
    } catch (error) {
      // The account's credentials refused: thrown (the sweep stops, never retried), the stream paused.
      const refused = await this.refusedCredentials(key.accountId, error);
      if (refused) {
        await markStreamPaused(this.deps.pool, key).catch(() => undefined);
        throw refused;
      }
      const message = error instanceof Error ? error.message : String(error);
      if (!(error instanceof StallAttemptError)) await markStreamFailed(this.deps.pool, key, message).catch(() => undefined);
      if (error instanceof MirrorError && !error.retryable) return { failed: message };
      throw error;
    }
  }

  /**
   * With read replicas, after a slice, a sweep or a batch of children whose writes committed and changed
   * records: records the account's position (mirror/db/write-positions.ts), so that its reads go only to
   * a replica that has replayed them. The activity then ends no sooner than the API processes' snapshots
   * of positions can have missed it (as a write route's answer waits): a client that saw the pass end
   * and reads finds the position. Once per activity, whatever its pages; nothing when nothing changed.
   */
  async wrote(accountId: string, counts: SliceCounts): Promise<void> {
    if (!this.deps.recordWritePositions || counts.inserted + counts.updated + counts.deleted === 0) return;
    try {
      await recordWritePosition(this.deps.pool, accountId);
    } catch (error) {
      // The writes stand: only where the account's next reads go is less sure (a replica may answer them).
      this.deps.logger.warn({ accountId, err: error }, "could not record the account's write position after a pass wrote");
      return;
    }
    // A few milliseconds beyond the snapshots' lifetime: timers fire late, never early.
    await sleep(positionsSnapshotMs + 5);
  }

  /**
   * Counts a completed pass as a poll of its stream and writes when it is due next (mirror/streams/polling.ts).
   * The pass is done whatever happens here: a failure only leaves the stream due at the next pass.
   */
  async notePoll(key: StreamKey, o: PollNote): Promise<void> {
    try {
      await recordPoll(this.deps.pool, key, {
        policy: this.polling,
        covered: o.coverage?.covers(key.resource, key.scope) ?? false,
        ...(o.event ? { event: true } : {}),
      });
    } catch (error) {
      this.deps.logger.warn({ resource: key.resource, scope: key.scope, err: error }, 'could not record the poll of a stream; it is due at the next pass');
    }
  }
}
