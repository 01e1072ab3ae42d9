// The mirror as a drop-in for the upstream: for every resource every sandbox source system serves,
// the same request (same account token, same headers) to the sandbox and to the mirror answers the
// same data, pagination and source data. Lists (two pages), objects by id and by `source_id:`,
// children through their parents, folders with their files and subfolders, `/root-folder`, and the
// source-data headers. Signed storage URLs differ by construction (each answer signs anew): they
// are compared by presence.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { knownProfile, scopeKindIn } from '../../connectors/source-systems/index.ts';
import { resourceDef, resources, type ResourceDef } from '../../lib/resources.ts';
import { linkAndSync, startHarness, type Harness } from '../helpers/harness.ts';

const systems = ['buildpro', 'docvault', 'sqlerp', 'xmlbooks', 'graphledger', 'crmcloud', 'fieldops', 'sitecloud', 'jobsiteerp', 'cloudbooks'];

type Json = Record<string, unknown>;
interface Answer {
  status: number;
  body: unknown;
}

/** URL fields of a resource (and of nested files and folders) by presence only. */
function comparable(value: unknown, def: ResourceDef | undefined): unknown {
  if (Array.isArray(value)) return value.map((v) => comparable(v, def));
  if (typeof value !== 'object' || value === null) return value;
  const out: Json = {};
  for (const [k, v] of Object.entries(value as Json)) {
    if (k === 'data' && Array.isArray(v)) out[k] = comparable(v, def);
    else if (k === 'files' && Array.isArray(v)) out[k] = comparable(v, resourceDef('files'));
    else if (k === 'folders' && Array.isArray(v)) out[k] = comparable(v, resourceDef('folders'));
    else if (def?.urlFields?.includes(k)) out[k] = typeof v === 'string' && v.length > 0 ? '<signed url>' : v;
    else out[k] = v;
  }
  return out;
}

