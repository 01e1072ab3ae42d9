// The one place that turns the project's errors into Temporal failures: non-retryable where a retry
// cannot help, and a 429 as a retry delayed until the upstream's window resets.
import { ApplicationFailure } from '@temporalio/common';
import { MirrorError, RateLimitedError, UpstreamRateLimitedError } from '../lib/errors.ts';

function toFailure(error: unknown): unknown {
  if (error instanceof ApplicationFailure) return error;
  if (!(error instanceof MirrorError)) return error;
  if (error instanceof UpstreamRateLimitedError || error instanceof RateLimitedError) {
    const waitMs = Math.max(250, error.resetAt - Date.now());
    return ApplicationFailure.create({ message: error.message, type: error.code, nonRetryable: false, nextRetryDelay: waitMs, cause: error });
  }
  return ApplicationFailure.create({ message: error.message, type: error.code, nonRetryable: !error.retryable, cause: error });
}

export async function asActivity<T>(fn: () => Promise<T>): Promise<T> {
  try {
    return await fn();
  } catch (error) {
    throw toFailure(error);
  }
}
