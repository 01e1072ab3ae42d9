// An operator can see which release runs where: the API at /healthz and /metrics
// (`mirror_build_info{version,commit} 1`), a worker's own /metrics registry, and `mirror doctor`, which
// names the release of this CLI, of the workers polling the task queue (their Temporal identity) and
// of the API, and warns when they differ (an upgrade left half done).
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { diagnose, type Check } from '../../bin/commands/doctor.ts';
import { createProcessMetrics } from '../../lib/process-metrics.ts';
import { cliEnv, startHarness, type Harness } from '../helpers/harness.ts';
import { startOperatorApp, type OperatorApp } from '../helpers/operator-app.ts';

const root = join(import.meta.dirname, '../..');
const version = (JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')) as { version: string }).version;
const commit = execFileSync('git', ['rev-parse', 'HEAD'], { cwd: root, encoding: 'utf8' }).trim();
const label = `${version}+${commit.slice(0, 12)}`;

describe('the release each process reports', { timeout: 120_000 }, () => {
  let h: Harness;
  let op: OperatorApp;

  before(async () => {
    h = await startHarness();
    op = await startOperatorApp(h);
  });
  after(async () => {
    await op?.close();
    await h?.close();
  });

  it('/healthz says the version and the commit', async () => {
    const res = await fetch(`${op.url}/healthz`);
    assert.equal(res.status, 200);
    assert.deepEqual(await res.json(), { ok: true, version, commit });
  });

  it('/metrics of the API and of a worker carry mirror_build_info', async () => {
    const res = await fetch(`${op.url}/metrics`, { headers: { authorization: `Bearer ${op.operatorToken}` } });
    assert.equal(res.status, 200);
    const line = `mirror_build_info{version="${version}",commit="${commit}",process="api"} 1`;
    assert.ok((await res.text()).split('\n').includes(line), `the API's /metrics has ${line}`);
    const worker = await createProcessMetrics({ process: 'worker', defaultMetrics: false }).registry.metrics();
    assert.ok(worker.split('\n').includes(`mirror_build_info{version="${version}",commit="${commit}",process="worker"} 1`));
  });

  it('mirror doctor names the release of the CLI, the workers and the API, and warns when they differ', async () => {
    const url = new URL(op.url);
    const env = {
      ...cliEnv(h),
      API_HOST: url.hostname,
      API_PORT: url.port,
    };
    const byName = (checks: Check[], name: string) => checks.find((x) => x.name === name);
    const checks = await diagnose(env, { timeoutMs: 20_000 });
    assert.equal(byName(checks, 'release')?.detail, `this CLI runs construction-mirror ${version}, commit ${commit}`);
    assert.equal(byName(checks, 'worker')?.status, 'ok', JSON.stringify(byName(checks, 'worker')));
    assert.match(byName(checks, 'worker')!.detail, new RegExp(`release ${label.replace(/[.+]/g, '\\$&')}$`));
    assert.equal(byName(checks, 'api')?.status, 'ok', JSON.stringify(byName(checks, 'api')));
    assert.match(byName(checks, 'api')!.detail, new RegExp(`release ${label.replace(/[.+]/g, '\\$&')}$`));

    // An API of another release (an upgrade half done): a warning that says both.
    const other = await import('fastify').then((f) => f.default());
    other.get('/healthz', async () => ({ ok: true, version: '0.0.1', commit: null }));
    const otherUrl = new URL(await other.listen({ port: 0, host: '127.0.0.1' }));
    try {
      const mixed = await diagnose({ ...env, API_PORT: otherUrl.port }, { timeoutMs: 20_000 });
      assert.equal(byName(mixed, 'api')?.status, 'warn');
      assert.match(byName(mixed, 'api')!.detail, new RegExp(`running release 0\\.0\\.1; this CLI is ${label.replace(/[.+]/g, '\\$&')}`));
    } finally {
      await other.close();
    }
  });
});
