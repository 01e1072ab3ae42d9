// The paging rule of the contract (part 8): `has_more_results` true -> next page, false -> stop,
// null (unknown) -> go on while pages come back full. A page identical to the previous one means
// the upstream is looping: that is a loud, non-retryable error, never an endless loop.
import { createHash } from 'node:crypto';

export type PageVerdict = 'next' | 'stop';

export function pageVerdict(input: { hasMore: boolean | null | undefined; received: number; perPage: number }): PageVerdict {
  if (input.hasMore === true) return input.received === 0 ? 'stop' : 'next';
  if (input.hasMore === false) return 'stop';
  return input.received >= input.perPage && input.received > 0 ? 'next' : 'stop';
}

/** A fingerprint of a page's contents (ids in order), to detect an upstream that repeats a page. */
export function pageFingerprint(items: readonly { id?: unknown }[]): string | null {
  if (items.length === 0) return null;
  const hash = createHash('sha1');
  for (const item of items) hash.update(String(item.id)).update('\0');
  return hash.digest('hex');
}
