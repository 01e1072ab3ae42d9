// A list page as a connector hands it on: the bytes the upstream sent (scanned, not parsed) or the
// records parsed, its ids, its paging meta and the digest of its body. Declared here, beneath both,
// because connectors/ makes it and mirror/ writes it; neither knows how the other treats it.

/** The records of a list page. */
export type PageRecords =
  /**
   * The body's JSON as received (after a byte order mark, inflated), whose ids and shape were
   * scanned (connectors/list-scan.ts): the worker never parses it.
   */
  | {
      bytes: Buffer;
      ids: readonly string[];
      /**
       * Where each record's `source_data` is, when every record has exactly one: per record, six
       * offsets into `bytes` (the record's start and end, the member to cut with one comma beside it,
       * and its value's).
       */
      sourceData?: readonly number[];
    }
  /** Records the worker parsed (a body the scan did not take, an async result, an event's object). */
  | { items: readonly Record<string, unknown>[] };

export interface ListPage {
  /** The records' ids, in the page's order. */
  ids: string[];
  records: PageRecords;
  currentPage: number;
  hasMore: boolean | null;
  retrievedAt: Date;
  /** SHA-256 of the body as received, when it was asked for. */
  digest?: string;
}
