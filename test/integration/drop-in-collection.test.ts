// The drop-in rule, driven by the real service's own request collection: for every collection path
// it lists with a list operation, and for every read form an application written against the real
// service sends (plain, paging, each resource parameter the collection names, filters as a JSON
// array, as repeated `filters[]` and as a JSON body on the GET, `order_by`, a `source_data.<key>`
// filter, a parameter and a header the mirror does not know), the mirror's answer equals the
// sandbox's: served from the mirror where it can be exactly that, forwarded otherwise. Never a
// silently different answer. Prints how many of each were served and forwarded.
import assert from 'node:assert/strict';
import { existsSync, readFileSync } from 'node:fs';
import { after, before, describe, it } from 'node:test';
import { request } from 'undici';
import { resourceDef, resources, type ResourceDef } from '../../lib/resources.ts';
import { realServiceCollections } from '../../lib/upstream-surface.ts';
import { firstProjectId, linkAndSync, startHarness, type Harness } from '../helpers/harness.ts';

type Json = Record<string, unknown>;

/**
 * Facts: the query parameters the real service's collection sends on its list and item requests
 * (`query_params` of ../shared/reference/real-service-collections.json, paging aside). Checked
 * against that file below when it is at hand.
 */
const collectionParameters: Readonly<Record<string, readonly string[]>> = {
  '/activities': ['type'],
  '/ap-payments/{id}/line-items': ['contract_id', 'contract_type'],
  '/budget-transfers': ['expand'],
  '/cache/repopulate': ['type'],
  '/cache/repopulate/latest': ['type'],
  '/change-orders': ['contract_type'],
  '/departments': ['type'],
  '/drawings': ['discipline', 'drawing_area_id'],
  '/items': ['type'],
  '/ledger-journal-entries': ['expand', 'status'],
  '/rfis': ['expand'],
  '/subcontract-claims': ['expand'],
  '/subcontracts/{id}/line-items': ['sub'],
};

/** The catalog resource a collection path is, if the mirror holds it. */
function catalogResource(path: string): ResourceDef | undefined {
  // A folder's files: the files of the catalog, listed through their folder.
  if (path === '/folders/{id}/files') return resourceDef('files');
  for (const def of resources) {
    const full = def.scope === 'child' ? `${resourceDef(def.parent!)!.path}/{id}/${def.path}` : def.path;
    if (full === path) return def;
  }
  return undefined;
}

interface Answer {
  status: number;
  text: string;
  warnings: string;
}

/** URL fields by presence: the mirror serves them as its storage proxy's signed links (SECURITY.md). */
function comparable(text: string, def: ResourceDef | undefined): unknown {
  let body: unknown;
  try {
    body = JSON.parse(text);
  } catch {
    return text;
  }
  const urls = new Set(def?.urlFields ?? []);
  const strip = (v: unknown): unknown => {
    if (Array.isArray(v)) return v.map(strip);
    if (typeof v !== 'object' || v === null) return v;
    return Object.fromEntries(Object.entries(v as Json).map(([k, x]) => [k, urls.has(k) && typeof x === 'string' && x ? '<url>' : strip(x)]));
  };
  const out = strip(body) as Json;
  // Where the upstream does not know whether more pages follow (null), the mirror says exactly.
  const meta = out.meta as { has_more_results?: unknown } | undefined;
  if (meta && 'has_more_results' in meta) meta.has_more_results = '<compared apart>';
  return out;
}

