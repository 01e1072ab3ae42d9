// Reads what the sync needs of a list page's body without parsing it into objects: the ids of its
// records, in order, and its meta (has_more_results, current_page). The body then goes to Postgres
// as the bytes that came (mirror/records/page-encoding.ts), which parses it once, in C; where every record
// has source data, the scan also notes where it is, so that the same bytes can go cut into records
// and their source data (page-encoding's `splitSourceData`). Parsing a 1000-record page in the
// worker (decode, JSON.parse, validation, serialising again) cost more CPU than the rest of the
// worker's work on it, and its garbage was most of the worker's memory.
//
// It walks the structure, jumping over strings with indexOf (keys and ids, short, are walked), and
// checks what the schema of a list answer (connectors/schemas.ts) checks of each record: an object
// with a non-empty string `id`, `source_id` and the source times strings or null. Anything else
// (another shape, an escaped id, a value of another type, bytes after the end) returns undefined:
// the caller then parses the body the ordinary way, which accepts it or says precisely what is
// wrong. It does not check JSON's grammar in full: Postgres does, when it parses the body.
import { pageMetaSchema, type PageMeta } from './schemas.ts';

interface ScannedList {
  /** The records' ids, in the body's order. */
  ids: string[];
  meta: PageMeta | undefined;
  /** Where the JSON text starts (3 after a UTF-8 byte order mark). */
  start: number;
  /**
   * Where each record's `source_data` is, when every record has exactly one (mirror/records/page-encoding.ts
   * cuts the body there): per record, six offsets into the body: the record's start and end, the
   * bytes to cut for the record without it (the member and one comma beside it), and its value's.
   */
  sourceData: number[] | undefined;
}

const QUOTE = 0x22;
const BACKSLASH = 0x5c;
const COLON = 0x3a;
const COMMA = 0x2c;
const OPEN_OBJECT = 0x7b;
const CLOSE_OBJECT = 0x7d;
const OPEN_ARRAY = 0x5b;
const CLOSE_ARRAY = 0x5d;

// The keys the scan looks at, compared as bytes (no string is made of any other key).
const enum Key {
  Other,
  Id,
  SourceId,
  SourceTime,
  Data,
  Meta,
  SourceData,
}
const keys: [Buffer, Key][] = [
  [Buffer.from('id'), Key.Id],
  [Buffer.from('source_id'), Key.SourceId],
  [Buffer.from('source_create_time'), Key.SourceTime],
  [Buffer.from('source_update_time'), Key.SourceTime],
  [Buffer.from('data'), Key.Data],
  [Buffer.from('meta'), Key.Meta],
  [Buffer.from('source_data'), Key.SourceData],
];
/**
 * The keys by their length: most keys of a record have a length none of ours has, and are told
 * apart without a byte compared (the scan meets some 15 keys a record).
 */
const keysByLength: ([Buffer, Key][] | undefined)[] = [];
for (const entry of keys) (keysByLength[entry[0].length] ??= []).push(entry);

const dateTime = Buffer.from('0000-00-00T00:00:00');
const offset = Buffer.from('00:00');
const isDigit = (c: number | undefined): boolean => c !== undefined && c >= 0x30 && c <= 0x39;

class Unsupported extends Error {}
const unsupported = (): never => {
  throw new Unsupported();
};

export function scanListBody(raw: Buffer): ScannedList | undefined {
  try {
    return new Scanner(raw).list();
  } catch (error) {
    if (error instanceof Unsupported) return undefined;
    throw error;
  }
}

class Scanner {
  private pos: number;
  private readonly start: number;

  constructor(private readonly raw: Buffer) {
    this.start = raw[0] === 0xef && raw[1] === 0xbb && raw[2] === 0xbf ? 3 : 0;
    this.pos = this.start;
  }

  list(): ScannedList {
    const first = this.peek();
    let ids: string[] = [];
    let meta: PageMeta | undefined;
    if (first === OPEN_ARRAY) {
      ids = this.records();
    } else if (first === OPEN_OBJECT) {
      let sawData = false;
      this.pos++;
      this.members((key) => {
        if (key === Key.Data) {
          if (sawData || this.peek() !== OPEN_ARRAY) unsupported();
          sawData = true;
          ids = this.records();
        } else if (key === Key.Meta) {
          const from = this.pos;
          this.skipValue();
          let value: unknown;
          try {
            value = JSON.parse(this.raw.toString('utf8', from, this.pos));
          } catch {
            unsupported();
          }
          const parsed = pageMetaSchema.safeParse(value);
          if (!parsed.success) unsupported();
          meta = parsed.data;
        } else {
          this.skipValue();
        }
      });
      if (!sawData) unsupported();
    } else {
      unsupported();
    }
    if (this.peekOrEnd() !== -1) unsupported();
    const sourceData = ids.length > 0 && this.sourceData.length === ids.length * 6 ? this.sourceData : undefined;
    return { ids, meta, start: this.start, sourceData };
  }

