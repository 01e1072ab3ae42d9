// `mirror doctor` against a real set-up: healthy -> every check ok and exit 0; a wrong upstream
// secret, Postgres not answering, an unmigrated database or missing secrets -> exit 1, naming the
// problem and its fix. Once through the real command line, the rest in process.
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { tmpdir } from 'node:os';
import { after, before, describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';
import { diagnose, type Check } from '../../bin/commands/doctor.ts';
import { randomSecret } from '../../lib/crypto.ts';
import { createTestDatabase } from '../helpers/database.ts';
import { cliEnv, startHarness, type Harness } from '../helpers/harness.ts';

const mirrorBin = fileURLToPath(new URL('../../bin/mirror.js', import.meta.url));

function runCli(args: string[], env: Record<string, string>): Promise<{ code: number; out: string; err: string }> {
  return new Promise((resolve, reject) => {
    // Run elsewhere than the project, so its .env.local adds nothing: the environment says it all.
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

const byName = (checks: Check[], name: string) => checks.find((c) => c.name === name);

describe('mirror doctor', { timeout: 120_000 }, () => {
  let h: Harness;
  let env: Record<string, string>;
  let accountId: string;

  before(async () => {
    h = await startHarness();
    ({ accountId } = await h.link('crmcloud'));
    env = {
      ...cliEnv(h),
    };
  });
  after(async () => {
    await h?.close();
  });

  it('passes every check on a healthy set-up, and the command exits 0', async () => {
    // Generous timeouts: other test files may keep the shared Temporal dev server busy.
    const checks = await diagnose(env, { api: false, timeoutMs: 20_000 });
    for (const name of ['config', 'postgres', 'migrations', 'temporal', 'worker', 'upstream', 'clock', 'credentials', 'accounts']) {
      assert.equal(byName(checks, name)?.status, 'ok', `${name}: ${JSON.stringify(byName(checks, name))}`);
    }
    const cli = await runCli(['doctor', '--no-api', '--timeout', '20'], env);
    assert.equal(cli.code, 0, cli.out + cli.err);
    assert.match(cli.out, /All checks passed/);
  });

  it('spends the shared budget for its upstream calls, as an application would', async () => {
    // Interactive requests count in their budget's row (app_counts), which every process reads.
    const appUse = async (account: string) => {
      const { rows } = await h.services.pool.query<{ app_counts: number[] }>('SELECT app_counts FROM rate_budgets WHERE key = $1', [
        `${(env.UPSTREAM_HEADER_PREFIX ?? 'Svc').toLowerCase()}:${env.UPSTREAM_CLIENT_ID}:${account}`,
      ]);
      return rows.reduce((n, r) => n + r.app_counts.reduce((a, b) => a + b, 0), 0);
    };
    const before = { client: await appUse(''), account: await appUse(accountId) };
    const checks = await diagnose(env, { api: false, timeoutMs: 20_000 });
    assert.equal(byName(checks, 'upstream')?.status, 'ok');
    assert.equal(byName(checks, 'accounts')?.status, 'ok');
    assert.ok((await appUse('')) > before.client, 'the link token request took a slot of the client budget');
    assert.ok((await appUse(accountId)) > before.account, "the account check took a slot of the account's budget");
  });

  it('names a wrong upstream secret and its fix, and the command exits 1', async () => {
    const wrong = { ...env, UPSTREAM_CLIENT_SECRET: randomSecret(40) };
    const upstream = byName(await diagnose(wrong, { api: false, timeoutMs: 20_000 }), 'upstream')!;
    assert.equal(upstream.status, 'fail');
    assert.match(upstream.detail, /refused UPSTREAM_CLIENT_ID \/ UPSTREAM_CLIENT_SECRET/);
    assert.match(upstream.fix!, /set UPSTREAM_CLIENT_ID and UPSTREAM_CLIENT_SECRET/);
    const cli = await runCli(['doctor', '--no-api', '--timeout', '20'], wrong);
    assert.equal(cli.code, 1);
    assert.match(cli.out, /FAIL {2}upstream/);
    assert.match(cli.out, /1 problem \(upstream\)/);
  });

  it('names a Postgres that does not answer and how to start one', async () => {
    const down = { ...env, DATABASE_URL: 'postgresql://postgres@127.0.0.1:1/mirror' };
    const checks = await diagnose(down, { api: false, timeoutMs: 1500 });
    const pg = byName(checks, 'postgres')!;
    assert.equal(pg.status, 'fail');
    assert.match(pg.detail, /No PostgreSQL answers at 127\.0\.0\.1:1/);
    assert.match(pg.fix!, /pg_ctlcluster|docker compose up -d postgres/);
    assert.equal(byName(checks, 'migrations')?.status, 'skip');
    const cli = await runCli(['doctor', '--no-api'], down);
    assert.equal(cli.code, 1);
    assert.match(cli.out, /FAIL {2}postgres/);
  });

  it('names pending migrations, an unregistered client and missing secrets', async () => {
    const empty = await createTestDatabase('mirror_doctor', { migrate: false });
    try {
      const migrations = byName(await diagnose({ ...env, DATABASE_URL: empty.url }, { api: false }), 'migrations')!;
      assert.equal(migrations.status, 'fail');
      assert.match(migrations.fix!, /npx mirror migrate/);
    } finally {
      await empty.drop();
    }
    const other = byName(await diagnose({ ...env, MIRROR_CLIENT_SECRET: randomSecret(40) }, { api: false }), 'credentials')!;
    assert.equal(other.status, 'fail');
    assert.match(other.detail, /MIRROR_CLIENT_SECRET is not the registered secret/);
    const { MIRROR_SIGNING_KEY: _gone, ...missing } = env;
    const checks = await diagnose(missing, { api: false });
    const config = byName(checks, 'config')!;
    assert.equal(config.status, 'fail');
    assert.match(config.detail, /MIRROR_SIGNING_KEY/);
    assert.match(config.fix!, /npx mirror setup/);
    assert.equal(byName(checks, 'postgres')?.status, 'ok', 'the other checks still run');
  });

  it('names a Temporal server that does not answer', async () => {
    const checks = await diagnose({ ...env, TEMPORAL_ADDRESS: '127.0.0.1:1' }, { api: false, timeoutMs: 1500 });
    const temporal = byName(checks, 'temporal')!;
    assert.equal(temporal.status, 'fail');
    assert.match(temporal.fix!, /TEMPORAL_ADDRESS/);
  });
});
