// The rate-limit governor's interface. The client asks it before every request and tells it what
// every response reported; implementations decide pacing, waiting and concurrency.
import type { RateLimitReport } from './rate-limit-headers.ts';

export interface GovernorKeys {
  /** The upstream client id (the service-level budget is per client and account). */
  client: string;
  /** The mirror's linked-account id, or a stable hash of the account token. */
  account?: string;
  /** The source system's slug. */
  sourceSystem?: string;
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
}

/** A governor that never waits: for link calls and tests that measure the upstream itself. */
export const unlimitedGovernor: Governor = {
  acquire: () => Promise.resolve(() => undefined),
  report: () => undefined,
};
