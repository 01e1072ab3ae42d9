// Stalled passes, around each attempt at a stream (a slice, or a small stream of a sweep): a pass whose
// checkpoint does not move attempt after attempt (its next page comes back as the page before it, or
// never comes back) is `stalled` after MIRROR_STALL_ATTEMPTS attempts or MIRROR_STALL_AFTER, distinct
// from failed (nothing is wrong with what it holds) and from synced. A stalled stream is not asked
// for again before its backoff ends (MIRROR_STALL_BACKOFF, doubling up to MIRROR_STALL_BACKOFF_MAX):
// then one attempt, resumed at its checkpoint, and stalled again at once if it still does not move.
// The state lives in the stream's row (mirror/streams/stalls.ts); the account's subscriptions hear
// `stream.stalled` and `stream.recovered`.
import { UpstreamError, SamePageError } from '../lib/errors.ts';
import type { Logger } from '../lib/logger.ts';
import type { Pool } from '../mirror/db/pool.ts';
import { clearStall, defaultStallPolicy, noteNoProgress, stallState, type StallPolicy } from '../mirror/streams/stalls.ts';
import type { StreamKey } from '../mirror/streams/streams.ts';
import type { SyncSliceResult } from './sync-slice.ts';

type StallKind = 'same-page' | 'timeout';

/** Timeouts of the HTTP client (headers, body) and the upstream's own 504. */
const timeoutCodes = new Set(['UND_ERR_HEADERS_TIMEOUT', 'UND_ERR_BODY_TIMEOUT', 'UND_ERR_CONNECT_TIMEOUT', 'upstream_timeout', 'ETIMEDOUT']);

/** Whether an attempt's failure is one that leaves a checkpoint where it is: a page that repeats the one before, or one that never answers. */
export function stallKindOf(error: unknown): StallKind | undefined {
  const seen = new Set<unknown>();
  for (let e: unknown = error; e instanceof Error && !seen.has(e); e = e.cause) {
    seen.add(e);
    if (e instanceof SamePageError) return 'same-page';
    const code = (e as { code?: unknown }).code;
    if (typeof code === 'string' && timeoutCodes.has(code)) return 'timeout';
    if (e instanceof UpstreamError && e.upstreamStatus === 504) return 'timeout';
  }
  return undefined;
}

/** An attempt that did not move the checkpoint, short of a stall: retried (by Temporal, with its backoff). */
export class StallAttemptError extends UpstreamError {
  override readonly code = 'stream_not_advancing';
  override get retryable(): boolean {
    return true;
  }
}

const zero = { pages: 0, records: 0, inserted: 0, updated: 0, unchanged: 0, deleted: 0 };

export class StallGuard {
  private readonly policy: StallPolicy;

  constructor(private readonly deps: { pool: Pool; logger: Logger; policy?: StallPolicy }) {
    this.policy = deps.policy ?? defaultStallPolicy;
  }

  /**
   * Runs one attempt at a stream: not at all while it is stalled and its backoff lasts (nothing is
   * asked of the upstream); an attempt that moved its checkpoint ends its stall; one that failed
   * without moving it is counted, and either retried (thrown, retryable) or, once stalled, ends
   * the stream's pass for now (`stalled` in the result, not thrown: not failed).
   */
  async attempt(key: StreamKey, run: () => Promise<SyncSliceResult>): Promise<SyncSliceResult> {
    const state = await stallState(this.deps.pool, key);
    if (state?.stalled && state.retryAt && state.retryAt.getTime() > Date.now()) {
      return { ...zero, done: true, generation: 0, stalled: `${state.reason ?? 'stalled'}; tried again after ${state.retryAt.toISOString()}` };
    }
    let result: SyncSliceResult;
    try {
      result = await run();
    } catch (error) {
      const kind = stallKindOf(error);
      if (!kind) throw error;
      const what = `${key.resource}${key.scope ? ` (${key.scope})` : ''}`;
      const verdict = await noteNoProgress(this.deps.pool, key, {
        policy: this.policy,
        describe: (n, page) =>
          kind === 'same-page'
            ? `same page returned ${n} ${n === 1 ? 'time' : 'times'}: ${what} page ${page} came back as page ${page - 1} again`
            : `page timed out ${n} ${n === 1 ? 'time' : 'times'}: ${what} page ${page} got no answer`,
      });
      const message = error instanceof Error ? error.message : String(error);
      if (!verdict.stalled) {
        throw new StallAttemptError(`${message} (attempt ${verdict.attempts} at this checkpoint; stalled after ${this.policy.attempts})`, undefined, {
          cause: error,
        });
      }
      this.deps.logger.warn(
        { resource: key.resource, scope: key.scope, page: verdict.page, attempts: verdict.attempts, retryAt: verdict.retryAt?.toISOString(), err: message },
        'stream stalled: its checkpoint does not move; tried again after a backoff',
      );
      return { ...zero, done: true, generation: 0, stalled: verdict.reason };
    }
    if (state && (state.attempts > 0 || state.stalled)) {
      if (await clearStall(this.deps.pool, key)) this.deps.logger.info({ resource: key.resource, scope: key.scope }, 'stalled stream moves again');
    }
    return result;
  }
}
