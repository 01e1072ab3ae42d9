// What the mirror knows about one source system behind the upstream: which resources it serves,
// how large its pages may be, whether it filters on source_update_time, its webhooks and limits.
import { z } from 'zod';

const resourceSupportSchema = z.object({
  /** Where the resource lives in this source system (the catalog's default otherwise): cost codes are per project in one, per account in another. */
  scope: z.enum(['account', 'project']).optional(),
  /** Largest `per_page` the source system honours for this resource (else the profile's). */
  maxPerPage: z.number().int().min(1).max(1000).optional(),
  /** Whether list filters on `source_update_time` work (incremental passes). */
  updateTimeFilter: z.boolean().optional(),
  /**
   * Project-scoped resources: whether lists take `Project-Id: *` (one list of every project's records,
   * each with its project_id). Unset: learned from the upstream (mirror/streams/cross-project.ts).
   */
  crossProject: z.boolean().optional(),
});

export const sourceSystemProfileSchema = z.object({
  slug: z.string(),
  name: z.string(),
  kind: z.enum(['construction', 'documents', 'erp', 'accounting', 'crm', 'field-service', 'unknown']),
  defaultPerPage: z.number().int().min(1).max(1000),
  maxPerPage: z.number().int().min(1).max(1000),
  resources: z.record(z.string(), resourceSupportSchema),
  /** Requests it serves at once per account (1 for on-premises systems that serve one at a time). */
  concurrency: z.number().int().min(1),
  /** Published request budget, for documentation and the governor's first guess. */
  requestsPerMinute: z.number().positive().optional(),
  webhookTypes: z.array(z.string()).default([]),
  passthrough: z.enum(['json', 'xml', 'sql', 'graphql']).default('json'),
  /** Slow systems whose reads go through async requests. */
  preferAsync: z.boolean().default(false),
});
export type SourceSystemProfile = z.infer<typeof sourceSystemProfileSchema>;

export function perPageFor(profile: SourceSystemProfile, resource: string): number {
  return profile.resources[resource]?.maxPerPage ?? profile.maxPerPage;
}

/** The scope kind of a resource in a source system: the profile's word, else the catalog's. */
export function scopeKindIn(
  profile: SourceSystemProfile | undefined,
  resource: string,
  catalogDefault: 'account' | 'project' | 'child',
): 'account' | 'project' | 'child' {
  if (catalogDefault === 'child') return 'child';
  return profile?.resources[resource]?.scope ?? catalogDefault;
}
