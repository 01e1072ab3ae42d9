// The operator's command line against a whole mirror (sandbox, Temporal dev server, a worker on the
// harness's task queue): link an account, list it, sync with a final table, status, webhooks, resync,
// unlink (its schedules go), and the exit codes of what goes wrong. Each command is the real
// `node bin/mirror.js`, in its own process.
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { tmpdir } from 'node:os';
import { after, before, describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';
import { ScheduleNotFoundError } from '@temporalio/client';
import { decodeKey, decryptSecret, generateKey, keyedHash } from '../../lib/crypto.ts';
import { cliEnv, startHarness, type Harness } from '../helpers/harness.ts';

const mirrorBin = fileURLToPath(new URL('../../bin/mirror.js', import.meta.url));

describe('mirror CLI for operators', { timeout: 420_000 }, () => {
  let h: Harness;
  let env: Record<string, string>;
  let accountId: string;

  function mirror(...args: string[]): Promise<{ code: number; out: string; err: string }> {
    return new Promise((resolve, reject) => {
      const child = spawn(process.execPath, [mirrorBin, ...args], {
        cwd: tmpdir(),
        env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '', ...env },
        stdio: ['ignore', 'pipe', 'pipe'],
      });
      let out = '';
      let err = '';
      child.stdout.on('data', (d: Buffer) => (out += d.toString()));
      child.stderr.on('data', (d: Buffer) => (err += d.toString()));
      child.once('error', reject);
      child.once('exit', (code) => resolve({ code: code ?? 1, out, err }));
    });
  }

  before(async () => {
    h = await startHarness({ sandbox: { size: 15 } });
    env = { ...cliEnv(h), UPSTREAM_ASSUME_LIMITS: 'false', LOG_LEVEL: 'silent' };
  });
  after(async () => {
    if (accountId) await h?.sync.deleteSchedules(accountId).catch(() => undefined);
    await h?.close();
  });

  it('links an account through the sandbox Link page and starts its first sync and schedules', async () => {
    const r = await mirror('link', '--reference-id', 'cli-test', '--source-system', 'crmcloud', '--json');
    assert.equal(r.code, 0, r.err);
    assert.match(r.err, /Link URL: http:\/\/127\.0\.0\.1:\d+\/link\?link_token=/);
    const linked = JSON.parse(r.out) as { accountId: string; accountToken: string; sourceSystem: string; syncWorkflowId: string };
    accountId = linked.accountId;
    assert.equal(linked.sourceSystem, 'crmcloud');
    assert.ok(linked.accountToken.length > 10);
    assert.equal(linked.syncWorkflowId, `account-sync:${accountId}`);
    const first = (await h.temporal.workflow.getHandle(linked.syncWorkflowId).result()) as { failed: unknown[]; records: number };
    assert.deepEqual(first.failed, []);
    assert.equal(first.records, 60);
    const schedule = await h.temporal.schedule.getHandle(`account-full:${accountId}`).describe();
    assert.equal(schedule.action.type, 'startWorkflow');
  });

  it('lists the account, and its status per resource and per stream', async () => {
    const accounts = await mirror('accounts', '--json');
    assert.equal(accounts.code, 0, accounts.err);
    const [a] = JSON.parse(accounts.out) as { id: string; liveRecords: number; states: Record<string, number> }[];
    assert.equal(a?.id, accountId);
    assert.equal(a.liveRecords, 60);
    assert.equal(a.states.synced, 4);
    const table = await mirror('accounts');
    assert.match(table.out, new RegExp(`${accountId}\\s+crmcloud\\s+linked\\s+cli-test\\s+4/4\\s+60`));

    const status = await mirror('status', '--json', '--account', accountId.slice(0, 8));
    assert.equal(status.code, 0, status.err);
    const s = JSON.parse(status.out) as {
      accounts: { id: string; resources: { resource: string; liveRecords: number; lagSeconds: number }[]; streams: { state: string }[] }[];
    };
    assert.equal(s.accounts[0]?.resources.length, 4);
    assert.ok(s.accounts[0].resources.every((r) => r.liveRecords === 15 && r.lagSeconds >= 0));
    assert.ok(s.accounts[0].streams.every((x) => x.state === 'synced'));
    const streams = await mirror('status', '--streams');
    assert.match(streams.out, /customers\s+-\s+synced\s+15\s+20\d\d-/);
  });

  it('syncs one resource with a final table, and resyncs', async () => {
    // Nothing changed upstream: an incremental pass (CRM Cloud filters on update time) writes nothing.
    const sync = await mirror('sync', '--account', accountId, '--mode', 'incremental', '--resource', 'leads');
    assert.equal(sync.code, 0, sync.err);
    assert.match(sync.err, /^Started an incremental pass of CRM Cloud account .* \(leads\): workflow account-sync:.*:leads/);
    assert.match(sync.err, /leads\s+\[#{24}\]\s+0 rec\s+1 pg\s+synced/, 'a finished bar for the stream');
    assert.match(sync.out, /^resource\s+streams\s+failed\s+pages\s+records\s+inserted\s+updated\s+unchanged\s+deleted\s+seconds$/m);
    assert.match(sync.out, /^leads\s+1\s+1\s+0\s+0\s+0\s+0\s+0\s/m);
    assert.match(sync.out, /^total\s+1\s/m);

    const resync = await mirror('resync', '--account', accountId, '--json');
    assert.equal(resync.code, 0, resync.err);
    const r = JSON.parse(resync.out) as { result: { streams: number; failed: unknown[] }; totals: { resource: string; records: number; unchanged: number }[] };
    assert.equal(r.result.streams, 4);
    assert.deepEqual(r.result.failed, []);
    assert.equal(r.totals.length, 4);
    assert.ok(
      r.totals.every((t) => t.records === 15 && t.unchanged === 15),
      JSON.stringify(r.totals),
    );
  });

  it('lists the upstream webhooks the first sync registered, and registers them again with --force', async () => {
    const token = await h.services.accounts.token(accountId);
    const upstreamIds = async () =>
      new Set(
        (
          (await (await fetch(`${h.sandbox.url}/webhooks`, { headers: { ...h.upstreamHeaders, 'account-token': token } })).json()) as { data: { id: string }[] }
        ).data.map((w) => w.id),
      );
    const list = await mirror('webhooks', 'list', '--account', accountId, '--json');
    assert.equal(list.code, 0, list.err);
    const { registrations } = JSON.parse(list.out) as { registrations: { upstreamId: string; event: string }[] };
    const n = registrations.length;
    assert.ok(n > 0, 'the first sync registered webhooks');
    assert.deepEqual(await upstreamIds(), new Set(registrations.map((r) => r.upstreamId)));
    const register = await mirror('webhooks', 'register', '--account', accountId);
    assert.equal(register.code, 0, register.err);
    assert.match(register.out, new RegExp(`^Registered 0 webhooks for ${accountId} \\(now ${n}\\)`), 'nothing is missing');
    const again = await mirror('webhooks', 'register', '--account', accountId, '--force');
    assert.equal(again.code, 0, again.err);
    assert.match(again.out, new RegExp(`Removed ${n} registrations; registered ${n} webhooks`));
    const after = await upstreamIds();
    assert.equal(after.size, n, 'the old registrations were deleted upstream');
    assert.ok(
      registrations.every((r) => !after.has(r.upstreamId)),
      'and new ones made',
    );
  });

  it('says what is wrong in one line, with the exit code of its kind', async () => {
    const unknown = await mirror('sync', '--account', '00000000-0000-4000-8000-000000000000');
    assert.equal(unknown.code, 4);
    assert.match(unknown.err, /^mirror sync: No linked account 00000000-0000-4000-8000-000000000000\. `npx mirror accounts` lists the linked accounts\.\n$/);
    const usage = await mirror('unlink');
    assert.equal(usage.code, 2);
    assert.match(usage.err, /name the account with --account <value>/);
    env = { ...env, TEMPORAL_ADDRESS: '127.0.0.1:1' };
    try {
      const noTemporal = await mirror('sync', '--account', accountId);
      assert.equal(noTemporal.code, 3);
      assert.equal(noTemporal.err.trim().split('\n').length, 1, noTemporal.err);
      assert.match(noTemporal.err, /Temporal does not answer at 127\.0\.0\.1:1: start it .* or set TEMPORAL_ADDRESS/);
    } finally {
      env = { ...env, TEMPORAL_ADDRESS: h.services.config.TEMPORAL_ADDRESS };
    }
    const noDb = await mirror('accounts');
    assert.equal(noDb.code, 0);
    env = { ...env, DATABASE_URL: 'postgresql://postgres@127.0.0.1:1/mirror' };
    try {
      const down = await mirror('accounts');
      assert.equal(down.code, 3);
      assert.match(down.err, /^mirror accounts: No PostgreSQL answers at 127\.0\.0\.1:1: start it/);
    } finally {
      env = { ...env, DATABASE_URL: h.services.config.DATABASE_URL };
    }
  });

  it('unlinks the account: schedules deleted, token refused, data kept', async () => {
    const r = await mirror('unlink', '--account', accountId);
    assert.equal(r.code, 0, r.err);
    assert.match(r.out, /schedules deleted/);
    for (const id of [`account-full:${accountId}`, `account-incremental:${accountId}`]) {
      await assert.rejects(h.temporal.schedule.getHandle(id).describe(), ScheduleNotFoundError, `${id} is gone`);
    }
    assert.equal((await h.services.accounts.get(accountId)).status, 'unlinked');
    const { rows } = await h.services.pool.query<{ n: number }>('SELECT count(*)::int AS n FROM records WHERE account_id = $1', [accountId]);
    assert.equal(rows[0]!.n, 60);
    const sync = await mirror('sync', '--account', accountId);
    assert.equal(sync.code, 2);
    assert.match(sync.err, /is unlinked; link it again/);
  });

  it('re-seals account tokens after the encryption and signing keys changed', async () => {
    const token = await h.services.accounts.token(accountId);
    const oldEncryptionKey = env.MIRROR_ENCRYPTION_KEY!;
    env = { ...env, MIRROR_ENCRYPTION_KEY: generateKey(), MIRROR_SIGNING_KEY: generateKey() };
    const refused = await mirror('rekey');
    assert.equal(refused.code, 2);
    assert.match(refused.err, /pass the previous key with --old-encryption-key/);
    const r = await mirror('rekey', '--old-encryption-key', oldEncryptionKey);
    assert.equal(r.code, 0, r.err);
    assert.match(r.out, /Re-sealed 1 account tokens \(1 lookup hashes changed\)/);
    assert.match(r.out, new RegExp(`npx mirror webhooks register --account ${accountId} --force`));
    const row = await h.services.prisma.linkedAccount.findUniqueOrThrow({ where: { id: accountId } });
    assert.equal(decryptSecret(decodeKey(env.MIRROR_ENCRYPTION_KEY!), row.tokenCiphertext), token);
    assert.equal(row.tokenHash, keyedHash(decodeKey(env.MIRROR_SIGNING_KEY!), `account-token:${token}`));
    const again = await mirror('rekey');
    assert.equal(again.code, 0, 'idempotent: everything decrypts with the new key now');
    assert.match(again.out, /\(0 lookup hashes changed\)/);
  });

  it('links through the Link page in a browser: its redirect hands the public token back', async () => {
    const child = spawn(process.execPath, [mirrorBin, 'link', '--reference-id', 'cli-redirect', '--no-sync', '--json', '--timeout', '60'], {
      cwd: tmpdir(),
      env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '', ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let out = '';
    child.stdout.on('data', (d: Buffer) => (out += d.toString()));
    const exited = new Promise<number>((resolve) => child.once('exit', (code) => resolve(code ?? 1)));
    for (let i = 0; i < 200 && !out.includes('\n'); i++) await new Promise((r) => setTimeout(r, 100));
    const linkUrl = new URL(out.split('\n')[0]!);
    assert.equal(linkUrl.pathname, '/link');
    const redirect = linkUrl.searchParams.get('redirect_uri')!;
    assert.match(redirect, /^http:\/\/127\.0\.0\.1:\d+\/callback$/);
    // What a person does on the Link page: pick a source system and sign in.
    const page = await fetch(linkUrl);
    assert.match(await page.text(), /name="source_system" value="fieldops"/);
    const signIn = await fetch(`${h.sandbox.url}/link/sign-in`, {
      method: 'POST',
      body: new URLSearchParams({
        link_token: linkUrl.searchParams.get('link_token')!,
        source_system: 'fieldops',
        redirect_uri: redirect,
        username: 'u',
        password: 'p',
      }),
      redirect: 'follow',
    });
    assert.match(await signIn.text(), /Linked\. You can close this tab/);
    assert.equal(await exited, 0);
    const linked = JSON.parse(out.split('\n')[1]!) as { accountId: string; sourceSystem: string; syncWorkflowId: string | null };
    assert.equal(linked.sourceSystem, 'fieldops');
    assert.equal(linked.syncWorkflowId, null);
    assert.equal((await h.services.prisma.linkedAccount.findUniqueOrThrow({ where: { id: linked.accountId } })).referenceId, 'cli-redirect');
  });
});
