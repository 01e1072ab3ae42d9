// The SQL of the read path: the object as served, and the named statements of list pages and single
// objects. Each statement's text is a pure function of its arguments, and so is its name (a table by
// a hash of its name), so two readers on one connection never name two texts alike. The texts are
// built once per reader ({@link ReadStatements}), which each reader of a pool holds.
import { createHash } from 'node:crypto';
import { allProjectsScope } from '../../lib/resources.ts';
import { positionChunk } from './record-positions.ts';

interface NamedStatement {
  name: string;
  text: string;
}

/** The object as served: `data`, with `source_data` added when asked for (columns of `alias`). */
export function objectSql(includeSourceData: boolean, alias = ''): string {
  return `${objectText(includeSourceData, alias)} AS j`;
}

/**
 * The object's JSON text (objectSql), without its column name. `source_data` goes last, where the
 * upstream puts it, spliced into the object's text before its closing brace: jsonb would sort it among
 * the keys by length (bench/json-text-cost.ts: a page of 100 with source data reads 1.15x faster
 * so than through jsonb's `||`). The other keys come in jsonb's order (docs/drop-in.md says why).
 * An object that is empty, or holds a key `source_data` of its own, is merged as before.
 */
function objectText(includeSourceData: boolean, alias = ''): string {
  const a = alias ? `${alias}.` : '';
  return includeSourceData
    ? `(CASE WHEN ${a}source_data IS NULL THEN ${a}data::text
             WHEN ${a}data ? 'source_data' OR ${a}data = '{}'::jsonb THEN (${a}data || jsonb_build_object('source_data', ${a}source_data))::text
             ELSE left(${a}data::text, -1) || ', "source_data": ' || ${a}source_data::text || '}' END)`
    : `${a}data::text`;
}

/** A short tag of a table for statement names (Postgres keeps 63 bytes of a name): its name's hash. */
const tagOf = (table: string): string => createHash('sha256').update(table).digest('hex').slice(0, 10);

const sourceTag = (includeSourceData: boolean) => (includeSourceData ? 's' : 'd');

/**
 * Lists read by OFFSET (filters, orders, several scopes, deleted records, later pages without valid
 * positions) are named statements too, by their text: values and field names are parameters, so one
 * text serves every filter of a shape, and a connection plans it once instead of on every request.
 * Planning the filter's expression was most of what a filtered page cost Postgres beyond the raw SQL's
 * (bench [11]). At most `maxListStatements` shapes are named per reader (each connection keeps the
 * plans it made); others go unnamed, planned each time.
 */
const maxListStatements = 64;

/** The statements one reader has built: each text once, and the names it gave list texts. */
export class ReadStatements {
  readonly #named = new Map<string, NamedStatement>();
  readonly #listNames = new Map<string, string>();
  /** Tables' tags (`tagOf`), each hashed once. */
  readonly #tags = new Map<string, string>();

