// The operations the rest of the project calls: list a page, get one object, link calls.
// Each is one upstream call through UpstreamClient.
import { z } from 'zod';
import { AsyncRequestExpiredError, MalformedResponseError, UpstreamNotFoundError } from '../lib/errors.ts';
import { errorForResponse } from './response-errors.ts';
import type { ListPage } from '../lib/list-page.ts';
import { parseJsonBody, validBody, type AsyncRequestHandle, type UpstreamCall, type UpstreamClient, type UpstreamResponse } from './upstream-client.ts';
import { scanListBody } from './list-scan.ts';
import {
  linkTokenSchema,
  linkedAccountSchema,
  listResponseSchema,
  pageMetaSchema,
  unifiedObjectSchema,
  type LinkedAccountObject,
  type ListResponse,
  type UnifiedObject,
} from './schemas.ts';

export interface AccountContext {
  accountToken: string;
  /** The mirror's account id, for the governor's budget key. */
  accountId?: string;
  sourceSystem?: string;
}

interface ListPageInput extends AccountContext {
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

/** A list page (lib/list-page.ts): the body's bytes where they were scanned, else its parsed records. */
type Page = ListPage;

function budget(ctx: AccountContext) {
  return { account: ctx.accountId, sourceSystem: ctx.sourceSystem };
}

export async function listPage(client: UpstreamClient, input: ListPageInput): Promise<Page> {
  const res = await client.request(listCall(input), listResponseSchema);
  return pageOf(res.body, input.page, res.retrievedAt);
}

/**
 * A list page, the handle of the async request that will produce it, or word that the page's body is
 * byte for byte the one whose digest the caller gave (`unchanged`: not parsed).
 */
export type PageOrPending =
  | { page: Page; pending?: undefined; unchanged?: undefined }
  | { pending: AsyncRequestHandle; page?: undefined; unchanged?: undefined }
  | { unchanged: { digest: string; retrievedAt: Date }; page?: undefined; pending?: undefined };

/**
 * A list page through an async request when `preferAsync` (slow source systems), and whenever the
 * upstream answers 202 on its own: the caller polls the handle (see {@link pollListPage}).
 */
export async function startListPage(
  client: UpstreamClient,
  input: ListPageInput & {
    preferAsync?: boolean;
    /** Digest the page's body; when it equals `unless`, answer `unchanged` without parsing it. */
    digest?: { unless?: string };
    /** The caller needs the records as objects (a list across projects): parse the body, not only scan it. */
    parse?: boolean;
  },
): Promise<PageOrPending> {
  const call = listCall(input);
  const res = await client.request<Buffer>({
    ...call,
    async: input.preferAsync ? 'send' : 'accept',
    bytes: true,
    ...(input.digest ? { digest: input.digest } : {}),
  });
  if ('handle' in res) return { pending: res.handle };
  if (res.unchanged) return { unchanged: { digest: res.digest, retrievedAt: res.retrievedAt } };
  const page = listPageOf(res.body, input.page, res.retrievedAt, call.what!, res.status, input.parse ?? false);
  return { page: { ...page, ...(res.digest !== undefined ? { digest: res.digest } : {}) } };
}

/**
 * Reads the async request of a list page: still pending, or the page. A request that failed
 * upstream throws the error its stored answer maps to; expired results throw
 * {@link AsyncRequestExpiredError} (retryable: sending the request again helps).
 */
export async function pollListPage(
  client: UpstreamClient,
  input: AccountContext & { id: string; page: number; what?: string; signal?: AbortSignal },
): Promise<PageOrPending> {
  const what = input.what ?? `page ${input.page}`;
  const res = await client
    .request({
      method: 'GET',
      path: `/async-requests/${encodeURIComponent(input.id)}`,
      accountToken: input.accountToken,
      budget: budget(input),
      what: `async request ${input.id} (${what})`,
      signal: input.signal,
      async: 'poll',
    })
    .catch((error: unknown) => {
      // The poll itself found nothing: an id the upstream issued and no longer knows has expired
      // (some upstreams forget expired requests rather than answer 410).
      if (error instanceof UpstreamNotFoundError) {
        throw new AsyncRequestExpiredError(
          `The results of async request ${input.id} (${what}) expired before they were read (the upstream no longer knows it)`,
          { cause: error },
        );
      }
      throw error;
    });
  if (!('handle' in res))
    throw new MalformedResponseError(`Upstream answered the poll of async request ${input.id} (${what}) without its state headers`, res.status);
  const { handle } = res;
  if (res.status === 410) throw new AsyncRequestExpiredError(`The results of async request ${input.id} (${what}) expired before they were read`);
  if (res.status === 202 || handle.state === 'pending' || handle.state === 'running') return { pending: handle };
  if (handle.state === 'failure' || res.status >= 400) {
    const error = errorForResponse({ status: res.status, body: res.body, what: `${what} (async request ${input.id})`, resetAt: Date.now() + 60_000 });
    throw error;
  }
  const parsed = listResponseSchema.safeParse(res.body);
  if (!parsed.success)
    throw new MalformedResponseError(`Upstream's async result for ${what} is not a list page: ${parsed.error.issues[0]?.message ?? 'bad shape'}`, res.status);
  return { page: pageOf(parsed.data, input.page, res.retrievedAt) };
}

function listCall(input: ListPageInput): UpstreamCall & { async?: undefined; digest?: undefined } {
  const query = new URLSearchParams({ page: String(input.page), per_page: String(input.perPage) });
  if (input.filters && input.filters.length > 0) query.set('filters', JSON.stringify(input.filters));
  return {
    method: 'GET',
    path: `${input.path}?${query.toString()}`,
    accountToken: input.accountToken,
    projectId: input.projectId,
    companyId: input.companyId,
    headers: input.includeSourceData ? { 'include-source-data': 'true' } : {},
    budget: budget(input),
    what: input.what ?? `${input.path} page ${input.page}`,
    signal: input.signal,
  };
}

function pageOf(body: ListResponse, page: number, retrievedAt: Date): ListPage {
  const meta = body.meta;
  return {
    ids: body.data.map((o) => o.id),
    records: { items: body.data },
    currentPage: meta?.current_page ?? page,
    hasMore: meta?.has_more_results ?? null,
    retrievedAt,
  };
}

/**
 * A list answer's page from its bytes: scanned for its ids and meta where the scan takes it (the
 * bytes then go on as they came), else parsed and validated the ordinary way, which accepts the
 * body or says precisely what is wrong with it.
 */
function listPageOf(raw: Buffer, page: number, retrievedAt: Date, what: string, status: number, parse: boolean): ListPage {
  const list = parse ? undefined : scanListBody(raw);
  if (!list) return pageOf(validBody(parseJsonBody(raw, what, status), listResponseSchema, what, status), page, retrievedAt);
  const { ids, meta, start, sourceData } = list;
  // The scan's offsets count from the first byte received; the page's bytes start after a byte order mark.
  const offsets = sourceData && (start === 0 ? sourceData : sourceData.map((at) => at - start));
  const bytes = start === 0 ? raw : raw.subarray(start);
  return {
    ids,
    records: { bytes, ids, ...(offsets && { sourceData: offsets }) },
    currentPage: meta?.current_page ?? page,
    hasMore: meta?.has_more_results ?? null,
    retrievedAt,
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

interface WebhookInput {
  callbackUrl: string;
  authorizationHeader: string;
  event: 'CREATE' | 'UPDATE' | 'DELETE';
  type: string;
  projectId?: string;
}

const webhookSchema = z.looseObject({ id: z.string(), source_id: z.string().nullish(), event: z.string(), type: z.string() });

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

const webhookPageSchema = z.union([
  z.looseObject({ data: z.array(webhookSchema), meta: pageMetaSchema.optional() }),
  z.array(webhookSchema).transform((data) => ({ data, meta: undefined })),
]);

/** Pages of the upstream's webhook list read at most (far above any account's registrations at 1000 a page). */
const maxWebhookPages = 100;

/**
 * The webhooks the upstream holds for the account (every page, until it says no more results or a
 * page comes back empty), or undefined where the upstream does not list them (a 404: a source system
 * without webhooks, or no list endpoint), so the caller cannot check them.
 */
export async function listWebhooks(client: UpstreamClient, ctx: AccountContext): Promise<z.infer<typeof webhookSchema>[] | undefined> {
  const out: z.infer<typeof webhookSchema>[] = [];
  for (let page = 1; page <= maxWebhookPages; page++) {
    let res: UpstreamResponse<z.infer<typeof webhookPageSchema>>;
    try {
      res = await client.request(
        { method: 'GET', path: `/webhooks?page=${page}&per_page=1000`, accountToken: ctx.accountToken, budget: budget(ctx), what: `webhooks page ${page}` },
        webhookPageSchema,
      );
    } catch (error) {
      if (error instanceof UpstreamNotFoundError) return undefined;
      throw error;
    }
    out.push(...res.body.data);
    if (res.body.data.length === 0 || res.body.meta?.has_more_results === false || res.body.meta === undefined) return out;
  }
  // More pages than read: the list is not known whole, so nothing may be taken as missing from it.
  return undefined;
}

export async function deleteWebhook(client: UpstreamClient, ctx: AccountContext, id: string): Promise<void> {
  await client.request({
    method: 'DELETE',
    path: `/webhooks/${encodeURIComponent(id)}`,
    accountToken: ctx.accountToken,
    budget: budget(ctx),
    what: `webhook ${id}`,
  });
}