describe('read parity: the mirror answers as the upstream does', { timeout: 600_000 }, () => {
  let h: Harness;
  const tokens = new Map<string, string>();

  before(async () => {
    h = await startHarness({ sandbox: { size: 7 }, config: { MIRROR_RESOURCES: '*' } });
    // The accounts are independent: their first passes run side by side, so SQL ERP's async
    // requests (a 5 s poll floor each) wait while the others sync instead of after them.
    const linked = await Promise.all(systems.map((slug) => linkAndSync(h, slug, `parity-${slug}`)));
    systems.forEach((slug, i) => tokens.set(slug, linked[i]!.accountToken));
  });

  after(async () => {
    await h?.close();
  });

  async function both(slug: string, path: string, headers: Record<string, string> = {}): Promise<{ upstream: Answer; mirror: Answer }> {
    const token = tokens.get(slug)!;
    const ask = async (base: string, auth: Record<string, string>): Promise<Answer> => {
      const res = await fetch(`${base}${path}`, { headers: { ...auth, 'account-token': token, ...headers } });
      const text = await res.text();
      return { status: res.status, body: text ? (JSON.parse(text) as unknown) : undefined };
    };
    const [upstream, mirror] = await Promise.all([ask(h.sandbox.url, h.upstreamHeaders), ask(h.apiUrl, h.clientHeaders)]);
    return { upstream, mirror };
  }

  function assertSame(what: string, a: { upstream: Answer; mirror: Answer }, def: ResourceDef | undefined): void {
    assert.equal(a.upstream.status, 200, `${what}: the sandbox answered ${a.upstream.status} ${JSON.stringify(a.upstream.body)}`);
    assert.equal(a.mirror.status, 200, `${what}: the mirror answered ${a.mirror.status} ${JSON.stringify(a.mirror.body)}`);
    const up = a.upstream.body as { meta?: { current_page: number; has_more_results: boolean | null } };
    const mine = a.mirror.body as { meta?: { current_page: number; has_more_results: boolean | null } };
    if (up.meta && mine.meta) {
      assert.equal(mine.meta.current_page, up.meta.current_page, `${what}: current_page`);
      // The mirror knows where its lists end: where the upstream says null (unknown), the mirror
      // says exactly; otherwise both say the same.
      assert.equal(typeof mine.meta.has_more_results, 'boolean', `${what}: has_more_results is exact`);
      if (up.meta.has_more_results !== null) assert.equal(mine.meta.has_more_results, up.meta.has_more_results, `${what}: has_more_results`);
    }
    // Pagination is compared above; everything else must be equal.
    const rest = (body: unknown) => {
      const { meta: _meta, ...others } = body as Json;
      return comparable(others, def);
    };
    assert.deepEqual(rest(mine), rest(up), `${what}: same data`);
  }

  /** The first ids of a list, as the upstream serves it. */
  async function firstIds(slug: string, path: string, headers: Record<string, string>): Promise<Json[]> {
    const { upstream } = await both(slug, `${path}?page=1&per_page=3`, headers);
    return ((upstream.body as { data?: Json[] }).data ?? []).slice(0, 3);
  }

  // Every resource listed per project, read across projects (`Project-Id: *`) page by page at several
  // page sizes: the same records on the same page as the upstream's (the upstream's order across
  // projects, not the mirror's grouping by project); where the upstream refuses `*`, its refusal.
  for (const slug of systems) {
    const profile = knownProfile(slug)!;
    const across = resources.filter((r) => r.name in profile.resources && r.scope !== 'child' && scopeKindIn(profile, r.name, r.scope) === 'project');
    if (across.length === 0) continue;
    it(`${slug} lists across projects page by page: ${across.map((r) => r.name).join(', ')}`, async () => {
      const headers = { 'project-id': '*', 'include-source-data': 'true' };
      for (const def of across) {
        const whole = await both(slug, `${def.path}?page=1&per_page=1000`, headers);
        if (whole.upstream.status !== 200) {
          // A source system that does not list this resource across projects: its answer, relayed.
          assert.equal(whole.mirror.status, whole.upstream.status, `${def.path} *: the mirror answered ${JSON.stringify(whole.mirror.body)}`);
          assert.deepEqual(whole.mirror.body, whole.upstream.body, `${def.path} *: the upstream's refusal`);
          continue;
        }
        assertSame(`${def.path} * per_page=1000`, whole, def);
        const total = (whole.upstream.body as { data: Json[] }).data.length;
        assert.ok(total > 0, `${slug} serves some ${def.name} across projects`);
        // One object asked with Project-Id: * is answered as the upstream answers it (its refusal).
        const first = (whole.upstream.body as { data: Json[] }).data[0]!;
        const one = await both(slug, `${def.path}/${encodeURIComponent(String(first.id))}`, headers);
        assert.deepEqual(one.mirror, one.upstream, `${def.path}/<id> with Project-Id *: the upstream's answer`);
        for (const perPage of [1, 4, 25]) {
          const pages = Math.min(Math.ceil(total / perPage) + 1, 40);
          for (let page = 1; page <= pages; page++) {
            assertSame(`${def.path} * page ${page} per_page=${perPage}`, await both(slug, `${def.path}?page=${page}&per_page=${perPage}`, headers), def);
          }
        }
        assertSame(`${def.path} * with the source system's page size`, await both(slug, def.path, headers), def);
        // Filtered and ordered: ties in the upstream's order across projects (or its refusal to filter, relayed).
        const since = encodeURIComponent(JSON.stringify([{ field: 'source_update_time', operator: '>=', value: '2000-01-01T00:00:00Z' }]));
        const byName = encodeURIComponent(JSON.stringify([{ field: 'source_create_time', dir: 'DESC' }]));
        for (const query of [`filters=${since}`, `order_by=${byName}`]) {
          for (let page = 1; page <= 3; page++) {
            const a = await both(slug, `${def.path}?${query}&page=${page}&per_page=4`, headers);
            if (a.upstream.status === 200) assertSame(`${def.path} * ${decodeURIComponent(query)} page ${page}`, a, def);
            else assert.deepEqual(a.mirror, a.upstream, `${def.path} * ${decodeURIComponent(query)}: the upstream's answer, relayed`);
          }
        }
      }
    });
  }

  for (const slug of systems) {
    const profile = knownProfile(slug)!;
    for (const def of resources.filter((r) => r.name in profile.resources)) {
      it(`${slug} ${def.name}`, async () => {
        const kind = scopeKindIn(profile, def.name, def.scope);
        const headers: Record<string, string> = { 'include-source-data': 'true' };
        const parentDef = def.parent ? resourceDef(def.parent)! : undefined;
        const projectScoped = kind === 'project' || (parentDef !== undefined && scopeKindIn(profile, parentDef.name, parentDef.scope) === 'project');
        if (projectScoped) {
          const [project] = await firstIds(slug, '/projects', {});
          assert.ok(project, `${slug} has a project`);
          headers['project-id'] = String(project.id);
        }
        let base = def.path;
        if (parentDef) {
          const [parent] = await firstIds(slug, parentDef.path, headers);
          assert.ok(parent, `${slug} has a ${parentDef.name}`);
          base = `${parentDef.path}/${String(parent.id)}/${def.path}`;
        }
        const perPage = 3;
        const page1 = await both(slug, `${base}?page=1&per_page=${perPage}`, headers);
        assertSame(`${base} page 1`, page1, def);
        const items = (page1.upstream.body as { data: Json[] }).data;
        assert.ok(items.length > 0, `${slug} serves some ${def.name}`);
        assertSame(`${base} page 2`, await both(slug, `${base}?page=2&per_page=${perPage}`, headers), def);
        assertSame(`${base} without source data`, await both(slug, `${base}?page=1&per_page=${perPage}`, { ...headers, 'include-source-data': 'false' }), def);

        const one = items[0]!;
        assertSame(`${base}/${String(one.id)}`, await both(slug, `${base}/${String(one.id)}`, headers), def);
        if (typeof one.source_id === 'string' && one.source_id) {
          assertSame(`${base}/source_id:${one.source_id}`, await both(slug, `${base}/source_id:${encodeURIComponent(one.source_id)}`, headers), def);
        }
        if (def.name === 'folders') {
          assertSame('/root-folder', await both(slug, '/root-folder', headers), def);
          for (const sub of ['files', 'folders'])
            assertSame(`/folders/{id}/${sub}`, await both(slug, `/folders/${String(one.id)}/${sub}?page=1&per_page=50`, headers), resourceDef(sub));
        }
      });
    }
  }
});
