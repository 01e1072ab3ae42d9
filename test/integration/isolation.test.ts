// Isolation between linked accounts on the read API: whatever the way in (an id, a `source_id:`,
// a list filter, a project scope, a parent's children, the changes feed), one account's token never
// reads another account's record, and the answer for another account's record is the answer for a
// record that does not exist at all: existence does not leak.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { linkAndSync, startHarness, type Harness } from '../helpers/harness.ts';

interface Row {
  id: string;
  source_id: string | null;
  scope: string;
}

const missingId = '00000000-0000-4000-8000-00000000abcd';

describe('isolation between linked accounts', { timeout: 240_000 }, () => {
  let h: Harness;
  let a: { accountId: string; accountToken: string };
  let b: { accountId: string; accountToken: string };

  before(async () => {
    h = await startHarness({ sandbox: { size: 6 } });
    a = await linkAndSync(h, 'buildpro', 'iso-a');
    b = await linkAndSync(h, 'buildpro', 'iso-b');
  });

  after(async () => {
    await h?.close();
  });

  const asA = (extra: Record<string, string> = {}) => ({ ...h.clientHeaders, 'account-token': a.accountToken, ...extra });
  const get = (path: string, headers: Record<string, string>) => fetch(`${h.apiUrl}${path}`, { headers });

  /**
   * A record of B's whose id A does not have (the sandbox gives each account its own ids; source ids
   * follow the source system's numbering, so both accounts may have the same one).
   */
  async function theirs(resource: string): Promise<Row> {
    const { rows } = await h.services.pool.query<Row>(
      `SELECT id, source_id, scope FROM records b WHERE account_id = $1 AND resource = $2 AND deleted_at IS NULL AND source_id IS NOT NULL
          AND NOT EXISTS (SELECT 1 FROM records a WHERE a.account_id = $3 AND a.resource = b.resource AND a.id = b.id)
        ORDER BY ordinal LIMIT 1`,
      [b.accountId, resource, a.accountId],
    );
    assert.ok(rows[0], `account B has a ${resource} record that A does not`);
    return rows[0];
  }

  /** Status, code and message, with the id asked for taken out: what may differ between two 404s. */
  async function shape(res: Response, id: string): Promise<{ status: number; code: unknown; message: string }> {
    const body = (await res.json()) as { code?: unknown; message?: string };
    return { status: res.status, code: body.code, message: (body.message ?? '').split(id).join('<id>') };
  }

  it('by id and by source_id: the answer of a record that does not exist', async () => {
    for (const resource of ['projects', 'vendors']) {
      const row = await theirs(resource);
      const foreign = await shape(await get(`/${resource}/${row.id}`, asA()), row.id);
      const missing = await shape(await get(`/${resource}/${missingId}`, asA()), missingId);
      assert.equal(foreign.status, 404, `${resource}/${row.id}`);
      assert.deepEqual(foreign, missing, `${resource}: another account's id answers as a missing one`);

      // By source id: A's own record of that source id if it has one, else the missing answer; never B's.
      const sid = `source_id:${row.source_id}`;
      const res = await get(`/${resource}/${encodeURIComponent(sid)}`, asA());
      const own = await h.services.pool.query<{ id: string }>(`SELECT id FROM records WHERE account_id = $1 AND resource = $2 AND source_id = $3`, [
        a.accountId,
        resource,
        row.source_id,
      ]);
      if (own.rows.length > 0) {
        assert.equal(res.status, 200);
        const body = (await res.json()) as { id: string };
        assert.equal(body.id, own.rows[0]!.id, "A's own record of that source id");
        assert.notEqual(body.id, row.id);
      } else {
        const foreignSid = await shape(res, row.source_id!);
        const missingSid = await shape(await get(`/${resource}/${encodeURIComponent('source_id:no-such-source-id')}`, asA()), 'no-such-source-id');
        assert.equal(foreignSid.status, 404);
        assert.deepEqual(foreignSid, missingSid, `${resource}: another account's source_id answers as a missing one`);
      }
    }
  });

  it('by list filters on id, source_id and any field: nothing of the other account', async () => {
    const row = await theirs('vendors');
    const { rows } = await h.services.pool.query<{ name: string }>(
      `SELECT data->>'name' AS name FROM records WHERE account_id = $1 AND resource = 'vendors' AND id = $2`,
      [b.accountId, row.id],
    );
    const mine = new Set(
      (await h.services.pool.query<{ id: string }>(`SELECT id FROM records WHERE account_id = $1 AND resource = 'vendors'`, [a.accountId])).rows.map(
        (r) => r.id,
      ),
    );
    const filters = [
      [{ field: 'id', operator: '=', value: row.id }],
      [{ field: 'source_id', operator: '=', value: row.source_id }],
      [{ field: 'name', operator: '=', value: rows[0]!.name }],
    ];
    for (const f of filters) {
      for (const extra of ['', '&include_deleted=true', '&modified_after=2000-01-01T00:00:00Z']) {
        const res = await get(`/vendors?filters=${encodeURIComponent(JSON.stringify(f))}${extra}`, asA());
        assert.equal(res.status, 200, await res.clone().text());
        const body = (await res.json()) as { data: { id: string }[] };
        assert.ok(
          body.data.every((d) => mine.has(d.id)),
          `filter ${JSON.stringify(f)}${extra} answered a vendor that is not A's`,
        );
        if (f[0]!.field === 'id') assert.equal(body.data.length, 0);
      }
    }
  });

  it("within another account's project: the answer of a project that does not exist", async () => {
    const project = await theirs('projects');
    for (const resource of ['documents', 'folders']) {
      const foreign = await get(`/${resource}`, asA({ 'project-id': project.id }));
      const missing = await get(`/${resource}`, asA({ 'project-id': missingId }));
      const f = await foreign.text();
      const m = await missing.text();
      assert.equal(foreign.status, missing.status, `${resource}: ${f.slice(0, 200)}`);
      assert.equal(f.split(project.id).join('<id>'), m.split(missingId).join('<id>'), `${resource} in B's project answers as in a missing project`);
      const { rows } = await h.services.pool.query<{ id: string }>(`SELECT id FROM records WHERE account_id = $1 AND resource = $2`, [b.accountId, resource]);
      assert.ok(!rows.some((r) => f.includes(r.id)), `${resource}: none of B's ids in the answer`);
    }
    // A record of B's project, read by id with B's project id.
    const doc = await theirs('documents');
    const projectOfDoc = doc.scope.replace(/^project=/, '');
    const foreign = await shape(await get(`/documents/${doc.id}`, asA({ 'project-id': projectOfDoc })), doc.id);
    const missingProject = '00000000-0000-4000-8000-00000000abce';
    const missing = await shape(await get(`/documents/${missingId}`, asA({ 'project-id': missingProject })), missingId);
    assert.equal(foreign.status, 404);
    assert.deepEqual(
      { ...foreign, message: foreign.message.split(projectOfDoc).join('<p>') },
      { ...missing, message: missing.message.split(missingProject).join('<p>') },
    );
  });

  it("through a parent: another account's drawing has no versions for this one", async () => {
    const drawing = await theirs('drawings');
    const projectId = drawing.scope.replace(/^project=/, '');
    const foreign = await get(`/drawings/${drawing.id}/versions`, asA({ 'project-id': projectId }));
    const text = await foreign.text();
    assert.ok(foreign.status === 404 || foreign.status === 200, `${foreign.status} ${text.slice(0, 200)}`);
    const { rows } = await h.services.pool.query<{ id: string }>(`SELECT id FROM records WHERE account_id = $1 AND resource = 'drawing-versions'`, [
      b.accountId,
    ]);
    assert.ok(rows.length > 0, 'B has drawing versions');
    assert.ok(!rows.some((r) => text.includes(r.id)), "none of B's drawing versions in the answer");
  });

  it('in the changes feed: only the account of the token', async () => {
    let cursor = '';
    const seen = new Set<string>();
    for (let i = 0; i < 50; i++) {
      const res = await get(`/mirror/changes/vendors?limit=1000${cursor ? `&cursor=${cursor}` : ''}`, asA());
      assert.equal(res.status, 200, await res.clone().text());
      const body = (await res.json()) as { data: { id: string }[]; meta: { next_cursor: string; has_more_results: boolean } };
      for (const d of body.data) seen.add(d.id);
      if (!body.meta.has_more_results) break;
      cursor = body.meta.next_cursor;
    }
    const mine = await h.services.pool.query<{ id: string }>(`SELECT id FROM records WHERE account_id = $1 AND resource = 'vendors'`, [a.accountId]);
    assert.deepEqual([...seen].sort(), mine.rows.map((r) => r.id).sort(), "exactly this account's vendors");
    const row = await theirs('vendors');
    assert.ok(!seen.has(row.id));
  });
});
