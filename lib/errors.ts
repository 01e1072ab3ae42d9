// The one error hierarchy of the project. Every layer throws these; api/ maps them to responses in
// one place and activities map them to Temporal failures in one place.

interface ErrorDetail {
  path?: string;
  message: string;
}

export class MirrorError extends Error {
  readonly statusCode: number = 500;
  readonly code: string = 'internal_error';
  /** Whether the message may be shown to a caller; 5xx messages are hidden by the API. */
  readonly details: ErrorDetail[];

  constructor(message: string, options: { details?: ErrorDetail[]; cause?: unknown } = {}) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause });
    this.name = new.target.name;
    this.details = options.details ?? [];
  }

  /** Retrying the same call can succeed (network trouble, 5xx, rate limits). */
  get retryable(): boolean {
    return this.statusCode >= 500 || this.statusCode === 429 || this.statusCode === 408;
  }
}

export class BadRequestError extends MirrorError {
  override readonly statusCode: number = 400;
  override readonly code: string = 'invalid_request';
}
export class UnauthorizedError extends MirrorError {
  override readonly statusCode = 401;
  override readonly code = 'unauthorized';
}
export class ForbiddenError extends MirrorError {
  override readonly statusCode = 403;
  override readonly code = 'forbidden';
}
export class NotFoundError extends MirrorError {
  override readonly statusCode = 404;
  override readonly code = 'not_found';
}
export class ConflictError extends MirrorError {
  override readonly statusCode = 409;
  override readonly code = 'conflict';
}
export class PayloadTooLargeError extends MirrorError {
  override readonly statusCode = 413;
  override readonly code = 'payload_too_large';
}
export class RateLimitedError extends MirrorError {
  override readonly statusCode = 429;
  override readonly code = 'rate_limited';
  /** When the window resets, in epoch milliseconds. */
  readonly resetAt: number;
  constructor(message: string, resetAt: number, options: { cause?: unknown } = {}) {
    super(message, options);
    this.resetAt = resetAt;
  }
}
export class ConfigError extends MirrorError {
  override readonly code = 'config_error';
}

// Errors that describe the upstream's answer. Status codes are what the mirror answers when it
// forwards such a failure to its own caller.
export class UpstreamError extends MirrorError {
  override readonly statusCode: number = 502;
  override readonly code: string = 'upstream_error';
  /** The upstream's HTTP status, when it answered at all. */
  readonly upstreamStatus: number | undefined;
  constructor(message: string, upstreamStatus?: number, options: { details?: ErrorDetail[]; cause?: unknown } = {}) {
    super(message, options);
    this.upstreamStatus = upstreamStatus;
  }
}
export class UpstreamAuthError extends UpstreamError {
  override readonly statusCode = 401;
  override readonly code = 'upstream_unauthorized';
}
export class UpstreamNotFoundError extends UpstreamError {
  override readonly statusCode = 404;
  override readonly code = 'upstream_not_found';
}
export class UpstreamInvalidInputError extends UpstreamError {
  override readonly statusCode = 400;
  override readonly code = 'upstream_invalid_input';
}
export class UnsupportedFieldError extends UpstreamError {
  override readonly statusCode = 400;
  override readonly code = 'unsupported_field';
}
export class UpstreamRateLimitedError extends UpstreamError {
  override readonly statusCode = 429;
  override readonly code = 'upstream_rate_limited';
  readonly resetAt: number;
  constructor(message: string, resetAt: number, options: { cause?: unknown } = {}) {
    super(message, 429, options);
    this.resetAt = resetAt;
  }
}
export class UpstreamUnavailableError extends UpstreamError {
  override readonly statusCode = 503;
  override readonly code = 'upstream_unavailable';
}
export class MalformedResponseError extends UpstreamError {
  override readonly code = 'upstream_malformed_response';
  override get retryable(): boolean {
    return true;
  }
}
/** A page identical to the previous one: the upstream is looping. Never retried. */
export class RepeatedPageError extends UpstreamError {
  override readonly code = 'upstream_repeated_page';
  override get retryable(): boolean {
    return false;
  }
}

/**
 * The page after the checkpoint is the page before it again: the upstream's paging does not advance
 * (a cursor that does not move). Not retried here: the stream is `stalled` after a few such attempts
 * and tried again with backoff (activities/stalls.ts).
 */
export class SamePageError extends UpstreamError {
  override readonly code = 'upstream_same_page';
  override get retryable(): boolean {
    return false;
  }
}

/**
 * An upstream async request whose results expired before they were read. Sending it again helps
 * once (a worker was down past the expiry); `final` marks the time it does not.
 */
export class AsyncRequestExpiredError extends UpstreamError {
  override readonly code = 'upstream_async_expired';
  readonly final: boolean;
  constructor(message: string, options: { final?: boolean; cause?: unknown } = {}) {
    super(message, 410, options);
    this.final = options.final ?? false;
  }
  override get retryable(): boolean {
    return !this.final;
  }
}

/**
 * The upstream refuses the account's token (confirmed by a cheap call, not one list's 401), or the
 * account is unlinked: nothing is asked of the upstream for it until a probe finds the token taken again.
 */
export class CredentialsRefusedError extends MirrorError {
  override readonly statusCode = 401;
  override readonly code = 'credentials_refused';
  override get retryable(): boolean {
    return false;
  }
}

export function isMirrorError(error: unknown): error is MirrorError {
  return error instanceof MirrorError;
}
