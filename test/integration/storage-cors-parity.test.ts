// The mirror's storage links answer browsers as the upstream's storage URLs do: for every storage link
// kind (download and preview fields) of every resource of the catalog that has them, on every sandbox
// source system that serves it, a CORS preflight (Origin, Access-Control-Request-Method: GET,
// Access-Control-Request-Headers: range, if-none-match) and a ranged GET from another origin get the
// same status and the same Access-Control-* headers from the mirror's link as from the upstream's URL
// of the same record.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { knownProfile, scopeKindIn } from '../../connectors/source-systems/index.ts';
import { resourceDef, resources } from '../../lib/resources.ts';
import { linkAndSync, startHarness, type Harness } from '../helpers/harness.ts';

const systems = ['buildpro', 'docvault', 'sitecloud'];
const origin = 'https://viewer.example';

type Json = Record<string, unknown>;

/** A response's status and its CORS headers. */
async function corsOf(res: Response): Promise<{ status: number; cors: Record<string, string> }> {
  await res.arrayBuffer();
  return { status: res.status, cors: Object.fromEntries([...res.headers].filter(([name]) => name.startsWith('access-control-'))) };
}

const preflight = (url: string) =>
  fetch(url, {
    method: 'OPTIONS',
    headers: { origin, 'access-control-request-method': 'GET', 'access-control-request-headers': 'range, if-none-match' },
  }).then(corsOf);
const rangedGet = (url: string) => fetch(url, { headers: { origin, range: 'bytes=0-15' } }).then(corsOf);

describe('storage links answer CORS as the upstream storage does', { timeout: 600_000 }, () => {
  let h: Harness;
  const tokens = new Map<string, string>();
  /** `resource field` pairs checked, on any system. */
  const checked = new Set<string>();

  before(async () => {
    h = await startHarness({ sandbox: { size: 5 } });
    const linked = await Promise.all(systems.map((slug) => linkAndSync(h, slug, `cors-${slug}`)));
    systems.forEach((slug, i) => tokens.set(slug, linked[i]!.accountToken));
  });

  after(async () => {
    await h?.close();
  });

  /** The first records of a list, from the mirror and from the sandbox (the same records, in the same order). */
  async function firstOfBoth(slug: string, path: string, headers: Record<string, string>): Promise<{ mirror: Json[]; upstream: Json[] }> {
    const token = tokens.get(slug)!;
    const read = async (base: string, auth: Record<string, string>) => {
      const res = await fetch(`${base}${path}?page=1&per_page=3`, { headers: { ...auth, 'account-token': token, ...headers } });
      assert.equal(res.status, 200, `${base}${path}: ${await res.clone().text()}`);
      return ((await res.json()) as { data: Json[] }).data;
    };
    const [mirror, upstream] = await Promise.all([read(h.apiUrl, h.clientHeaders), read(h.sandbox.url, h.upstreamHeaders)]);
    return { mirror, upstream };
  }

  for (const slug of systems) {
    const profile = knownProfile(slug)!;
    for (const def of resources.filter((r) => r.urlFields && r.name in profile.resources)) {
      it(`${slug} ${def.name}: ${def.urlFields!.join(', ')}`, async () => {
        const headers: Record<string, string> = {};
        const parentDef = def.parent ? resourceDef(def.parent)! : undefined;
        const kind = scopeKindIn(profile, (parentDef ?? def).name, (parentDef ?? def).scope);
        if (kind === 'project') headers['project-id'] = String((await firstOfBoth(slug, '/projects', {})).upstream[0]!.id);
        let path = def.path;
        if (parentDef) {
          const parent = (await firstOfBoth(slug, parentDef.path, headers)).upstream[0];
          assert.ok(parent, `${slug} has a ${parentDef.name}`);
          path = `${parentDef.path}/${String(parent.id)}/${def.path}`;
        }
        const { mirror, upstream } = await firstOfBoth(slug, path, headers);
        assert.ok(upstream.length > 0, `${slug} serves some ${def.name}`);
        // Every difference, so that a failure shows all of them.
        const differences: string[] = [];
        const compare = (what: string, mineAnswer: unknown, theirs: unknown) => {
          if (JSON.stringify(mineAnswer) !== JSON.stringify(theirs))
            differences.push(`${what}: mirror ${JSON.stringify(mineAnswer)}, upstream ${JSON.stringify(theirs)}`);
        };
        for (const [i, up] of upstream.entries()) {
          const mine = mirror[i]!;
          assert.equal(mine.id, up.id, `${path}: the same record at ${i}`);
          for (const field of def.urlFields!) {
            const upUrl = up[field];
            const myUrl = mine[field];
            if (typeof upUrl !== 'string' || upUrl === '') {
              assert.ok(myUrl === upUrl, `${path} ${String(up.id)} ${field}: none upstream, none in the mirror`);
              continue;
            }
            assert.ok(typeof myUrl === 'string' && myUrl.startsWith(`${h.apiUrl}/storage/`), `${field} is the mirror's link: ${String(myUrl)}`);
            const what = `${slug} ${def.name} ${field}`;
            compare(`${what}: the preflight`, await preflight(myUrl), await preflight(upUrl));
            compare(`${what}: a ranged GET from another origin`, await rangedGet(myUrl), await rangedGet(upUrl));
            checked.add(`${def.name} ${field}`);
          }
        }
        assert.deepEqual(differences, []);
      });
    }
  }

  it('checked every link kind of every resource that has them', () => {
    const expected = resources.flatMap((r) => (r.urlFields ?? []).map((f) => `${r.name} ${f}`));
    assert.deepEqual([...checked].sort(), expected.sort());
  });
});
