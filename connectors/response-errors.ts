// Maps one upstream response to the error hierarchy. The one place that classifies failures.
import {
  MalformedResponseError,
  UnsupportedFieldError,
  UpstreamAuthError,
  UpstreamError,
  UpstreamInvalidInputError,
  UpstreamNotFoundError,
  UpstreamRateLimitedError,
  UpstreamUnavailableError,
} from '../lib/errors.ts';

/** The upstream's own message: `message`, else `error`, else a short excerpt of the body. */
function upstreamMessage(body: unknown): string | undefined {
  if (body && typeof body === 'object') {
    const b = body as Record<string, unknown>;
    if (typeof b.message === 'string') return b.message;
    if (typeof b.error === 'string') return b.error;
  }
  if (typeof body === 'string' && body.trim() !== '') return body.slice(0, 200);
  return undefined;
}

export function errorForResponse(input: { status: number; body: unknown; what: string; resetAt?: number }): UpstreamError {
  const { status, what } = input;
  const said = upstreamMessage(input.body);
  const suffix = said ? `: ${said}` : '';
  if (status === 401 || status === 403) return new UpstreamAuthError(`Upstream refused the credentials for ${what} (${status})${suffix}`, status);
  if (status === 404) return new UpstreamNotFoundError(`Upstream has no ${what}${suffix}`, status);
  if (status === 429) return new UpstreamRateLimitedError(`Upstream rate limit reached for ${what}${suffix}`, input.resetAt ?? Date.now() + 60_000);
  if (status === 400 || status === 409 || status === 422) {
    if (said && /not supported|prohibited|unsupported field/i.test(said)) {
      return new UnsupportedFieldError(`Upstream does not support a field in ${what}${suffix}`, status);
    }
    return new UpstreamInvalidInputError(`Upstream rejected ${what} (${status})${suffix}`, status);
  }
  if (status === 502 || status === 503 || status === 504) return new UpstreamUnavailableError(`Upstream unavailable for ${what} (${status})${suffix}`, status);
  if (status >= 500) return new UpstreamError(`Upstream failed on ${what} (${status})${suffix}`, status);
  return new MalformedResponseError(`Unexpected upstream status ${status} for ${what}${suffix}`, status);
}
