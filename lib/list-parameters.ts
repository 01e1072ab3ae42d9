// The read surface of a list that the sandbox and the mirror's read API both evaluate, as data: the
// query parameters that mean "field equals value" per resource, the filter operators and limits,
// and how a filter's time value is read. Both sides import this one table, so neither can grow a
// parameter the other does not know.

/**
 * Query parameters that mean "the record's field of that name equals the value" (compared as text,
 * like a filter `=` with a string value), per resource.
 *
 * Taken from the real service's request collection (`query_params` per collection path) for the
 * resources the sandbox serves, and kept only where the record carries the field:
 * - `/activities?type=` (activities have `type`);
 * - `/drawings?discipline=` (drawings have `discipline`). The collection also sends
 *   `drawing_area_id` to `/drawings`, but no drawing record carries a drawing area: what the real
 *   service matches it against is not ours to guess, so it is left out (the mirror forwards it).
 * `status` is not here: the collection sends it only to `/ledger-journal-entries`, which neither
 * side serves, and nothing shows the real service reads `?status=` on projects, jobs or the other
 * resources whose records have a status; an equality the mirror assumed would answer a filtered
 * list where the real service answers the whole one. `expand` changes the answer's shape, not
 * which records it holds: never an equality.
 */
const equalityParameters: Readonly<Record<string, readonly string[]>> = {
  activities: ['type'],
  drawings: ['discipline'],
};

/** The equality parameters of a resource (none for most). */
export function equalityParametersOf(resource: string): readonly string[] {
  return Object.prototype.hasOwnProperty.call(equalityParameters, resource) ? equalityParameters[resource]! : [];
}

/** Parameters every list reads: paging, and the filter and order forms. */
export const listControlParameters = ['page', 'per_page', 'filters', 'filters[]', 'order_by', 'order_by[]'] as const;

/** The mirror's own list parameters (not the upstream's): the sandbox ignores them. */
export const mirrorListExtensions = ['include_deleted', 'modified_after'] as const;

export const filterOperators = ['=', '!=', '>', '>=', '<', '<=', 'LIKE', 'NOT LIKE', 'ILIKE', 'NOT ILIKE', 'IN', 'NOT IN', 'BETWEEN', 'NOT BETWEEN'] as const;
export type FilterOperator = (typeof filterOperators)[number];

export function isTimeField(field: string): boolean {
  return field === 'source_create_time' || field === 'source_update_time';
}

/** Filters in one request, all forms together. */
export const MAX_FILTERS = 20;
/** order_by keys in one request, all forms together. */
export const MAX_ORDER_KEYS = 5;

const iso = /^(\d{4})-(\d{2})-(\d{2})(?:T(\d{2}):(\d{2})(?::(\d{2})(?:[.,](\d+))?)?(Z|[+-]\d{2}(?::?\d{2})?)?)?$/i;

/**
 * The instant an ISO 8601 filter value names, in milliseconds since the epoch (a fraction keeps
 * microseconds, rounded as Postgres rounds timestamptz input), or null when it is not ISO 8601.
 * A date alone is midnight UTC, and a time without an offset is UTC: never the server's own zone.
 */
export function isoInstant(value: unknown): number | null {
  if (typeof value !== 'string') return null;
  const m = iso.exec(value.trim());
  if (!m) return null;
  const [, y, mo, d, h = '0', mi = '0', s = '0', frac = '', zone = 'Z'] = m;
  const year = Number(y);
  const month = Number(mo);
  const day = Number(d);
  const hour = Number(h);
  const minute = Number(mi);
  const second = Number(s);
  if (month < 1 || month > 12 || day < 1 || hour > 24 || minute > 59 || second > 60) return null;
  if (hour === 24 && (minute !== 0 || second !== 0 || /[1-9]/.test(frac))) return null;
  const date = new Date(0);
  date.setUTCFullYear(year, month - 1, day);
  // Day 31 of a 30-day month rolls over: refuse what is not a real date.
  if (date.getUTCDate() !== day) return null;
  let ms = date.getTime();
  ms += ((hour * 60 + minute) * 60 + second) * 1000;
  if (frac) ms += Math.round(Number(`0.${frac}`) * 1e6) / 1000;
  if (zone.toUpperCase() !== 'Z') {
    const sign = zone[0] === '-' ? -1 : 1;
    const digits = zone.slice(1).replace(':', '');
    const offHours = Number(digits.slice(0, 2));
    const offMinutes = digits.length > 2 ? Number(digits.slice(2, 4)) : 0;
    if (offHours > 23 || offMinutes > 59) return null;
    ms -= sign * (offHours * 60 + offMinutes) * 60_000;
  }
  return ms;
}
