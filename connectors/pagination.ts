// The paging rule of the contract (part 8): `has_more_results` true -> next page, false -> stop,
// null (unknown) -> go on while pages come back full. A page identical to the previous one means
// the upstream is looping: that is a loud, non-retryable error, never an endless loop.
// One guard on top: `false` on a *full* page is confirmed by asking for the next page. A wrong
// `false` there would end a full pass early, and the pass would then take every record it did not
// reach for deleted; the price of the guard is one request for a stream whose last page is exactly full.
import { createHash } from 'node:crypto';

/** `confirm`: the upstream said no more on a full page; fetch the next one to be sure. */
export type PageVerdict = 'next' | 'stop' | 'confirm';

export function pageVerdict(input: { hasMore: boolean | null | undefined; received: number; perPage: number }): PageVerdict {
  if (input.hasMore === true) return input.received === 0 ? 'stop' : 'next';
  if (input.hasMore === false) return input.received > 0 && input.received >= input.perPage ? 'confirm' : 'stop';
  return input.received >= input.perPage && input.received > 0 ? 'next' : 'stop';
}

/** A fingerprint of a page's contents (its ids in order), to detect an upstream that repeats a page. */
export function pageFingerprint(ids: readonly string[]): string | null {
  if (ids.length === 0) return null;
  // Each id followed by a NUL, hashed in one call.
  return createHash('sha1')
    .update(`${ids.join('\0')}\0`)
    .digest('hex');
}
