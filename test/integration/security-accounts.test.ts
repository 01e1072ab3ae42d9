// Security of linked accounts: an account belongs to the mirror
// client that linked it, and a re-link hands its data to a new token only when the same client
// re-links and the upstream names the same linked company and user; link sessions end with an unlink
// and with the upstream; account-token lookup hashes live in their own hash domain (legacy hashes
// are still found, and upgraded). Each case is also a chaos scenario (group 'security').
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { after, before, describe, it } from 'node:test';
import { upsertApiClient } from '../../api/auth.ts';
import { keyedHash, randomSecret } from '../../lib/crypto.ts';
import { printOwnRows, scenario } from '../chaos/report.ts';
import { linkAndSync, sandboxAdmin, startHarness, type Harness } from '../helpers/harness.ts';

const file = import.meta.filename;
const group = 'security';

interface Answer {
  status: number;
  body: Record<string, unknown>;
}

describe('security: linked accounts and their sessions', { timeout: 300_000 }, () => {
  let h: Harness;
  /** A second API client of the same mirror. */
  let clientB: Record<string, string>;

  before(async () => {
    h = await startHarness({ sandbox: { size: 3 } });
    const id = randomUUID();
    const secret = randomSecret(40);
    await upsertApiClient(h.services.prisma, id, secret, 'client-b');
    clientB = { 'api-version': '2021-11-21', 'client-id': id, 'client-secret': secret };
  });

  after(async () => {
    await h?.close();
    printOwnRows();
  });

  async function call(method: string, path: string, headers: Record<string, string>, body?: unknown): Promise<Answer> {
    const res = await fetch(`${h.apiUrl}${path}`, {
      method,
      headers: { ...headers, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    const text = await res.text();
    let parsed: Record<string, unknown>;
    try {
      parsed = text ? (JSON.parse(text) as Record<string, unknown>) : {};
    } catch {
      parsed = { text };
    }
    return { status: res.status, body: parsed };
  }

  /** Links through the mirror's API as a client: token create and exchange forwarded, the Link page played by the sandbox. */
  async function linkVia(
    client: Record<string, string>,
    referenceId: string,
    sourceSystem: string,
    login?: string,
  ): Promise<{ accountToken: string; linked: Record<string, unknown> }> {
    const created = await call('POST', '/link/token/create', client, { reference_id: referenceId });
    assert.equal(created.status, 200, JSON.stringify(created.body));
    const { public_token } = await sandboxAdmin<{ public_token: string }>(h, 'POST', '/_admin/link/public-token', {
      link_token: created.body.link_token,
      source_system: sourceSystem,
      ...(login ? { login } : {}),
    });
    const exchanged = await call('POST', '/link/token/exchange', client, { public_token });
    assert.equal(exchanged.status, 200, JSON.stringify(exchanged.body));
    return { accountToken: exchanged.body.account_token as string, linked: exchanged.body };
  }

  const accountRow = async (id: string) =>
    (
      await h.services.pool.query<{ token_hash: string; token_ciphertext: Buffer; status: string }>(
        'SELECT token_hash, token_ciphertext, status FROM linked_accounts WHERE id = $1',
        [id],
      )
    ).rows[0]!;
  const accountIdOfToken = async (token: string) => {
    const hashes = [keyedHash(h.services.keys.signingKey, `account-token:${token}`), keyedHash(h.services.keys.signingKey, token)];
    const { rows } = await h.services.pool.query<{ id: string }>('SELECT id FROM linked_accounts WHERE token_hash = ANY($1)', [hashes]);
    return rows[0]?.id;
  };
  const recordCount = async (accountId: string) =>
    (await h.services.pool.query<{ n: number }>('SELECT count(*)::int AS n FROM records WHERE account_id = $1', [accountId])).rows[0]!.n;
  const asAccount = (client: Record<string, string>, token: string) => ({ ...client, 'account-token': token });
  const asSession = (secret: string) => ({ 'api-version': '2021-11-21', session: secret });

  it("client B re-linking client A's reference id gets an account of its own: A's account, token and data stay A's", async () => {
    await scenario(
      group,
      'another client re-links a linked reference id',
      async () => {
        const a = await linkAndSync(h, 'buildpro', 'shared-ref');
        const before = await accountRow(a.accountId);
        const records = await recordCount(a.accountId);
        assert.ok(records > 0, 'A has mirrored data');
        let tries = 0;
        // The same person signing in again for B, and another one: neither reaches A's account.
        for (const login of [undefined, 'intruder']) {
          const b = await linkVia(clientB, 'shared-ref', 'buildpro', login);
          tries++;
          const bAccount = await accountIdOfToken(b.accountToken);
          assert.ok(bAccount, "B's token is registered");
          assert.notEqual(bAccount, a.accountId, `B (login ${login ?? 'the usual user'}) must not get A's account`);
          const after = await accountRow(a.accountId);
          assert.equal(after.token_hash, before.token_hash, "A's token is not replaced");
          assert.deepEqual(after.token_ciphertext, before.token_ciphertext, "A's token is not replaced");
          assert.equal(await recordCount(a.accountId), records, "A's data stays");
          const mine = await call('GET', '/projects', asAccount(h.clientHeaders, a.accountToken));
          assert.equal(mine.status, 200, `A still reads with its token: ${JSON.stringify(mine.body)}`);
        }
        return { tries, outcome: "B got accounts of its own; A's token, account and data unchanged" };
      },
      file,
    );
  });

  it("client B presenting A's account token is refused as an unknown token, and cannot adopt it", async () => {
    await scenario(
      group,
      "another client presents a linked account's token",
      async () => {
        const a = await linkAndSync(h, 'buildpro', 'token-owner');
        const unknown = await call('GET', '/projects', asAccount(clientB, 'not-a-token-of-anyone'));
        assert.equal(unknown.status, 401);
        const stolen = await call('GET', '/projects', asAccount(clientB, a.accountToken));
        assert.equal(stolen.status, 401, `B with A's token: ${stolen.status} ${JSON.stringify(stolen.body).slice(0, 200)}`);
        assert.equal(stolen.body.message, unknown.body.message, 'the same answer as an unknown token: nothing leaks');
        const again = await call('GET', '/projects', asAccount(clientB, a.accountToken));
        assert.equal(again.status, 401, 'and again (no cache lets it through)');
        const adopt = await call('POST', '/mirror/accounts', clientB, { account_token: a.accountToken });
        assert.equal(adopt.status, 409, `B adopting A's token: ${adopt.status} ${JSON.stringify(adopt.body)}`);
        assert.ok(!JSON.stringify(adopt.body).includes(a.accountId), "the refusal does not name A's account");
        const mine = await call('GET', '/projects', asAccount(h.clientHeaders, a.accountToken));
        assert.equal(mine.status, 200, 'A still reads with its token');
        const own = await call('POST', '/mirror/accounts', h.clientHeaders, { account_token: a.accountToken });
        assert.equal(own.status, 201, `A adopting its own token again: ${JSON.stringify(own.body)}`);
        assert.equal(own.body.id, a.accountId, 'is the same account');
        return { tries: 4, outcome: '401 like an unknown token for reads; 409 for adoption; A unaffected' };
      },
      file,
    );
  });

  it('a re-link by the same client whose upstream names another linked user starts a new account', async () => {
    await scenario(
      group,
      'same client re-links a reference id for another upstream user',
      async () => {
        const a = await linkAndSync(h, 'buildpro', 'relinked-ref');
        const other = await linkVia(h.clientHeaders, 'relinked-ref', 'buildpro', 'someone-else');
        const otherAccount = await accountIdOfToken(other.accountToken);
        assert.ok(otherAccount);
        assert.notEqual(otherAccount, a.accountId, 'another linked user does not inherit the old account and its data');
        const mine = await call('GET', '/projects', asAccount(h.clientHeaders, a.accountToken));
        assert.equal(mine.status, 200, "the first user's token still reads its own account");
        // The same user again: the upstream names the same company and user, so the data is kept.
        const same = await linkVia(h.clientHeaders, 'relinked-ref', 'buildpro');
        assert.equal(await accountIdOfToken(same.accountToken), a.accountId, 'the same upstream user keeps its account');
        return { tries: 2, outcome: 'another user: a new account; the same user: the same account' };
      },
      file,
    );
  });

  it('after an unlink, a session created before it is refused at once', async () => {
    await scenario(
      group,
      'a link session used after its account was unlinked',
      async () => {
        const a = await linkAndSync(h, 'buildpro', 'unlinked-ref');
        const created = await call('POST', '/link/sessions', asAccount(h.clientHeaders, a.accountToken), { name: 'picker', ttl: '3600', mode: 'file-picker' });
        assert.equal(created.status, 201, JSON.stringify(created.body));
        const secret = created.body.session as string;
        assert.equal((await call('GET', '/projects', asSession(secret))).status, 200, 'the session reads before the unlink');
        await h.services.accounts.unlink(a.accountId);
        const refused = await call('GET', '/projects', asSession(secret));
        assert.equal(refused.status, 401, `after the unlink: ${refused.status}`);
        const { rows } = await h.services.pool.query<{ n: number }>(
          'SELECT count(*)::int AS n FROM link_sessions WHERE account_id = $1 AND expires_at > now()',
          [a.accountId],
        );
        assert.equal(rows[0]!.n, 0, 'the unlink ended its sessions');

        // An account unlinked without ending its sessions (a row left by an older version): refused too.
        const b = await linkAndSync(h, 'buildpro', 'unlinked-ref-2');
        const s2 = await call('POST', '/link/sessions', asAccount(h.clientHeaders, b.accountToken), { name: 'picker', ttl: '3600', mode: 'file-picker' });
        assert.equal(s2.status, 201);
        await h.services.pool.query(`UPDATE linked_accounts SET status = 'unlinked', unlinked_at = now() WHERE id = $1`, [b.accountId]);
        const refused2 = await call('GET', '/projects', asSession(s2.body.session as string));
        assert.equal(refused2.status, 401, `a session of an unlinked account: ${refused2.status}`);
        return { tries: 2, outcome: 'refused with 401 at once; the sessions were ended by the unlink' };
      },
      file,
    );
  });

  it('a session expired at the upstream is refused by the mirror', async () => {
    await scenario(
      group,
      'a link session expired upstream, not through the mirror',
      async () => {
        const a = await linkAndSync(h, 'buildpro', 'expired-upstream-ref');
        const created = await call('POST', '/link/sessions', asAccount(h.clientHeaders, a.accountToken), { name: 'picker', ttl: '3600', mode: 'file-picker' });
        assert.equal(created.status, 201, JSON.stringify(created.body));
        // Expired directly at the upstream: the mirror's row still says an hour.
        await sandboxAdminAsAccount(`/link/sessions/${created.body.id as string}/expire`, a.accountToken);
        const refused = await call('GET', '/projects', asSession(created.body.session as string));
        assert.equal(refused.status, 401, `a session the upstream expired: ${refused.status}`);
        const { rows } = await h.services.pool.query<{ expired: boolean }>('SELECT expires_at <= now() AS expired FROM link_sessions WHERE id = $1', [
          created.body.id,
        ]);
        assert.equal(rows[0]?.expired, true, 'the mirror recorded the expiry');
        return { tries: 1, outcome: 'refused with 401; expired locally' };
      },
      file,
    );
  });

  it('an account token registered under the legacy (unprefixed) lookup hash is found, and its hash upgraded', async () => {
    await scenario(
      group,
      'a token hash from before the hash domains',
      async () => {
        const a = await h.link('buildpro', 'legacy-hash-ref');
        const key = h.services.keys.signingKey;
        await h.services.pool.query('UPDATE linked_accounts SET token_hash = $2 WHERE id = $1', [a.accountId, keyedHash(key, a.accountToken)]);
        const read = await call('GET', '/link/account', asAccount(h.clientHeaders, a.accountToken));
        assert.equal(read.status, 200, `found by its legacy hash: ${JSON.stringify(read.body)}`);
        assert.equal((await accountRow(a.accountId)).token_hash, keyedHash(key, `account-token:${a.accountToken}`), 'upgraded to the account-token domain');
        const again = await call('GET', '/link/account', asAccount(h.clientHeaders, a.accountToken));
        assert.equal(again.status, 200, 'and found by the new hash');
        return { tries: 1, outcome: 'found, and rehashed with the account-token: prefix' };
      },
      file,
    );
  });

  /** Calls the sandbox directly as the upstream client with an account token (what the mirror cannot see). */
  async function sandboxAdminAsAccount(path: string, accountToken: string): Promise<void> {
    const res = await fetch(`${h.sandbox.url}${path}`, {
      method: 'POST',
      headers: { ...h.upstreamHeaders, 'account-token': accountToken, 'content-type': 'application/json' },
      body: '{}',
    });
    assert.ok(res.ok, `${path}: ${res.status} ${await res.text()}`);
  }
});
