// Every listable collection path of the real service (the committed copy of
// the reference, lib/real-catalog.generated.ts) is served by the mirror from its own copy after a
// sync, for a source system that serves it: answered 200 without the `{Prefix}-Warnings` header a
// forwarded answer carries, and equal to the upstream's answer (storage URLs by presence, since the
// mirror signs its own links).
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { knownProfile, knownProfiles, scopeKindIn } from '../../connectors/source-systems/index.ts';
import { realListablePaths } from '../../lib/real-catalog.generated.ts';
import { resourceDef, resources, type ResourceDef } from '../../lib/resources.ts';
import { firstProjectId, linkAndSync, startHarness, type Harness } from '../helpers/harness.ts';

type Json = Record<string, unknown>;

/** The catalog resource a collection path lists (a folder's files are the catalog's files). */
function resourceOfPath(path: string): ResourceDef | undefined {
  if (path === '/folders/{id}/files') return resourceDef('files');
  return resources.find((def) => (def.scope === 'child' ? `${resourceDef(def.parent!)!.path}/{id}/${def.path}` : def.path) === path);
}

/** The first source system (in the mirror's profiles' order) that serves a resource. */
function systemFor(def: ResourceDef): string | undefined {
  return knownProfiles.find((p) => def.name in p.resources && (!def.parent || def.parent in p.resources))?.slug;
}

function urlsByPresence(value: unknown, urls: ReadonlySet<string>): unknown {
  if (Array.isArray(value)) return value.map((v) => urlsByPresence(v, urls));
  if (typeof value !== 'object' || value === null) return value;
  return Object.fromEntries(Object.entries(value as Json).map(([k, v]) => [k, urls.has(k) && typeof v === 'string' && v ? '<url>' : urlsByPresence(v, urls)]));
}

describe("the real service's catalog: every listable path served from the mirror after a sync", { timeout: 900_000 }, () => {
  let h: Harness;
  const accounts = new Map<string, { token: string; projectId: string | null }>();
  const served: string[] = [];

  before(async () => {
    h = await startHarness({ sandbox: { size: 4 }, config: { MIRROR_RESOURCES: '*' } });
    const systems = new Set(
      realListablePaths
        .map((p) => resourceOfPath(p))
        .flatMap((d) => (d ? [systemFor(d)] : []))
        .filter((s): s is string => s !== undefined),
    );
    // The accounts are independent: their first passes run side by side, so SQL ERP's async
    // requests (a 5 s poll floor each) wait while the others sync instead of after them.
    const linked = await Promise.all(
      [...systems].map(async (slug) => {
        const { accountId, accountToken } = await linkAndSync(h, slug, `real-catalog-${slug}`);
        const hasProjects = 'projects' in knownProfile(slug)!.resources;
        return [slug, { token: accountToken, projectId: hasProjects ? await firstProjectId(h, accountId) : null }] as const;
      }),
    );
    for (const [slug, account] of linked) accounts.set(slug, account);
  });

  after(async () => {
    console.log(`real catalog: ${served.length} of ${realListablePaths.length} listable paths served from the mirror's own copy`);
    await h?.close();
  });

  it("the committed facts list the reference's 93 listable paths, and the catalog holds every one", () => {
    assert.equal(realListablePaths.length, 93);
    const missing = realListablePaths.filter((p) => !resourceOfPath(p));
    assert.deepEqual(missing, [], 'every listable path is a resource of the catalog');
    const unserved = realListablePaths.filter((p) => !systemFor(resourceOfPath(p)!));
    assert.deepEqual(unserved, [], 'every listable path is served by some source system');
  });

  for (const path of realListablePaths) {
    it(`GET ${path}`, async () => {
      const def = resourceOfPath(path)!;
      const slug = systemFor(def)!;
      const account = accounts.get(slug)!;
      const profile = knownProfile(slug)!;
      const parentDef = path === '/folders/{id}/files' ? resourceDef('folders')! : def.parent ? resourceDef(def.parent)! : undefined;
      const ownKind = path === '/folders/{id}/files' ? 'project' : scopeKindIn(profile, def.name, def.scope);
      const projectScoped = ownKind === 'project' || (parentDef !== undefined && scopeKindIn(profile, parentDef.name, parentDef.scope) === 'project');
      const headers: Record<string, string> = { 'account-token': account.token, ...(projectScoped ? { 'project-id': account.projectId! } : {}) };
      const ask = async (base: string, auth: Record<string, string>, p: string) => {
        const res = await fetch(`${base}${p}`, { headers: { ...auth, ...headers } });
        return { status: res.status, warnings: res.headers.get('svc-warnings'), body: (await res.json()) as { data?: Json[] } };
      };
      let concrete = path;
      if (parentDef) {
        const parents = await ask(h.apiUrl, h.clientHeaders, `${parentDef.path}?per_page=1`);
        assert.equal(parents.status, 200, `${slug} ${parentDef.path}: ${JSON.stringify(parents.body)}`);
        const first = parents.body.data?.[0];
        assert.ok(first, `${slug} has a ${parentDef.name}`);
        concrete = path.replace('{id}', encodeURIComponent(String(first.id)));
      }
      const mine = await ask(h.apiUrl, h.clientHeaders, `${concrete}?per_page=50`);
      assert.equal(mine.status, 200, `${slug} ${concrete}: ${JSON.stringify(mine.body).slice(0, 300)}`);
      assert.equal(mine.warnings, null, `${slug} ${concrete}: served by the mirror, not forwarded (${mine.warnings})`);
      assert.ok((mine.body.data ?? []).length > 0, `${slug} ${concrete}: the mirror holds records`);
      const up = await ask(h.sandbox.url, h.upstreamHeaders, `${concrete}?per_page=50`);
      const urls = new Set(def.urlFields ?? []);
      assert.deepEqual(
        urlsByPresence(mine.body.data, urls),
        urlsByPresence(up.body.data, urls),
        `${slug} ${concrete}: the mirror's copy equals the upstream's list`,
      );
      served.push(path);
    });
  }
});
