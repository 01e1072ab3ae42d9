// zod schemas of the upstream's responses. Objects are loose: unknown fields are kept as they came.
import { z } from 'zod';

export const unifiedObjectSchema = z.looseObject({
  id: z.string().min(1),
  source_id: z.string().nullish(),
  source_create_time: z.string().nullish(),
  source_update_time: z.string().nullish(),
});
export type UnifiedObject = z.infer<typeof unifiedObjectSchema>;

export const pageMetaSchema = z.looseObject({
  current_page: z.number().int().nullish(),
  has_more_results: z.boolean().nullable().optional(),
});
export type PageMeta = z.infer<typeof pageMetaSchema>;

/** A list answer: `{data, meta}`, or (as in the contract's quick start) a bare array. */
export const listResponseSchema = z.union([
  z.looseObject({ data: z.array(unifiedObjectSchema), meta: pageMetaSchema.optional() }),
  z.array(unifiedObjectSchema).transform((data) => ({ data, meta: undefined })),
]);
export type ListResponse = z.infer<typeof listResponseSchema>;

export const linkTokenSchema = z.looseObject({ link_token: z.string().min(1) });

export const linkedAccountSchema = z.looseObject({
  reference_id: z.string(),
  account_token: z.string().min(1),
  status: z.string(),
  source_system: z.looseObject({ slug: z.string().min(1), name: z.string() }),
  linked_company: z.looseObject({ id: z.string().nullish(), source_id: z.string().nullish(), name: z.string().nullish() }).nullish(),
  linked_user: z.looseObject({ id: z.string().nullish(), source_id: z.string().nullish(), name: z.string().nullish(), email: z.string().nullish() }).nullish(),
});
export type LinkedAccountObject = z.infer<typeof linkedAccountSchema>;
