// Security of webhooks, both ways: subscriber callback URLs may not
// point inside the operator's network, in any spelling, neither when created nor when delivered (the
// name is resolved again); delivery errors shown to subscribers carry no raw socket error; inbound
// upstream events are checked against their registration and a DELETE is confirmed with the
// upstream; unknown registration ids do not cost a Postgres lookup per delivery.
import assert from 'node:assert/strict';
import { randomBytes, randomUUID } from 'node:crypto';
import { lookup } from 'node:dns/promises';
import type { LookupAddress } from 'node:dns';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, describe, it } from 'node:test';
import { PrismaPg } from '@prisma/adapter-pg';
import type { FastifyInstance } from 'fastify';
import { createDeliveryActivities } from '../../activities/delivery.ts';
import { buildApp } from '../../api/app.ts';
import { domainHash, keyedHash } from '../../lib/crypto.ts';
import { PrismaClient } from '../../prisma/generated/client.ts';
import { scenario } from '../chaos/report.ts';
import { eventually, linkAndSync, sandboxAdmin, startHarness, upstreamAll, type Harness } from '../helpers/harness.ts';

const file = import.meta.filename;
const group = 'security';

/** The test's own DNS: these names resolve only here (there is no network on this machine); others go to the system's. */
const names: Record<string, string[]> = {
  'public.example.test': ['93.184.216.34'],
  'internal.example.test': ['10.0.0.7'],
  'mixed.example.test': ['93.184.216.34', '127.0.0.1'],
  // A name that answered a public address when the subscription was made, and loopback now.
  'rebound.example.test': ['127.0.0.1'],
};
async function resolve(host: string): Promise<LookupAddress[]> {
  const found = names[host];
  if (!found) return lookup(host, { all: true });
  return found.map((address) => ({ address, family: address.includes(':') ? 6 : 4 }));
}

/** A receiver on loopback that counts the connections it gets. */
async function receiver(status = 200): Promise<{ server: Server; port: number; connections: () => number; close(): Promise<void> }> {
  let connections = 0;
  const server = createServer((req, res) => {
    req.resume();
    req.on('end', () => res.writeHead(status).end());
  });
  server.on('connection', () => connections++);
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return {
    server,
    port: (server.address() as AddressInfo).port,
    connections: () => connections,
    close: () =>
      new Promise<void>((r) => {
        server.closeAllConnections();
        server.close(() => r());
      }),
  };
}

/** A port nothing listens on. */
async function closedPort(): Promise<number> {
  const r = await receiver();
  await r.close();
  return r.port;
}

/** What a raw socket error looks like in a message: none of it may reach a subscriber. */
const rawSocketError = /ECONN|EHOST|ENET|ENOTFOUND|EAI_|getaddrinfo|UND_ERR|127\.0\.0\.1|::1|socket/i;