  /** An array of records (at `[`): their ids. */
  private records(): string[] {
    const ids: string[] = [];
    this.pos++;
    if (this.peek() === CLOSE_ARRAY) {
      this.pos++;
      return ids;
    }
    for (;;) {
      if (this.peek() !== OPEN_OBJECT) unsupported();
      const start = this.pos++;
      let id: string | undefined;
      // Where the last value ended, and this record's source_data (see `sourceData`).
      let valueEnd = -1;
      let sourceDataCount = 0;
      let sdFrom = -1;
      let sdTo = -1;
      let sdAfter = -1;
      // The record's members, read as `members` reads them but in this loop: it runs for every
      // member of every record, and a callback cost a closure a record and a call a member.
      if (this.peek() === CLOSE_OBJECT) this.pos++;
      else
        do {
          const key = this.memberKey();
          // `data` and `meta` are keys of the list, not of its records.
          if (key === Key.SourceData) {
            sdAfter = valueEnd;
            sdFrom = this.pos;
            this.skipValue();
            sdTo = this.pos;
            sourceDataCount++;
          } else if (key === Key.Other || key === Key.Data || key === Key.Meta) {
            this.skipValue();
          } else if (key === Key.Id) {
            if (id !== undefined) unsupported();
            id = this.plainString();
            if (id === '') unsupported();
          } else if (this.peek() === QUOTE) {
            // source_id: any string; a source time: ISO 8601 with a zone.
            if (key === Key.SourceTime) this.isoTime();
            else this.skipString();
          } else if (this.isNull()) {
            this.pos += 4;
          } else {
            unsupported();
          }
          valueEnd = this.pos;
        } while (!this.memberEnded());
      if (id === undefined) unsupported();
      ids.push(id!);
      if (sourceDataCount === 1 && this.sourceData.length === (ids.length - 1) * 6) this.cutSourceData(start, sdFrom, sdTo, sdAfter);
      const c = this.peek();
      this.pos++;
      if (c === CLOSE_ARRAY) return ids;
      if (c !== COMMA) unsupported();
    }
  }

  /**
   * Notes the offsets of a record's only `source_data` member (`from`-`to` its value, `after` where
   * the value before it ended, or -1 if it is the first), the record at `start` just scanned: cut
   * with the comma before it, or, first, from its key (the record's first byte after whitespace)
   * through the comma after it.
   */
  private cutSourceData(start: number, from: number, to: number, after: number): void {
    let cutFrom = after;
    let cutTo = to;
    if (cutFrom === -1) {
      cutFrom = start + 1;
      while (this.raw[cutFrom] !== QUOTE) cutFrom++;
      let p = to;
      while (p < this.pos && this.raw[p] !== COMMA && this.raw[p] !== CLOSE_OBJECT) p++;
      if (this.raw[p] === COMMA) cutTo = p + 1;
    }
    this.sourceData.push(start, this.pos, cutFrom, cutTo, from, to);
  }

  /** Offsets of each record's source_data, as {@link ScannedList.sourceData} has them. */
  private readonly sourceData: number[] = [];

  /** The members of an object whose `{` was consumed, through its `}`; `onValue` consumes each value. */
  private members(onValue: (key: Key) => void): void {
    if (this.peek() === CLOSE_OBJECT) {
      this.pos++;
      return;
    }
    do onValue(this.memberKey());
    while (!this.memberEnded());
  }

  /** A member's key and its colon (the position moves to its value): which of ours the key is. */
  private memberKey(): Key {
    const key = this.key();
    if (this.peek() !== COLON) unsupported();
    this.pos++;
    this.peek();
    return key;
  }

  /** After a member's value: its comma, or the object's `}` (then true: that was the last member). */
  private memberEnded(): boolean {
    const c = this.peek();
    this.pos++;
    if (c === CLOSE_OBJECT) return true;
    if (c !== COMMA) unsupported();
    return false;
  }

  /** A key (at its `"`): which of the keys the scan looks at, if any. */
  private key(): Key {
    const raw = this.raw;
    // An escaped key might decode to one of ours: left to JSON.parse.
    const from = this.skipPlainString();
    const candidates = keysByLength[this.pos - 1 - from];
    if (candidates === undefined) return Key.Other;
    for (let k = 0; k < candidates.length; k++) {
      const name = candidates[k]![0];
      let i = 0;
      while (i < name.length && raw[from + i] === name[i]) i++;
      if (i === name.length) return candidates[k]![1];
    }
    return Key.Other;
  }

