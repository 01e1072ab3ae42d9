// Link sessions through the mirror: created (forwarded upstream and recorded by a keyed hash), then
// the Session header alone reads the mirror within the session's scopes and lifetime; extend and
// expire are followed; a session never gives another account's data.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { linkAndSync, startHarness, type Harness } from '../helpers/harness.ts';

interface SessionObject {
  id: string;
  session: string;
  scopes: string[];
  expires_at: string;
}

describe('link sessions on the mirror', { timeout: 240_000 }, () => {
  let h: Harness;
  const accounts: { accountId: string; accountToken: string }[] = [];

  before(async () => {
    h = await startHarness({ sandbox: { size: 6 } });
    for (const ref of ['sessions-a', 'sessions-b']) {
      accounts.push(await linkAndSync(h, 'buildpro', ref));
    }
  });

  after(async () => {
    await h?.close();
  });

  const asAccount = (token: string) => ({ ...h.clientHeaders, 'account-token': token, 'content-type': 'application/json' });
  const asSession = (secret: string) => ({ 'api-version': '2021-11-21', session: secret });
  const get = (path: string, headers: Record<string, string>) => fetch(`${h.apiUrl}${path}`, { headers });

  async function createSession(token: string, body: Record<string, unknown>): Promise<SessionObject> {
    const res = await fetch(`${h.apiUrl}/link/sessions`, { method: 'POST', headers: asAccount(token), body: JSON.stringify(body) });
    assert.ok(res.ok, `created: ${res.status} ${await res.clone().text()}`);
    return (await res.json()) as SessionObject;
  }

  it('reads the mirror with the Session header alone, within its scopes, and keeps no raw secret', async () => {
    const [a] = accounts;
    const s = await createSession(a!.accountToken, { name: 'picker', ttl: '600', mode: 'file-picker' });
    assert.ok(s.scopes.includes('projects:read'));

    const projects = await get('/projects', asSession(s.session));
    assert.equal(projects.status, 200, await projects.clone().text());
    const viaSession = (await projects.json()) as { data: { id: string }[] };
    const viaToken = (await (await get('/projects', asAccount(a!.accountToken))).json()) as { data: { id: string }[] };
    assert.deepEqual(viaSession, viaToken, 'the session reads its account, as the account token does');

    const project = viaSession.data[0]!.id;
    const docs = await get('/documents', { ...asSession(s.session), 'project-id': project });
    assert.equal(docs.status, 200, await docs.clone().text());

    const vendors = await get('/vendors', asSession(s.session));
    assert.equal(vendors.status, 403, 'vendors are outside a file picker session');
    assert.match(((await vendors.json()) as { message: string }).message, /vendors:read/);

    const write = await fetch(`${h.apiUrl}/vendors`, {
      method: 'POST',
      headers: { ...asSession(s.session), 'content-type': 'application/json' },
      body: '{"name":"x"}',
    });
    assert.equal(write.status, 403, 'a read-only session cannot write');

    const { rows } = await h.services.pool.query<{ secret_hash: string }>(`SELECT secret_hash FROM link_sessions WHERE id = $1`, [s.id]);
    assert.equal(rows.length, 1);
    assert.notEqual(rows[0]!.secret_hash, s.session);
    const dump = await h.services.pool.query<{ t: string }>(`SELECT row_to_json(l)::text AS t FROM link_sessions l`);
    assert.ok(
      dump.rows.every((r) => !r.t.includes(s.session)),
      'the secret is not stored',
    );
  });

  it("never answers another account's record to a session", async () => {
    const [a, b] = accounts;
    const s = await createSession(a!.accountToken, { name: 'picker', ttl: '600', mode: 'file-picker' });
    const { rows } = await h.services.pool.query<{ id: string; source_id: string }>(
      `SELECT id, source_id FROM records WHERE account_id = $1 AND resource = 'projects' LIMIT 1`,
      [b!.accountId],
    );
    const theirs = rows[0]!;
    const mine = await h.services.pool.query<{ n: number }>(
      `SELECT count(*)::int AS n FROM records WHERE account_id = $1 AND resource = 'projects' AND id = $2`,
      [a!.accountId, theirs.id],
    );
    assert.equal(mine.rows[0]!.n, 0, "the other account's project id is not one of this account's");
    const byId = await get(`/projects/${theirs.id}`, asSession(s.session));
    assert.equal(byId.status, 404);
    const nonexistent = await get('/projects/00000000-0000-4000-8000-000000000000', asSession(s.session));
    assert.equal(nonexistent.status, 404);
    assert.equal(((await byId.json()) as { code: string }).code, ((await nonexistent.json()) as { code: string }).code, 'existence does not leak');
  });

  it('follows extend and expire, and refuses unknown, expired and mixed credentials', async () => {
    const [a] = accounts;
    const s = await createSession(a!.accountToken, { name: 'short', ttl: '2', scopes: ['projects:read'] });
    const extend = await fetch(`${h.apiUrl}/link/sessions/${s.id}/extend`, {
      method: 'POST',
      headers: asAccount(a!.accountToken),
      body: JSON.stringify({ ttl: '600' }),
    });
    assert.ok(extend.ok, `extended: ${extend.status} ${await extend.clone().text()}`);
    await new Promise((r) => setTimeout(r, 2_500));
    assert.equal((await get('/projects', asSession(s.session))).status, 200, 'extended past its first expiry');

    const expire = await fetch(`${h.apiUrl}/link/sessions/${s.id}/expire`, { method: 'POST', headers: asAccount(a!.accountToken), body: '{}' });
    assert.ok(expire.ok, `expired: ${expire.status}`);
    const refused = await get('/projects', asSession(s.session));
    assert.equal(refused.status, 401);
    assert.match(((await refused.json()) as { message: string }).message, /expired/i);

    const unknown = await get('/projects', asSession('sess_not-a-session'));
    assert.equal(unknown.status, 401);
    const mixed = await get('/projects', { ...asAccount(a!.accountToken), session: s.session });
    assert.equal(mixed.status, 400, 'a Session beside an Account-Token is ambiguous');
  });
});
