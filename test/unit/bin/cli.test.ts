// The command line's contract: every command has --help, wrong use exits 2 with the usage, and a
// failure becomes one line that says what to do, with the exit code of its kind.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { commands, main } from '../../../bin/commands/index.ts';
import { describeFailure, exitCode, postgresProblem, table } from '../../../bin/commands/shared.ts';
import { formatChecks } from '../../../bin/commands/doctor.ts';
import { textBar } from '../../../bin/commands/sync-progress.ts';
import { ConfigError, NotFoundError, UpstreamAuthError, UpstreamError } from '../../../lib/errors.ts';

async function capture(argv: string[]): Promise<{ code: number; out: string; err: string }> {
  const out: string[] = [];
  const err: string[] = [];
  const log = console.log;
  const error = console.error;
  console.log = (...a: unknown[]) => void out.push(a.join(' '));
  console.error = (...a: unknown[]) => void err.push(a.join(' '));
  try {
    const code = await main(argv);
    return { code, out: out.join('\n'), err: err.join('\n') };
  } finally {
    console.log = log;
    console.error = error;
  }
}

describe('mirror CLI', () => {
  it('has every command of the issue, each with --help', async () => {
    for (const name of [
      'setup',
      'migrate',
      'sandbox',
      'worker',
      'api',
      'demo',
      'link',
      'accounts',
      'sync',
      'status',
      'resync',
      'unlink',
      'webhooks',
      'doctor',
      'test',
    ]) {
      assert.ok(commands[name], `${name} exists`);
      const r = await capture([name, '--help']);
      assert.equal(r.code, 0, `${name} --help exits 0`);
      assert.match(r.out, new RegExp(`Usage: mirror ${name}`), `${name} --help shows its usage`);
    }
    const all = await capture(['--help']);
    assert.equal(all.code, 0);
    assert.match(all.out, /Exit codes: 0 ok/);
  });

  it('exits 2 on wrong use, with the usage', async () => {
    const unknown = await capture(['frobnicate']);
    assert.equal(unknown.code, exitCode.usage);
    assert.match(unknown.err, /unknown command "frobnicate"/);
    const flag = await capture(['status', '--bogus']);
    assert.equal(flag.code, exitCode.usage);
    assert.match(flag.err, /Usage: mirror status/);
    const missing = await capture(['sync']);
    assert.equal(missing.code, exitCode.usage);
    assert.match(missing.err, /--account <value>/);
    const mode = await capture(['sync', '--account', 'x', '--mode', 'sometimes']);
    assert.equal(mode.code, exitCode.usage);
    assert.match(mode.err, /--mode is full or incremental/);
    const resource = await capture(['resync', '--account', 'x', '--resource', 'widgets']);
    assert.equal(resource.code, exitCode.usage);
    assert.match(resource.err, /unknown resource "widgets"; resources: projects/);
    assert.equal((await capture([])).code, exitCode.usage);
  });

  it('turns failures into one line with what to do and an exit code per kind', () => {
    const config = describeFailure(new ConfigError('Invalid configuration:\n  - MIRROR_CLIENT_ID: required\nSet these in .env.local.'));
    assert.equal(config.code, exitCode.environment);
    assert.doesNotMatch(config.message, /\n/);
    assert.equal(describeFailure(new NotFoundError('No linked account 123')).code, exitCode.notFound);
    assert.match(describeFailure(new NotFoundError('No linked account 123')).message, /^No linked account 123\. `npx mirror accounts` lists/);
    const auth = describeFailure(new UpstreamAuthError('Invalid Client-Id or Client-Secret', 401));
    assert.equal(auth.code, exitCode.environment);
    assert.match(auth.message, /UPSTREAM_CLIENT_SECRET/);
    assert.match(describeFailure(new UpstreamError('Upstream could not be reached for link token: connect ECONNREFUSED')).message, /fix UPSTREAM_BASE_URL/);
    const refused = Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:5999'), { code: 'ECONNREFUSED' });
    const pg = describeFailure(new Error('wrapped', { cause: refused }), { DATABASE_URL: 'postgresql://u:secret@127.0.0.1:5999/m' });
    assert.equal(pg.code, exitCode.environment);
    assert.match(pg.message, /No PostgreSQL answers at 127\.0\.0\.1:5999: start it/);
    assert.doesNotMatch(pg.message, /secret/);
    assert.match(
      postgresProblem(Object.assign(new Error('no db'), { code: '3D000' }), 'postgresql://x@h:5432/mine')!.problem,
      /Database "mine" does not exist/,
    );
    assert.equal(describeFailure(new Error('boom')).code, exitCode.failed);
  });

  it('formats tables, bars and doctor reports', () => {
    assert.equal(
      table(
        ['name', '>n'],
        [
          ['a', 1],
          ['bbb', 22],
        ],
      ),
      'name   n\n----  --\na      1\nbbb   22',
    );
    assert.equal(textBar(5, 10, 0), `[${'#'.repeat(12)}${'.'.repeat(12)}]`);
    assert.equal(textBar(0, null, 0, true), `[${'#'.repeat(24)}]`);
    assert.match(textBar(3, null, 2), /^\[\.\.####\.+\]$/);
    const report = formatChecks([
      { name: 'postgres', status: 'fail', detail: 'No PostgreSQL answers', fix: 'start it' },
      { name: 'api', status: 'warn', detail: 'no API', fix: 'start it' },
      { name: 'temporal', status: 'ok', detail: 'fine' },
    ]);
    assert.match(report, /FAIL {2}postgres {2}No PostgreSQL answers\n +fix: start it/);
    assert.match(report, /1 problem \(postgres\)/);
    assert.match(formatChecks([{ name: 'x', status: 'ok', detail: 'y' }]), /All checks passed\./);
  });
});