  /**
   * A source time (at its `"`) that Postgres reads exactly as the worker's own parse does
   * (Date.parse): ISO 8601 with a zone, to the microsecond (`2024-01-02T03:04:05.123456+02:00`).
   * Others (no zone, other formats, words Postgres knows such as "today") go the parsed way.
   */
  private isoTime(): void {
    const raw = this.raw;
    let p = this.pos + 1;
    // The date and time, then fractions of a second, then the zone: Z or an offset.
    p = this.pattern(p, dateTime);
    if (raw[p] === 0x2e) {
      const from = ++p;
      while (isDigit(raw[p])) p++;
      if (p === from || p - from > 6) unsupported();
    }
    if (raw[p] === 0x5a) p++;
    else if (raw[p] === 0x2b || raw[p] === 0x2d) p = this.pattern(p + 1, offset);
    else unsupported();
    if (raw[p] !== QUOTE) unsupported();
    this.pos = p + 1;
  }

  /** Matches `pattern` (0 stands for a digit, anything else for itself) at `p`; returns the end. */
  private pattern(p: number, pattern: Buffer): number {
    for (let i = 0; i < pattern.length; i++, p++) {
      const c = pattern[i]!;
      if (c === 0x30 ? !isDigit(this.raw[p]) : this.raw[p] !== c) unsupported();
    }
    return p;
  }

  /** A string without escapes (at its `"`), decoded; one with escapes is unsupported. */
  private plainString(): string {
    const from = this.skipPlainString();
    return this.raw.toString('utf8', from, this.pos - 1);
  }

  /** Moves past a string without escapes (at its `"`); returns where its text starts. */
  private skipPlainString(): number {
    if (this.peek() !== QUOTE) unsupported();
    // Keys and ids are short: walked in one pass for the quote and any backslash.
    const raw = this.raw;
    const from = this.pos + 1;
    let end = from;
    for (let c = raw[end]; c !== QUOTE; c = raw[++end]) if (c === BACKSLASH || c === undefined) unsupported();
    this.pos = end + 1;
    return from;
  }

  /** Moves past a string (at its `"`), escapes and all. */
  private skipString(): void {
    this.pos = this.stringEnd(this.pos);
  }

  /** Where the string at `p` (its `"`) ends: just after its closing quote. */
  private stringEnd(p: number): number {
    const raw = this.raw;
    let end = p;
    for (;;) {
      end = raw.indexOf(QUOTE, end + 1);
      if (end === -1) unsupported();
      let backslashes = 0;
      while (raw[end - 1 - backslashes] === BACKSLASH) backslashes++;
      if (backslashes % 2 === 0) return end + 1;
    }
  }

  /**
   * Moves past one value of any kind: a string, or a scalar, or a nested object or array. (The
   * position is a local while it walks: the walk covers most of a page's bytes.)
   */
  private skipValue(): void {
    const raw = this.raw;
    let p = this.pos;
    let depth = 0;
    for (;;) {
      const c = raw[p];
      if (c === undefined) unsupported();
      if (c === QUOTE) {
        p = this.stringEnd(p);
        if (depth === 0) break;
        continue;
      }
      if (c === OPEN_OBJECT || c === OPEN_ARRAY) {
        depth++;
      } else if (c === CLOSE_OBJECT || c === CLOSE_ARRAY) {
        if (depth === 0) break; // the end of the enclosing container: a scalar ended before it
        depth--;
        if (depth === 0) {
          p++;
          break;
        }
      } else if (depth === 0 && c === COMMA) {
        break;
      }
      p++;
    }
    this.pos = p;
  }

  private isNull(): boolean {
    const r = this.raw;
    const p = this.pos;
    return r[p] === 0x6e && r[p + 1] === 0x75 && r[p + 2] === 0x6c && r[p + 3] === 0x6c;
  }

  /** The next byte that is not whitespace (the position moves to it). */
  private peek(): number {
    const c = this.peekOrEnd();
    if (c === -1) unsupported();
    return c;
  }

  private peekOrEnd(): number {
    const raw = this.raw;
    while (this.pos < raw.length) {
      const c = raw[this.pos]!;
      if (c !== 0x20 && c !== 0x0a && c !== 0x0d && c !== 0x09) return c;
      this.pos++;
    }
    return -1;
  }
}
