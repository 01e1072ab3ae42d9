// Chaos: the Temporal dev server is killed with SIGKILL mid-stream and started again with its
// database file. Workflows and activities in flight must carry on from where Temporal left them and
// every stream must end with exactly the upstream's records. Needs a Temporal server of its own.
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { startDevServer, type DevServer } from '../../bin/temporal-cli.ts';
import { freePort } from '../../bin/test-runner.ts';
import { waitFor } from '../helpers/processes.ts';
import { startChaosMirror, type ChaosMirror, type LinkedTestAccount } from './env.ts';
import { printOwnRows, scaled, scenario } from './report.ts';

const file = import.meta.filename;

describe('chaos: Temporal dev server killed and restarted', { timeout: scaled(300_000, 900_000) }, () => {
  let m: ChaosMirror;
  let server: DevServer;
  let port: number;
  let dir: string;
  let crm: LinkedTestAccount;
  let field: LinkedTestAccount;
  const size = scaled(1000, 3000);
  /** How long Temporal stays down: part of the fault's definition, not a wait for something. */
  const outageMs = scaled(3_000, 30_000);
  const restarts = scaled(1, 2);

  before(async () => {
    port = await freePort();
    dir = mkdtempSync(join(tmpdir(), 'mirror-temporal-'));
    server = await startDevServer({ port, headless: true, dbFile: join(dir, 'temporal.db') });
    m = await startChaosMirror({ name: 'temporal-restart', temporalAddress: server.address, sandbox: { size } });
    crm = await m.link('crmcloud');
    field = await m.link('fieldops');
  });
  after(async () => {
    await m?.close();
    await server?.stop();
    if (dir) rmSync(dir, { recursive: true, force: true });
    printOwnRows();
  });

  it('finishes every stream with exactly the upstream records after Temporal restarts with its database', async () => {
    await scenario(
      'process: Temporal kill -9',
      `Temporal dev server killed mid-stream, down ${outageMs / 1000} s, restarted with its database file (x${restarts})`,
      async () => {
        await m.fault({ kind: 'slow', delay_ms: 400, match: { path: '^/customers\\?page=', source_system: 'crmcloud' } });
        const atKill: number[] = [];
        let records = 0;
        let streams = 0;
        // Each restart hits a pass of its own (a stream keeps paging while Temporal is down, so one
        // pass may well be over by the time Temporal is back).
        for (let k = 1; k <= restarts; k++) {
          const victim = k === 1 ? crm : await m.link('crmcloud');
          const run = await m.sync.start({ accountId: victim.accountId, mode: 'full' });
          const fieldRun = await m.sync.start({ accountId: field.accountId, mode: 'full' });
          await waitFor(
            'customers to be mid-stream',
            async () => {
              const s = await m.stream(victim.accountId, 'customers');
              return s && s.pages >= 1 && s.checkpoint && !s.checkpoint.done;
            },
            { timeoutMs: 120_000, intervalMs: 20 },
          );
          atKill.push((await m.stream(victim.accountId, 'customers'))!.pages);
          const exited = new Promise((r) => server.process.once('exit', r));
          server.process.kill('SIGKILL');
          await exited;
          await sleep(outageMs);
          server = await startDevServer({ port, headless: true, dbFile: join(dir, 'temporal.db') });
          const result = await m.resultWithin(run.workflowId, 300_000);
          const fieldResult = await m.resultWithin(fieldRun.workflowId, 300_000);
          assert.deepEqual(result.failed, [], 'no crmcloud stream failed');
          assert.deepEqual(fieldResult.failed, [], 'no fieldops stream failed');
          for (const a of [victim, field]) {
            const exact = await m.assertExact(a);
            records += exact.records;
            streams += exact.streams;
            assert.deepEqual(
              (await m.streams(a.accountId)).filter((x) => x.state !== 'synced'),
              [],
              'no stream stuck',
            );
          }
          const s = (await m.stream(victim.accountId, 'customers'))!;
          assert.equal(s.pages, Math.ceil(size / 200), 'streams.pages counts each page once');
        }
        await m.clearFaults();
        const crashes = m.worker.crashes.length + m.api.crashes.length;
        return {
          tries: restarts,
          outcome: `Temporal down at customers page ${atKill.join(', ')}; workflows resumed; ${records} records in ${streams} streams exact; process crashes (restarted by the supervisor): ${crashes}`,
        };
      },
      file,
    );
  });

  it('leaks no secret into logs or error bodies', async () => {
    await scenario(
      'secrets',
      'scan of Temporal-restart logs and error bodies',
      async () => {
        const scan = m.scanForSecrets();
        assert.deepEqual(scan.findings, []);
        return { tries: scan.lines + scan.bodies, outcome: `${scan.lines} log lines, ${scan.bodies} error bodies, ${scan.secrets} secrets: none found` };
      },
      file,
    );
  });
});