describe('security: webhooks', { timeout: 300_000 }, () => {
  let h: Harness;
  let account: { accountId: string; accountToken: string };
  /** The API as production builds it: no allow-list, the test's DNS. */
  let guarded: FastifyInstance;
  const headers = () => ({ ...h.clientHeaders, 'account-token': account.accountToken });

  before(async () => {
    h = await startHarness({ sandbox: { size: 12 } });
    account = await linkAndSync(h, 'buildpro');
    guarded = await buildApp({
      pool: h.services.pool,
      prisma: h.services.prisma,
      accounts: h.services.accounts,
      logger: h.services.logger,
      sync: h.sync,
      hashKey: h.services.keys.signingKey,
      encryptionKey: h.services.keys.encryptionKey,
      callbacks: { allow: [], resolve },
    });
    // The upstream's own deliveries stay out of the way: every event here is one the test sends.
    await sandboxAdmin(h, 'PUT', '/_admin/webhook-delivery', { loss_probability: 1 });
  });
  after(async () => {
    await guarded?.close();
    await h?.close();
  });

  it('refuses subscriptions whose callback points inside the network, in every spelling', async () => {
    await scenario(
      group,
      'subscriber callback URLs at loopback, private, link-local, metadata and odd IP spellings',
      async () => {
        const refused = [
          'http://127.0.0.1:6379/hook',
          'http://127.1/hook',
          'http://2130706433/hook',
          'http://0x7f000001/hook',
          'http://0177.0.0.1/hook',
          'http://[::1]/hook',
          'http://[::ffff:127.0.0.1]/hook',
          'http://localhost:4000/hook',
          'http://admin.localhost/hook',
          'http://0.0.0.0:4000/hook',
          'http://10.0.0.1/hook',
          'http://172.16.0.1/hook',
          'http://192.168.1.1/hook',
          'http://100.64.0.1/hook',
          'http://169.254.169.254/latest/meta-data/',
          'http://[fe80::1]/hook',
          'http://[fd00::1]/hook',
          'http://internal.example.test/hook',
          'http://mixed.example.test/hook',
          'https://user:secret@public.example.test/hook',
        ];
        const accepted: string[] = [];
        for (const url of refused) {
          const res = await guarded.inject({
            method: 'POST',
            url: '/webhooks',
            headers: headers(),
            payload: { callback_url: url, event: 'UPDATE', type: 'vendor' },
          });
          if (res.statusCode === 201) {
            accepted.push(url);
            await guarded.inject({ method: 'DELETE', url: `/webhooks/${res.json<{ id: string }>().id}`, headers: headers() });
            continue;
          }
          assert.equal(res.statusCode, 400, `${url}: ${res.body}`);
          assert.match(res.json<{ message: string }>().message, /callback_url/, `${url}: the message names the field`);
        }
        assert.deepEqual(accepted, [], 'every internal callback is refused');
        const ok = await guarded.inject({
          method: 'POST',
          url: '/webhooks',
          headers: headers(),
          payload: { callback_url: 'https://public.example.test/hook', event: 'UPDATE', type: 'vendor' },
        });
        assert.equal(ok.statusCode, 201, ok.body);
        await guarded.inject({ method: 'DELETE', url: `/webhooks/${ok.json<{ id: string }>().id}`, headers: headers() });
        return {
          tries: refused.length + 1,
          outcome: `${refused.length} internal callbacks refused with 400 (IP literals in every WHATWG spelling, localhost names, names resolving inside, userinfo); a public name accepted`,
        };
      },
      file,
    );
  });

  it("refuses a subscription to another account's project, as the upstream does", async () => {
    const other = await h.link('buildpro', 'webhooks-other');
    const firstProject = async (token: string) => (await upstreamAll(h, '/projects', { 'account-token': token }, 5))[0]!;
    const theirs = String((await firstProject(other.accountToken)).id);
    const mine = await firstProject(account.accountToken);
    const subscribe = async (base: string, auth: Record<string, string>, projectId: string) => {
      const res = await fetch(`${base}/webhooks`, {
        method: 'POST',
        headers: { ...auth, 'account-token': account.accountToken, 'project-id': projectId, 'content-type': 'application/json' },
        body: JSON.stringify({ callback_url: 'http://127.0.0.1:9/hook', event: 'CREATE', type: 'file' }),
      });
      return { status: res.status, body: (await res.json()) as { id?: string; project_id?: string; message?: string } };
    };
    const upstream = await subscribe(h.sandbox.url, h.upstreamHeaders, theirs);
    assert.equal(upstream.status, 404, `the sandbox refuses it: ${JSON.stringify(upstream.body)}`);
    const refused = await subscribe(h.apiUrl, h.clientHeaders, theirs);
    assert.equal(refused.status, upstream.status, `the mirror answers as the upstream: ${JSON.stringify(refused.body)}`);
    assert.match(refused.body.message ?? '', new RegExp(theirs));
    const listed = (await (await fetch(`${h.apiUrl}/webhooks`, { headers: headers() })).json()) as { data: { project_id?: string }[] };
    assert.ok(!listed.data.some((w) => w.project_id === theirs), "no subscription names the other account's project");

    // One of its own projects, named by its source id: kept by its service id, as the upstream answers it.
    const bySourceId = `source_id:${String(mine.source_id)}`;
    const upstreamOwn = await subscribe(h.sandbox.url, h.upstreamHeaders, bySourceId);
    const own = await subscribe(h.apiUrl, h.clientHeaders, bySourceId);
    assert.equal(upstreamOwn.status, 201, JSON.stringify(upstreamOwn.body));
    assert.equal(own.status, 201, JSON.stringify(own.body));
    assert.equal(upstreamOwn.body.project_id, mine.id);
    assert.equal(own.body.project_id, upstreamOwn.body.project_id);
    await fetch(`${h.sandbox.url}/webhooks/${upstreamOwn.body.id}`, {
      method: 'DELETE',
      headers: { ...h.upstreamHeaders, 'account-token': account.accountToken },
    });
    await fetch(`${h.apiUrl}/webhooks/${own.body.id}`, { method: 'DELETE', headers: headers() });
  });

  it('delivers only to a checked address, and tells the subscriber what failed without the socket error', async () => {
    await scenario(
      group,
      'delivery to a name that resolves to loopback at delivery time; raw socket errors in last_error',
      async () => {
        const listening = await receiver();
        const failing = await receiver(500);
        const closed = await closedPort();
        try {
          const subscription = async (callbackUrl: string) =>
            h.services.prisma.subscription.create({
              // Created before the name moved (or before the guard existed): the delivery must check again.
              data: { id: randomUUID(), accountId: account.accountId, callbackUrl, event: '*', type: 'vendor', cursorAt: new Date(0) },
            });
          const lastError = async (id: string) => (await h.services.prisma.subscription.findUniqueOrThrow({ where: { id } })).lastError ?? '';
          const deliver = (allow: string[]) =>
            createDeliveryActivities({
              pool: h.services.pool,
              prisma: h.services.prisma,
              encryptionKey: h.services.keys.encryptionKey,
              logger: h.services.logger,
              callbacks: { allow, resolve },
            });

          // Names that resolve to loopback now: nothing connects to the receiver.
          const rebound = await subscription(`http://rebound.example.test:${listening.port}/hook`);
          const local = await subscription(`http://localhost:${listening.port}/hook`);
          for (const sub of [rebound, local]) {
            await assert.rejects(deliver([]).deliverChanges({ subscriptionId: sub.id }), `${sub.callbackUrl} is not delivered`);
            assert.match(await lastError(sub.id), /callback address not allowed/, sub.callbackUrl);
            assert.doesNotMatch(await lastError(sub.id), rawSocketError, sub.callbackUrl);
          }
          assert.equal(listening.connections(), 0, 'the receiver on loopback was never contacted');

          // Allowed by the operator (as in the test suites): the failures shown say what failed, in words.
          const refused = await subscription(`http://127.0.0.1:${closed}/hook`);
          await assert.rejects(deliver(['127.0.0.1']).deliverChanges({ subscriptionId: refused.id }));
          assert.match(await lastError(refused.id), /could not connect to the callback host/);
          assert.doesNotMatch(await lastError(refused.id), rawSocketError);
          const shown = await h.app.inject({ method: 'GET', url: `/webhooks/${refused.id}`, headers: headers() });
          assert.equal(shown.statusCode, 200);
          const delivery = shown.json<{ delivery: { failures: number; last_error: string } }>().delivery;
          assert.equal(delivery.failures, 1);
          assert.doesNotMatch(delivery.last_error, rawSocketError, 'GET /webhooks/:id shows no socket error');

          const erroring = await subscription(`http://127.0.0.1:${failing.port}/hook`);
          await assert.rejects(deliver(['127.0.0.1']).deliverChanges({ subscriptionId: erroring.id }));
          assert.match(await lastError(erroring.id), /the callback answered 500/);

          const delivered = await subscription(`http://127.0.0.1:${listening.port}/hook`);
          const result = await deliver(['127.0.0.1']).deliverChanges({ subscriptionId: delivered.id, limit: 3 });
          assert.equal(result.delivered, 3, 'an allowed receiver gets its deliveries');
          return {
            tries: 5,
            outcome:
              'loopback by name (injected DNS and localhost) refused at delivery with no connection made; last_error says "callback address not allowed", "could not connect", "answered 500", never the socket error; allowed receiver delivered',
          };
        } finally {
          await listening.close();
          await failing.close();
        }
      },
      file,
    );
  });

  describe('inbound upstream events', () => {
    let secret: string;
    let projects: string[];
    const registration = async (r: { type: string; event: string; projectId?: string }) => {
      const id = randomUUID();
      secret = `forged-${randomBytes(12).toString('hex')}`;
      await h.services.prisma.webhookRegistration.create({
        data: {
          id,
          accountId: account.accountId,
          type: r.type,
          event: r.event,
          projectId: r.projectId ?? null,
          authorizationHash: domainHash(h.services.keys.signingKey, 'webhookAuthorization', secret),
        },
      });
      return { id, secret };
    };
    const send = (reg: { id: string; secret: string }, body: Record<string, unknown>) =>
      fetch(`${h.apiUrl}/webhooks/inbound/${reg.id}`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', authorization: reg.secret },
        body: JSON.stringify(body),
      });
    const applied = (regId: string, target: string) =>
      eventually(
        `the event for ${target} to be applied`,
        async () => {
          const { rows } = await h.services.pool.query<{ outcome: string | null }>(
            `SELECT outcome FROM inbox_events WHERE registration_id = $1 AND target = $2 AND applied_at IS NOT NULL`,
            [regId, target],
          );
          return rows[0]?.outcome ?? undefined;
        },
        60_000,
      );
    const deletedAt = async (resource: string, id: string, scope = '') =>
      (
        await h.services.pool.query<{ deleted_at: Date | null }>(
          `SELECT deleted_at FROM records WHERE account_id = $1 AND resource = $2 AND scope = $3 AND id = $4`,
          [account.accountId, resource, scope, id],
        )
      ).rows[0]?.deleted_at;

    before(async () => {
      projects = (await upstreamAll(h, '/projects', { 'account-token': account.accountToken })).map((p) => String(p.id));
      assert.ok(projects.length >= 2, 'two projects at least');
    });

    it('does not delete a record on a forged DELETE while the upstream still has it', async () => {
      await scenario(
        group,
        'forged DELETE event for a record the upstream still has',
        async () => {
          const reg = await registration({ type: 'vendor', event: 'DELETE' });
          const [vendor] = await upstreamAll(h, '/vendors', { 'account-token': account.accountToken });
          const id = String(vendor!.id);
          assert.equal(await deletedAt('vendors', id), null, 'mirrored and live before');
          const res = await send(reg, { event: 'DELETE', type: 'vendor', target: id });
          assert.equal(res.status, 200, await res.text());
          const outcome = await applied(reg.id, id);
          assert.equal(await deletedAt('vendors', id), null, `still live (outcome: ${outcome})`);
          assert.match(outcome, /upstream still has/);
          const read = await h.app.inject({ method: 'GET', url: `/vendors/${id}`, headers: headers() });
          assert.equal(read.statusCode, 200);
          return { tries: 1, outcome: `not deleted; the upstream was asked and still had it ("${outcome}")` };
        },
        file,
      );
    });

    it('still deletes on a DELETE the upstream confirms with a 404', async () => {
      await scenario(
        group,
        'genuine DELETE event (the upstream answers 404)',
        async () => {
          const reg = await registration({ type: 'vendor', event: 'DELETE' });
          const vendors = await upstreamAll(h, '/vendors', { 'account-token': account.accountToken });
          const id = String(vendors[vendors.length - 1]!.id);
          await sandboxAdmin(h, 'DELETE', '/_admin/objects', { account_token: account.accountToken, resource: 'vendors', id });
          const res = await send(reg, { event: 'DELETE', type: 'vendor', target: id });
          assert.equal(res.status, 200, await res.text());
          const outcome = await applied(reg.id, id);
          assert.match(outcome, /^deleted/);
          assert.ok(await deletedAt('vendors', id), 'marked deleted');
          return { tries: 1, outcome: `deleted after the upstream's 404 ("${outcome}")` };
        },
        file,
      );
    });

    it("does not apply an event to another project than its registration's", async () => {
      await scenario(
        group,
        "event naming another project than its registration's",
        async () => {
          const [p1, p2] = projects as [string, string];
          const reg = await registration({ type: 'file', event: 'DELETE', projectId: p1 });
          const files = await upstreamAll(h, '/files', { 'account-token': account.accountToken, 'project-id': p2 });
          const id = String(files[0]!.id);
          const scope = `project=${p2}`;
          assert.equal(await deletedAt('files', id, scope), null, 'mirrored and live before');
          const before = await h.services.prisma.inboxEvent.count({ where: { registrationId: reg.id } });
          // The upstream is made to answer 404 for it, so only the project check stands in the way.
          await sandboxAdmin(h, 'DELETE', '/_admin/objects', { account_token: account.accountToken, resource: 'files', id, project_id: p2 });
          const res = await send(reg, { event: 'DELETE', type: 'file', project_id: p2, target: id });
          assert.equal(res.status, 400, 'refused');
          assert.match(((await res.json()) as { message: string }).message, /project/);
          assert.equal(await h.services.prisma.inboxEvent.count({ where: { registrationId: reg.id } }), before, 'nothing stored');
          // Without a project_id the registration's own project is used: the other project's file stays.
          const own = await send(reg, { event: 'DELETE', type: 'file', target: id });
          assert.equal(own.status, 200);
          await applied(reg.id, id);
          assert.equal(await deletedAt('files', id, scope), null, "the other project's file is untouched");
          return { tries: 2, outcome: "refused with 400 (another project); without project_id applied to the registration's own project only" };
        },
        file,
      );
    });

    it('refuses events whose type, event or target do not fit the registration', async () => {
      await scenario(
        group,
        'inbound events with a foreign type, event or an implausible target',
        async () => {
          const reg = await registration({ type: 'vendor', event: 'UPDATE' });
          const target = randomUUID();
          const bad = [
            { event: 'UPDATE', type: 'customer', target },
            { event: 'DELETE', type: 'vendor', target },
            { event: 'UPDATE', type: 'vendor', target: '../../_admin/accounts' },
            { event: 'UPDATE', type: 'vendor', target: 'x\\..\\y' },
            { event: 'UPDATE', type: 'vendor', target: 'customer:*' },
          ];
          for (const body of bad) {
            const res = await send(reg, body);
            assert.equal(res.status, 400, `${JSON.stringify(body)}: ${res.status}`);
          }
          assert.equal(await h.services.prisma.inboxEvent.count({ where: { registrationId: reg.id } }), 0, 'nothing stored');
          return { tries: bad.length, outcome: 'each refused with 400 and a reason, nothing stored' };
        },
        file,
      );
    });
  });

  it('looks an unknown registration id up in Postgres once, not once per delivery', async () => {
    await scenario(
      group,
      'flood of deliveries to one unknown (well-formed) registration id',
      async () => {
        // The API over a Prisma client of its own whose queries are counted (Prisma's query events).
        const prisma = new PrismaClient({ adapter: new PrismaPg({ connectionString: h.db.url, max: 2 }), log: [{ emit: 'event', level: 'query' }] });
        let lookups = 0;
        prisma.$on('query', (e) => {
          if (e.query.includes('webhook_registrations')) lookups++;
        });
        const app = await buildApp({
          pool: h.services.pool,
          prisma,
          accounts: h.services.accounts,
          logger: h.services.logger,
          hashKey: h.services.keys.signingKey,
        });
        try {
          const id = randomUUID();
          const secret = `s-${randomBytes(12).toString('hex')}`;
          const deliver = () =>
            app.inject({
              method: 'POST',
              url: `/webhooks/inbound/${id}`,
              headers: { authorization: secret, 'content-type': 'application/json' },
              payload: { event: 'UPDATE', type: 'vendor', target: randomUUID() },
            });
          const n = 100;
          const statuses: number[] = [];
          for (let i = 0; i < n / 2; i++) statuses.push((await deliver()).statusCode);
          statuses.push(...(await Promise.all(Array.from({ length: n / 2 }, deliver))).map((r) => r.statusCode));
          assert.ok(
            statuses.every((s) => s === 401),
            'every delivery refused',
          );
          assert.ok(lookups <= 5, `${n} deliveries to one unknown id cost ${lookups} lookups`);
          // The miss is remembered briefly: a registration made afterwards is accepted soon. (It is stored
          // as versions before the hash domains stored it, unprefixed: those registrations still work.)
          await h.services.prisma.webhookRegistration.create({
            data: { id, accountId: account.accountId, type: 'vendor', event: 'UPDATE', authorizationHash: keyedHash(h.services.keys.signingKey, secret) },
          });
          const t0 = Date.now();
          await eventually('the new registration to be accepted', async () => ((await deliver()).statusCode === 200 ? true : undefined), 15_000, 250);
          return {
            tries: n,
            outcome: `${n} deliveries cost ${lookups} registration lookups; a registration made afterwards accepted within ${Date.now() - t0} ms`,
          };
        } finally {
          await app.close();
          await prisma.$disconnect();
        }
      },
      file,
    );
  });
});
