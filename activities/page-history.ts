// The pages a pass has seen, each by the fingerprint of its ids (connectors/pagination.ts): a page
// that repeats ANY earlier page of the pass means the upstream's paging loops (1, 2, 1, 2, ...,
// which comparing each page with the one before it never notices), and the pass stops there. One
// Map lookup a page. Empty pages have no fingerprint: an upstream may well send several.

/** Characters of a fingerprint kept: 64 bits, collision-free in practice for any pass's pages. */
const keyLength = 16;

export class PageHistory {
  readonly #first = new Map<string, number>();

  /** A history of fingerprints in page order (`''` for a page without one), page 1 first. */
  static of(fingerprints: readonly string[]): PageHistory {
    const history = new PageHistory();
    fingerprints.forEach((f, i) => history.see(f === '' ? null : f, i + 1));
    return history;
  }

  /** Notes `page`'s fingerprint; returns the earlier page of the pass it repeats, if it repeats one. */
  see(fingerprint: string | null, page: number): number | undefined {
    if (fingerprint === null) return undefined;
    const key = fingerprint.slice(0, keyLength);
    const first = this.#first.get(key);
    // The same page number again is the same page fetched again (a retried slice), not a repeat.
    if (first !== undefined && first < page) return first;
    this.#first.set(key, page);
    return undefined;
  }

  /** Forgets pages from `page` on: fetched by a slice that stopped before it committed them. */
  forgetFrom(page: number): void {
    for (const [key, p] of this.#first) if (p >= page) this.#first.delete(key);
  }

  /** Pages with a fingerprint noted. */
  get size(): number {
    return this.#first.size;
  }
}

/** The stored form of a fingerprint (in a checkpoint): its first 64 bits, `''` for none. */
export function storedFingerprint(fingerprint: string | null): string {
  return fingerprint === null ? '' : fingerprint.slice(0, keyLength);
}
