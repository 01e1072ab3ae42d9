// The rate-limit governor's interface. The client asks it before every request and tells it what
// every response reported; implementations decide pacing, waiting and concurrency.
import { RateLimitedError } from '../lib/errors.ts';
import type { RateLimitReport } from './rate-limit-headers.ts';

/**
 * Who waits for a request. `interactive`: an application's forwarded call, waiting on the other end
 * (pass-through, writes, link calls, storage bytes, a read the mirror cannot answer yet); sent before
 * background work, and may spend a whole window. `background`: the mirror's own work (sync pages,
 * event fetches, async polls, webhook registration, reconciliation); spends at most the sync share of
 * each window (MIRROR_SYNC_BUDGET_SHARE).
 */
export type Priority = 'interactive' | 'background';

export interface GovernorKeys {
  /** The upstream client id (the service-level budget is per client and account). */
  client: string;
  /** The mirror's linked-account id, or a stable hash of the account token. */
  account?: string;
  /** The source system's slug. */
  sourceSystem?: string;
  /**
   * `storage`: a file fetched from the upstream's storage (another host): its own budget, counted by
   * what its answers report, and no API concurrency slot.
   */
  origin?: 'storage';
  /** Default `background`. */
  priority?: Priority;
}

export interface Governor {
  /** Resolves when a request may be sent; the returned function must be called once it completes. */
  acquire(keys: GovernorKeys, signal?: AbortSignal): Promise<() => void>;
  /**
   * Every response's rate-limit headers (and its status: a 429 means the budget is spent).
   * `sentAt` (epoch ms), when the request was sent: requests sent after it cannot be counted in its
   * report yet, those sent before it have been.
   */
  report(keys: GovernorKeys, report: RateLimitReport, status: number, sentAt?: number): void;
  /** What this process's requests of each class got so far (counters), when the governor keeps count. */
  usage?(): Record<Priority, ClassUsage>;
}

/** What one class of request got from a process's governor: how many, what they waited for and how long. */
export interface ClassUsage {
  /** Requests let go. */
  granted: number;
  /** Interactive requests refused at once (their slot was beyond MIRROR_INTERACTIVE_MAX_WAIT_MS). */
  refused: number;
  /** Milliseconds waited for a concurrency slot (the account's or source system's cap). */
  waitedForConcurrencyMs: number;
  /** Milliseconds waited for a send slot (the budget's pace, a spent window, a 429; background also its lane). */
  waitedForRateMs: number;
}

/** A governor that never waits: for link calls and tests that measure the upstream itself. */
export const unlimitedGovernor: Governor = {
  acquire: () => Promise.resolve(() => undefined),
  report: () => undefined,
};

/** One rate window as the governor knows it, named as the upstream's headers name it. */
export interface KnownWindow {
  /** `service` (the `{Prefix}-RateLimit-*` headers), else the source system's slug. */
  name: string;
  total?: number;
  remaining?: number;
  /** Epoch ms. */
  resetsAt?: number;
}

/**
 * An interactive request whose send slot is further away than the governor may hold it
 * (MIRROR_INTERACTIVE_MAX_WAIT_MS): refused at once, nothing sent. Carries what the governor knows of
 * the windows, so the caller can answer as the upstream would have.
 */
export class GovernorWaitTooLongError extends RateLimitedError {
  constructor(
    message: string,
    readonly waitMs: number,
    readonly windows: readonly KnownWindow[],
  ) {
    super(message, Date.now() + waitMs);
  }
}