  #tag(table: string): string {
    let tag = this.#tags.get(table);
    if (tag === undefined) this.#tags.set(table, (tag = tagOf(table)));
    return tag;
  }

  /** The statement of `name`, its text built the first time it is asked for. */
  named(name: string, build: () => string): NamedStatement {
    let statement = this.#named.get(name);
    if (statement === undefined) this.#named.set(name, (statement = { name, text: build() }));
    return statement;
  }

  /** A list read by OFFSET: named by its text's hash while fewer than `maxListStatements` are. */
  list(text: string): { text: string; name?: string } {
    let name = this.#listNames.get(text);
    if (name === undefined && this.#listNames.size < maxListStatements) {
      name = `mirror.list.${createHash('sha256').update(text).digest('hex').slice(0, 16)}`;
      this.#listNames.set(text, name);
    }
    return name === undefined ? { text } : { text, name };
  }

  /**
   * The first page of a plain list of one stream: one range scan from the start of its index, no
   * positions needed (what the raw SQL of the same page does). Named: planned once per connection.
   */
  firstPage(includeSourceData: boolean, table: string): NamedStatement {
    return this.named(
      `mirror.list-first.${sourceTag(includeSourceData)}.${this.#tag(table)}`,
      () => `SELECT ${objectSql(includeSourceData)} FROM ${table}
                   WHERE account_id = $1 AND resource = $2 AND scope = $3 AND deleted_at IS NULL
                   ORDER BY ordinal, id LIMIT $4`,
    );
  }

  /**
   * A plain page of one stream (no filter, order, deleted records or time bound) by the stream's dense
   * positions (record-positions.ts): positions [$4, $5] (the page and one more, which tells whether more
   * follow) out of the chunk rows that hold them name the page's first and last records, whose keys
   * (ordinal, id) bound one range scan of the records' (scope, ordinal) index, the read page 1 costs.
   * One statement, so the positions and the records are of one snapshot; it answers no row at all when
   * the positions are not valid in it (or of another chunk size), else a head row with `live` (the
   * stream's live records), `expected` (how many ids the positions name for the page) and those ids (a
   * JSON array), then a row a record of the range: its id and object. Named: planned once per connection.
   *
   * A page of at most one chunk's positions (`span` 2: up to 100 records, what applications ask) joins
   * its two chunk rows and slices their arrays once (a MATERIALIZED CTE: inlined, the slices were made
   * again for every record compared); a longer page aggregates the slices of all its chunks. The rows
   * come in the range scan's order: no sort of the page's objects at the end (it was a sixth of the
   * statement's time); the caller checks them against the ids, in order.
   */
  positioned(includeSourceData: boolean, table: string, span: 'two' | 'many'): NamedStatement {
    return this.named(`mirror.list-positioned.${sourceTag(includeSourceData)}.${span}.${this.#tag(table)}`, () =>
      positionedText(includeSourceData, table, span),
    );
  }

  /**
   * A plain page of one stream by positions the process holds (position-cache.ts): the range of the
   * records' (scope, ordinal) index between the page's first and last keys ($4, $6 and $5, $7), at most
   * $10 records, each one text (its object, U+0001, its id: one column, as page 1 reads), read only where
   * the stream's positions are still the ones held ($8, computed at $9) in the statement's own snapshot (a
   * one-time test of the set row: no row read otherwise). The range is the read page 1 costs; the caller
   * checks the ids against the positions' (CachedChunk.objectsOf).
   */
  cachedPage(includeSourceData: boolean, table: string): NamedStatement {
    return this.named(
      `mirror.list-cached.${sourceTag(includeSourceData)}.${this.#tag(table)}`,
      () => `SELECT ${objectText(includeSourceData, 'r')} || chr(1) || r.id AS j
                    FROM ${table} r
                   WHERE r.account_id = $1 AND r.resource = $2 AND r.scope = $3 AND r.deleted_at IS NULL
                     AND r.ordinal BETWEEN $4::bigint AND $5::bigint
                     AND (r.ordinal > $4::bigint OR r.id >= $6::text) AND (r.ordinal < $5::bigint OR r.id <= $7::text)
                     AND EXISTS (SELECT FROM record_position_sets s
                                  WHERE s.account_id = $1 AND s.resource = $2 AND s.scope = $3 AND s.chunk_size = ${positionChunk}
                                    AND s.version = $8::bigint AND s.valid_version = $8::bigint AND s.computed_at = $9::timestamptz)
                   ORDER BY r.ordinal, r.id LIMIT $10::int`,
    );
  }

  /**
   * A plain page of a list across projects (`Project-Id: *`) by its positions (record-positions.ts: the
   * upstream's order across projects as its last full pass left it): the ids of positions [$3, $4] (the
   * page and one more) out of their chunk rows, and each one's record by primary key. One statement, so
   * the positions and the records are of one snapshot; no row at all where the positions are not valid in
   * it, else a head row (position -1) with the list's live records, then a row a position: its record's
   * object and scope (null where the record is not there: the positions do not hold). Named.
   */
  acrossPage(includeSourceData: boolean, table: string): NamedStatement {
    return this.named(`mirror.list-across.${sourceTag(includeSourceData)}.${this.#tag(table)}`, () => acrossText(includeSourceData, table));
  }

  /**
   * One record by id (or source id) in one scope, several, or all: parsed and planned once per
   * connection (8 variants at most).
   */
  get(q: { includeSourceData: boolean; bySourceId: boolean; scopes: 'one' | 'several' | 'all' }): NamedStatement {
    const single = q.scopes === 'one';
    const name = `mirror.get.${sourceTag(q.includeSourceData)}${q.bySourceId ? 's' : 'i'}${single ? '1' : q.scopes === 'all' ? 'a' : 'n'}`;
    return this.named(
      name,
      () => `SELECT ${objectSql(q.includeSourceData, 'r')}, r.scope, r.mirrored_at AS m
              FROM records r
             WHERE r.account_id = $1 AND r.resource = $2 AND ${q.bySourceId ? 'r.source_id' : 'r.id'} = $3
               AND r.deleted_at IS NULL ${single ? 'AND r.scope = $4' : q.scopes === 'all' ? '' : 'AND r.scope = ANY($4::text[])'}
             ${single ? '' : 'ORDER BY r.scope '}LIMIT 1`,
    );
  }
}

