// `page` and `per_page` as upstream reads them: page from 1, per_page 1..1000 capped to what the
// source system serves, its own default when absent.
import { BadRequestError } from '../../lib/errors.ts';
import type { SourceSystemProfile } from '../source-systems/profiles.ts';

interface PageRequest {
  page: number;
  perPage: number;
  offset: number;
}

function integer(raw: unknown, name: string): number | undefined {
  if (raw === undefined || raw === '') return undefined;
  const s = String(Array.isArray(raw) ? raw[0] : raw);
  if (!/^-?\d+$/.test(s)) throw new BadRequestError(`${name} must be an integer`);
  return Number(s);
}

export function parsePage(query: Record<string, unknown>, profile: SourceSystemProfile): PageRequest {
  const page = integer(query.page, 'page') ?? 1;
  if (page < 1) throw new BadRequestError('page must be 1 or more');
  const asked = integer(query.per_page, 'per_page');
  if (asked !== undefined && (asked < 1 || asked > 1000)) throw new BadRequestError('per_page must be between 1 and 1000');
  const perPage = Math.min(asked ?? profile.defaultPerPage, profile.maxPerPage);
  return { page, perPage, offset: (page - 1) * perPage };
}

export function pageMeta(profile: SourceSystemProfile, req: PageRequest, returned: number, total: number) {
  return {
    current_page: req.page,
    has_more_results: profile.hasMoreResults === 'null' ? null : req.offset + returned < total,
  };
}
