// The retry decision for one upstream call, as a pure function. HTTP-level retries are few and
// short; the long tail (and every 429) belongs to Temporal's activity retries.

interface RetryInput {
  /** 1 for the first try. */
  attempt: number;
  /** The upstream's status, or undefined when no response came (connection error, timeout). */
  status?: number;
  /** Seconds from a `Retry-After` header, when present. */
  retryAfterSeconds?: number;
  /** Whether the request may be sent twice (GET, or a body that the upstream treats idempotently). */
  idempotent: boolean;
  maxAttempts?: number;
  baseDelayMs?: number;
  maxDelayMs?: number;
  /** Random source in [0, 1), injected so tests are exact. */
  random?: () => number;
}

export type RetryDecision =
  { retry: true; delayMs: number } | { retry: false; reason: 'success' | 'not-retryable' | 'attempts-exhausted' | 'rate-limited' | 'not-idempotent' };

const defaultRetry = { maxAttempts: 3, baseDelayMs: 200, maxDelayMs: 2_000 } as const;

export function retryDecision(input: RetryInput): RetryDecision {
  const { attempt, status } = input;
  const maxAttempts = input.maxAttempts ?? defaultRetry.maxAttempts;
  if (status !== undefined && status < 400) return { retry: false, reason: 'success' };
  // A 429 is handed back with its reset time: waiting belongs to the governor and Temporal.
  if (status === 429) return { retry: false, reason: 'rate-limited' };
  const transient = status === undefined || status === 408 || status >= 500;
  if (!transient) return { retry: false, reason: 'not-retryable' };
  if (!input.idempotent && status !== undefined && status !== 503) return { retry: false, reason: 'not-idempotent' };
  if (attempt >= maxAttempts) return { retry: false, reason: 'attempts-exhausted' };
  const base = input.baseDelayMs ?? defaultRetry.baseDelayMs;
  const cap = input.maxDelayMs ?? defaultRetry.maxDelayMs;
  if (input.retryAfterSeconds !== undefined && input.retryAfterSeconds >= 0) {
    const wait = input.retryAfterSeconds * 1000;
    // A long Retry-After is Temporal's business, not a request's.
    return wait <= cap ? { retry: true, delayMs: wait } : { retry: false, reason: 'attempts-exhausted' };
  }
  const exp = Math.min(cap, base * 2 ** (attempt - 1));
  const random = input.random ?? Math.random;
  // Full jitter in [exp/2, exp].
  return { retry: true, delayMs: Math.round(exp / 2 + (random() * exp) / 2) };
}