describe("drop-in: every list of the real service's collection, in every read form, answered as the upstream answers", { timeout: 900_000 }, () => {
  let h: Harness;
  const accounts: { slug: string; token: string; projectId: string }[] = [];
  const tally = { served: 0, forwarded: 0 };

  before(async () => {
    h = await startHarness({ sandbox: { size: 6 }, config: { MIRROR_RESOURCES: '*' } });
    // The two accounts are independent: their first passes run side by side (in the same order in `accounts`).
    const linked = await Promise.all(
      ['buildpro', 'graphledger'].map(async (slug) => {
        const { accountId, accountToken } = await linkAndSync(h, slug, `collection-${slug}`);
        return { slug, token: accountToken, projectId: await firstProjectId(h, accountId) };
      }),
    );
    accounts.push(...linked);
  });

  after(async () => {
    console.log(`drop-in collection parity: ${tally.served} answers served from the mirror, ${tally.forwarded} forwarded, every one equal to the upstream's`);
    await h?.close();
  });

  async function ask(base: string, auth: Record<string, string>, token: string, path: string, headers: Record<string, string>, body?: string): Promise<Answer> {
    const res = await request(`${base}${path}`, {
      method: 'GET',
      headers: { ...auth, 'account-token': token, ...headers, ...(body ? { 'content-type': 'application/json' } : {}) },
      ...(body ? { body } : {}),
    });
    const text = await res.body.text();
    return { status: res.statusCode, text, warnings: [res.headers['svc-warnings'] ?? []].flat().join(' ') };
  }

  it('names the query parameters the reference names', () => {
    const file = new URL('../../../shared/reference/real-service-collections.json', import.meta.url);
    if (!existsSync(file)) return;
    const reference = JSON.parse(readFileSync(file, 'utf8')) as { collections: { path: string; query_params: string[] }[] };
    const fromFile = Object.fromEntries(
      reference.collections.map((c) => [c.path, c.query_params.filter((p) => p !== 'page' && p !== 'per_page')] as const).filter(([, p]) => p.length > 0),
    );
    assert.deepEqual(collectionParameters, fromFile);
  });

  for (const [path, operations] of realServiceCollections) {
    if (!operations.includes('list') || path.startsWith('/admin') || path.startsWith('/link')) continue;
    it(`GET ${path}`, async () => {
      for (const account of accounts) {
        const def = catalogResource(path);
        const headers: Record<string, string> = { 'project-id': account.projectId };
        const upstream = (p: string, hs: Record<string, string> = headers, body?: string) => ask(h.sandbox.url, h.upstreamHeaders, account.token, p, hs, body);
        const mirror = (p: string, hs: Record<string, string> = headers, body?: string) => ask(h.apiUrl, h.clientHeaders, account.token, p, hs, body);
        // A parent named by the collection's `{id}`: the first one the upstream lists, else an id it does not have.
        let concrete = path;
        if (path.includes('{id}')) {
          const parentPath = path.slice(0, path.indexOf('/{id}'));
          const parents = await upstream(`${parentPath}?per_page=1`);
          const first = parents.status === 200 ? ((JSON.parse(parents.text) as { data?: Json[] }).data ?? [])[0] : undefined;
          concrete = path.replace('{id}', encodeURIComponent(typeof first?.id === 'string' ? first.id : 'no-such-parent'));
        }
        const plain = await upstream(`${concrete}?per_page=5`, { ...headers, 'include-source-data': 'true' });
        const sample = plain.status === 200 ? ((JSON.parse(plain.text) as { data?: Json[] }).data ?? [])[0] : undefined;
        // A field of the sample record with a text value, and a key of its source data, to filter and order on.
        const field = Object.entries(sample ?? {}).find(([k, v]) => k !== 'source_data' && k !== 'id' && typeof v === 'string' && v.length > 0)?.[0] ?? 'name';
        const value = sample && typeof sample[field] === 'string' ? sample[field] : 'x';
        const sourceData = sample?.source_data as Json | undefined;
        const sdKey = Object.entries(sourceData ?? {}).find(([, v]) => typeof v === 'string' || typeof v === 'number')?.[0];
        const eq = (f: string, v: unknown) => ({ field: f, operator: '=', value: v });
        const q = (x: unknown) => encodeURIComponent(JSON.stringify(x));

        const forms: [what: string, path: string, headers?: Record<string, string>, body?: string][] = [
          ['plain', concrete],
          ['paging', `${concrete}?page=2&per_page=2`],
          ['source data', `${concrete}?per_page=3`, { ...headers, 'include-source-data': 'true' }],
          ...(collectionParameters[path] ?? []).map((p): [string, string] => [
            `parameter ${p}`,
            `${concrete}?${p}=${encodeURIComponent(sample && typeof sample[p] === 'string' ? sample[p] : 'x')}`,
          ]),
          ['filters as a JSON array', `${concrete}?filters=${q([eq(field, value)])}`],
          ['filters[] repeated', `${concrete}?filters[]=${q(eq(field, value))}&filters[]=${q({ field: 'id', operator: '!=', value: 'none' })}`],
          ['filters in a GET body', concrete, headers, JSON.stringify({ filters: [eq(field, value)] })],
          ['order_by', `${concrete}?order_by=${q([{ field, dir: 'DESC' }])}&per_page=4`],
          ['order_by[] in a body', concrete, headers, JSON.stringify({ order_by: [{ field, dir: 'ASC' }] })],
          ...(sdKey
            ? [[`filter on source_data.${sdKey}`, `${concrete}?filters=${q([eq(`source_data.${sdKey}`, sourceData![sdKey])])}`] as [string, string]]
            : []),
          // Across projects (`Project-Id: *`): the upstream's order across projects, page by page, or its refusal.
          ['across projects', `${concrete}?per_page=1000`, { ...headers, 'project-id': '*' }],
          ['across projects, paging', `${concrete}?page=3&per_page=2`, { ...headers, 'project-id': '*' }],
          [
            'across projects, filtered',
            `${concrete}?filters=${q([{ field: 'id', operator: '!=', value: 'none' }])}&page=2&per_page=3`,
            { ...headers, 'project-id': '*' },
          ],
          ['a parameter the mirror does not know', `${concrete}?zzz_unknown=1`],
          ['a header the mirror does not know', concrete, { ...headers, 'return-source-id': 'true' }],
        ];
        for (const [what, p, hs, body] of forms) {
          const [up, mine] = [await upstream(p, hs ?? headers, body), await mirror(p, hs ?? headers, body)];
          const label = `${account.slug} ${path}: ${what} (${p})`;
          assert.equal(mine.status, up.status, `${label}: status; the mirror answered ${mine.text.slice(0, 300)}; the upstream ${up.text.slice(0, 300)}`);
          // The contract does not show an error body's shape: a refusal is compared by its status,
          // and it must say what is wrong (the mirror's own 4xx bodies carry a code and details too).
          if (up.status >= 400)
            assert.equal(typeof (comparable(mine.text, def) as { message?: unknown }).message, 'string', `${label}: a refusal with a message`);
          else
            assert.deepEqual(
              comparable(mine.text, def),
              comparable(up.text, def),
              `${label}: the same answer (mirror ${mine.warnings ? 'forwarded' : 'served'} it)`,
            );
          if (mine.warnings) tally.forwarded++;
          else tally.served++;
          // What the mirror does not hold is never served from it.
          if (!def) assert.ok(mine.warnings, `${label}: not held by the mirror, so forwarded with a warning`);
        }
      }
    });
  }
});
