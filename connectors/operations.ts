// The operations the rest of the project calls: list a page, get one object, link calls.
// Each is one upstream call through UpstreamClient.
import { z } from 'zod';
import type { UpstreamClient, UpstreamResponse } from './upstream-client.ts';
import { linkTokenSchema, linkedAccountSchema, listResponseSchema, unifiedObjectSchema, type LinkedAccountObject, type UnifiedObject } from './schemas.ts';

export interface AccountContext {
  accountToken: string;
  /** The mirror's account id, for the governor's budget key. */
  accountId?: string;
  sourceSystem?: string;
}

export interface ListPageInput extends AccountContext {
  /** List path, e.g. `/projects` or `/ap-invoices/{id}/line-items`. */
  path: string;
  page: number;
  perPage: number;
  projectId?: string;
  companyId?: string;
  includeSourceData?: boolean;
  filters?: readonly { field: string; operator: string; value: unknown }[];
  what?: string;
  signal?: AbortSignal;
}

export interface Page {
  items: UnifiedObject[];
  currentPage: number;
  hasMore: boolean | null;
  retrievedAt: Date;
}

function budget(ctx: AccountContext) {
  return { account: ctx.accountId, sourceSystem: ctx.sourceSystem };
}

export async function listPage(client: UpstreamClient, input: ListPageInput): Promise<Page> {
  const query = new URLSearchParams({ page: String(input.page), per_page: String(input.perPage) });
  if (input.filters && input.filters.length > 0) query.set('filters', JSON.stringify(input.filters));
  const res = await client.request(
    {
      method: 'GET',
      path: `${input.path}?${query.toString()}`,
      accountToken: input.accountToken,
      projectId: input.projectId,
      companyId: input.companyId,
      headers: input.includeSourceData ? { 'include-source-data': 'true' } : {},
      budget: budget(input),
      what: input.what ?? `${input.path} page ${input.page}`,
      signal: input.signal,
    },
    listResponseSchema,
  );
  const meta = res.body.meta;
  return {
    items: res.body.data,
    currentPage: meta?.current_page ?? input.page,
    hasMore: meta?.has_more_results ?? null,
    retrievedAt: res.retrievedAt,
  };
}

export async function getObject(
  client: UpstreamClient,
  input: AccountContext & { path: string; projectId?: string; companyId?: string; includeSourceData?: boolean; signal?: AbortSignal },
): Promise<UpstreamResponse<UnifiedObject>> {
  return client.request(
    {
      method: 'GET',
      path: input.path,
      accountToken: input.accountToken,
      projectId: input.projectId,
      companyId: input.companyId,
      headers: input.includeSourceData ? { 'include-source-data': 'true' } : {},
      budget: budget(input),
      signal: input.signal,
    },
    unifiedObjectSchema,
  );
}

export async function createLinkToken(client: UpstreamClient, referenceId: string): Promise<string> {
  const res = await client.request({ method: 'POST', path: '/link/token/create', body: { reference_id: referenceId }, what: 'link token' }, linkTokenSchema);
  return res.body.link_token;
}

export async function exchangePublicToken(client: UpstreamClient, publicToken: string): Promise<LinkedAccountObject> {
  const res = await client.request(
    { method: 'POST', path: '/link/token/exchange', body: { public_token: publicToken }, what: 'token exchange' },
    linkedAccountSchema,
  );
  return res.body;
}

export interface WebhookInput {
  callbackUrl: string;
  authorizationHeader: string;
  event: 'CREATE' | 'UPDATE' | 'DELETE';
  type: string;
  projectId?: string;
}

export const webhookSchema = z.looseObject({ id: z.string(), source_id: z.string().nullish(), event: z.string(), type: z.string() });

export async function createWebhook(client: UpstreamClient, ctx: AccountContext, input: WebhookInput): Promise<z.infer<typeof webhookSchema>> {
  const res = await client.request(
    {
      method: 'POST',
      path: '/webhooks',
      accountToken: ctx.accountToken,
      projectId: input.projectId,
      body: { callback_url: input.callbackUrl, authorization_header: input.authorizationHeader, event: input.event, type: input.type },
      budget: budget(ctx),
      what: `webhook ${input.event} ${input.type}`,
    },
    webhookSchema,
  );
  return res.body;
}

export async function deleteWebhook(client: UpstreamClient, ctx: AccountContext, id: string): Promise<void> {
  await client.request({ method: 'DELETE', path: `/webhooks/${encodeURIComponent(id)}`, accountToken: ctx.accountToken, budget: budget(ctx), what: `webhook ${id}` });
}
