// Reads from a real streaming replica (test/helpers/replica-cluster.ts), with read-your-writes: an
// account that wrote through the mirror reads its write whichever server answers, while the other
// accounts' reads stay on the replica; what a pass wrote is read right after the pass ends; a replica
// that stops costs no read, and is used again once it is back.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { linkAndSync, sandboxAdmin, startHarness, type Harness } from '../helpers/harness.ts';
import { startReplicaCluster, type ReplicaCluster } from '../helpers/replica-cluster.ts';

describe('reads on a streaming replica', { timeout: 300_000 }, () => {
  let cluster: ReplicaCluster;
  let h: Harness;
  let writer: { accountId: string; accountToken: string };
  let reader: { accountId: string; accountToken: string };
  let vendorIds: string[];
  let readerVendorIds: string[];
  let replica: string;

  before(async () => {
    cluster = await startReplicaCluster();
    h = await startHarness({
      sandbox: { size: 8 },
      db: { url: cluster.primary.url, drop: () => cluster.stop() },
      config: { DATABASE_REPLICA_URLS: cluster.standby.url, MIRROR_REPLICA_MAX_LAG_MS: '5000' },
    });
    writer = await linkAndSync(h, 'buildpro', 'replica-writer');
    reader = await linkAndSync(h, 'buildpro', 'replica-reader');
    const { rows } = await h.services.pool.query<{ id: string }>(
      `SELECT id FROM records WHERE account_id = $1 AND resource = 'vendors' AND deleted_at IS NULL ORDER BY ordinal LIMIT 20`,
      [writer.accountId],
    );
    vendorIds = rows.map((r) => r.id);
    readerVendorIds = (
      await h.services.pool.query<{ id: string }>(`SELECT id FROM records WHERE account_id = $1 AND resource = 'vendors' ORDER BY ordinal LIMIT 4`, [
        reader.accountId,
      ])
    ).rows.map((r) => r.id);
    assert.ok(vendorIds.length >= 8, `the writer has ${vendorIds.length} vendors`);
    await cluster.caughtUp();
    await h.reads.probe();
    replica = h.reads.status().replicas[0]!.name;
  });

  after(async () => {
    await h?.close();
  });

  const call = (account: { accountToken: string }, method: string, url: string, body?: unknown) =>
    fetch(`${h.apiUrl}${url}`, {
      method,
      headers: { ...h.clientHeaders, 'account-token': account.accountToken, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
      body: body === undefined ? undefined : JSON.stringify(body),
    });

  /** Counts each read's server per account while `fn` runs. */
  async function counting<T>(fn: () => Promise<T>): Promise<{ result: T; by: Map<string, Map<string, number>> }> {
    const by = new Map<string, Map<string, number>>();
    const stop = h.reads.observe(({ accountId, server }) => {
      const m = by.get(accountId) ?? new Map<string, number>();
      m.set(server, (m.get(server) ?? 0) + 1);
      by.set(accountId, m);
    });
    try {
      return { result: await fn(), by };
    } finally {
      stop();
    }
  }

  it('reads every write right after it, with the replica 200 ms behind; the other account reads from the replica', async () => {
    await cluster.setApplyDelay(200);
    let missing = 0;
    let failed = 0;
    let readerReads = 0;
    let done = false;
    const { by } = await counting(async () => {
      // Another account reads all along: its lists and objects.
      const readerLoop = (async () => {
        while (!done) {
          const res = await call(reader, 'GET', readerReads % 2 ? '/vendors?per_page=50' : `/projects?per_page=2&page=${(readerReads % 3) + 1}`);
          if (res.status !== 200) failed++;
          await res.arrayBuffer();
          readerReads++;
        }
      })();
      // 1,000 write-then-read pairs, 8 at a time (one vendor each): the read must show the write.
      let next = 0;
      await Promise.all(
        vendorIds.slice(0, 8).map(async (id) => {
          while (next < 1000) {
            const n = next++;
            const name = `Vendor write ${n}`;
            const written = await call(writer, 'PATCH', `/vendors/${id}`, { name });
            assert.equal(written.status, 200, await written.clone().text());
            await written.arrayBuffer();
            const read = await call(writer, 'GET', n % 2 ? `/vendors/${id}` : '/vendors?per_page=100');
            if (read.status !== 200) {
              failed++;
              continue;
            }
            const body = (await read.json()) as { id: string; name: string } | { data: { id: string; name: string }[] };
            const seen = 'data' in body ? body.data.find((v) => v.id === id)?.name : body.name;
            if (seen !== name) missing++;
          }
        }),
      );
      done = true;
      await readerLoop;
    });
    const writerBy = by.get(writer.accountId) ?? new Map();
    const readerBy = by.get(reader.accountId) ?? new Map();
    console.log('writer reads by server', Object.fromEntries(writerBy), 'reader reads by server', Object.fromEntries(readerBy), h.reads.status());
    assert.equal(failed, 0, 'no read failed');
    assert.equal(missing, 0, 'no read missed its write');
    assert.ok(readerReads >= 50, `the reader read ${readerReads} times`);
    assert.equal(readerBy.get(replica), readerReads, "every one of the other account's reads was the replica's");
    assert.equal(readerBy.get('primary') ?? 0, 0);
    await cluster.setApplyDelay(0);
  });

  it('reads what a pass wrote right after the pass ends, with the replica 1 s behind', async () => {
    await cluster.caughtUp();
    await h.reads.probe();
    await cluster.setApplyDelay(1000);
    try {
      // Renamed at the source (no webhook: the account registered none), then a pass mirrors it.
      const id = vendorIds.at(-1)!;
      const name = `Renamed at the source ${Date.now()}`;
      await sandboxAdmin(h, 'PATCH', '/_admin/objects', { account_token: writer.accountToken, resource: 'vendors', id, patch: { name } });
      const pass = await (await h.sync.start({ accountId: writer.accountId, mode: 'full', resource: 'vendors' })).result();
      assert.deepEqual(pass.failed, []);
      assert.ok((pass.byResource.vendors ?? 0) > 0, 'the pass listed the vendors');
      const { result: seen, by } = await counting(async () => {
        const read = await call(writer, 'GET', `/vendors/${id}`);
        assert.equal(read.status, 200);
        const list = await call(writer, 'GET', '/vendors?per_page=100');
        assert.equal(list.status, 200);
        return [
          ((await read.json()) as { name: string }).name,
          ((await list.json()) as { data: { id: string; name: string }[] }).data.find((v) => v.id === id)?.name,
        ];
      });
      console.log('reads after the pass by server', Object.fromEntries(by.get(writer.accountId) ?? new Map()));
      assert.deepEqual(seen, [name, name], 'the object and the list read right after the pass show what it wrote');
      // The replica is used again for the account once it has replayed the pass.
      await cluster.setApplyDelay(0);
      await cluster.caughtUp();
      await h.reads.probe();
      const { by: later } = await counting(async () => (await call(writer, 'GET', `/vendors/${id}`)).arrayBuffer());
      assert.equal(later.get(writer.accountId)?.get(replica), 1, 'read from the replica once it replayed the pass');
    } finally {
      await cluster.setApplyDelay(0);
    }
  });

  it('loses no read while the replica is stopped, and reads from it again once it is back', async () => {
    await cluster.caughtUp();
    await h.reads.probe();
    let failed = 0;
    let reads = 0;
    let stopped = false;
    let back = 0;
    const { by } = await counting(async () => {
      const loops = [0, 1, 2, 3].map(async (k) => {
        while (!stopped) {
          const res = await call(reader, 'GET', k % 2 ? '/vendors?per_page=50' : `/vendors/${readerVendorIds[k]}`);
          if (res.status !== 200) failed++;
          await res.arrayBuffer();
          reads++;
        }
      });
      // Mid-load: the replica stops (its connections are cut), stays down a while, and comes back.
      await new Promise((resolve) => setTimeout(resolve, 1000));
      await cluster.standby.stop();
      const downAt = reads;
      await new Promise((resolve) => setTimeout(resolve, 3000));
      assert.ok(reads > downAt + 20, 'reads went on while the replica was down');
      await cluster.standby.start();
      // Used again: within the probe's backoff (at most 10 s) plus a probe.
      const until = Date.now() + 30_000;
      back = h.reads.status().replicas[0]!.reads;
      while (Date.now() < until && h.reads.status().replicas[0]!.reads < back + 50) await new Promise((resolve) => setTimeout(resolve, 200));
      stopped = true;
      await Promise.all(loops);
    });
    const status = h.reads.status();
    console.log('reads by server', Object.fromEntries(by.get(reader.accountId) ?? new Map()), status);
    assert.equal(failed, 0, `no read failed (of ${reads})`);
    assert.ok(status.replicas[0]!.up, 'the replica is up again');
    assert.ok((by.get(reader.accountId)?.get('primary') ?? 0) > 0, 'the primary answered while the replica was down');
    assert.ok(status.fallbacks.down + status.fallbacks.failed > 0);
    assert.ok(status.replicas[0]!.reads >= back + 50, 'the replica answers reads again');
  });
});