function positionedText(includeSourceData: boolean, table: string, span: 'two' | 'many'): string {
  const c = positionChunk;
  const key = (alias: string) => `${alias}.account_id = $1 AND ${alias}.resource = $2 AND ${alias}.scope = $3`;
  // The last position the page holds: $5, or the list's last.
  const last = `least($5::int, s.live - 1)`;
  const positions =
    span === 'two'
      ? // Past the list's end no chunk joins: the page is empty (expected 0), not a miss.
        `SELECT a.ids[$4::int % ${c} + 1 : CASE WHEN ${last} / ${c} > $4::int / ${c} THEN ${c} ELSE ${last} % ${c} + 1 END]
                    || coalesce(b.ids[1 : ${last} % ${c} + 1], '{}') AS ids,
                  a.ordinals[$4::int % ${c} + 1] AS o1,
                  CASE WHEN b.chunk IS NULL THEN a.ordinals[${last} % ${c} + 1] ELSE b.ordinals[${last} % ${c} + 1] END AS o2
             FROM s LEFT JOIN record_position_chunks a ON ${key('a')} AND a.chunk = $4::int / ${c}
             LEFT JOIN record_position_chunks b ON ${key('b')} AND b.chunk = ${last} / ${c} AND ${last} / ${c} > $4::int / ${c}`
      : `SELECT array_agg(u.id ORDER BY c.chunk, u.n) AS ids,
                  (array_agg(u.ordinal ORDER BY c.chunk, u.n))[1] AS o1,
                  (array_agg(u.ordinal ORDER BY c.chunk DESC, u.n DESC))[1] AS o2
             FROM s, record_position_chunks c,
                  unnest(c.ids[greatest($4::int - c.chunk * ${c}, 0) + 1 : least($5::int - c.chunk * ${c}, ${c - 1}) + 1],
                         c.ordinals[greatest($4::int - c.chunk * ${c}, 0) + 1 : least($5::int - c.chunk * ${c}, ${c - 1}) + 1]) WITH ORDINALITY AS u(id, ordinal, n)
            WHERE ${key('c')} AND c.chunk BETWEEN $4::int / ${c} AND $5::int / ${c}`;
  return `
      WITH s AS MATERIALIZED (
        SELECT live FROM record_position_sets
         WHERE account_id = $1 AND resource = $2 AND scope = $3 AND valid_version = version AND chunk_size = ${c}
      ), p AS MATERIALIZED (${positions})
      -- A head row with the counts and the ids the positions name (one JSON text), then each record's
      -- id and object: the reader checks the two lists equal, in order. Checked here, a record at a
      -- time (p.ids[n] walks a text array from its start, so a page cost a hundred walks), the check
      -- was a sixth of a random page's time in Postgres.
      SELECT s.live, coalesce(cardinality(p.ids), 0) AS expected, to_json(p.ids)::text AS id, NULL::text AS j FROM s CROSS JOIN p
      UNION ALL
      -- Bounded on both sides, so whatever plan is taken, it reads the page's range and no further.
      SELECT NULL, NULL, x.id, x.j FROM s CROSS JOIN p CROSS JOIN LATERAL (
        SELECT r.id, ${objectSql(includeSourceData, 'r')}
          FROM ${table} r
         WHERE ${key('r')} AND r.deleted_at IS NULL
           AND r.ordinal BETWEEN p.o1 AND p.o2
           AND (r.ordinal > p.o1 OR r.id >= p.ids[1]) AND (r.ordinal < p.o2 OR r.id <= p.ids[cardinality(p.ids)])
         ORDER BY r.ordinal, r.id LIMIT $5::int - $4::int + 1) x`;
}

function acrossText(includeSourceData: boolean, table: string): string {
  const c = positionChunk;
  return `
      WITH s AS MATERIALIZED (
        SELECT live FROM record_position_sets
         WHERE account_id = $1 AND resource = $2 AND scope = '${allProjectsScope}' AND valid_version = version AND chunk_size = ${c}
      ), p AS MATERIALIZED (
        SELECT u.key, (c.chunk * ${c} + u.n - 1)::int AS pos
          FROM s, record_position_chunks c, unnest(c.ids) WITH ORDINALITY AS u(key, n)
         WHERE c.account_id = $1 AND c.resource = $2 AND c.scope = '${allProjectsScope}' AND c.chunk BETWEEN $3::int / ${c} AND $4::int / ${c}
      )
      SELECT -1 AS pos, s.live, NULL::text AS j, NULL::text AS scope FROM s
      UNION ALL
      SELECT p.pos, NULL, ${objectText(includeSourceData, 'r')}, r.scope
        FROM p LEFT JOIN ${table} r
          ON r.account_id = $1 AND r.resource = $2 AND r.scope = split_part(p.key, '|', 1)
         AND r.id = substr(p.key, strpos(p.key, '|') + 1) AND r.deleted_at IS NULL
       WHERE p.pos BETWEEN $3::int AND $4::int
      ORDER BY 1`;
}
