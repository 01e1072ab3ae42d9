import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { describe, it } from 'node:test';
import { CpuMeter } from '../../../bench/lib/processes.ts';

describe('CpuMeter', () => {
  it('counts the CPU a given process spends, kept after it exits, and the machine idle share', async () => {
    // Waits for a line on stdin, then spins until it has spent 400 ms of CPU (not of wall time: on a
    // busy machine 400 ms of wall time can be far less CPU) and exits.
    const child = spawn(
      process.execPath,
      [
        '-e',
        "process.stdin.once('data', () => { const t = process.cpuUsage(); for (;;) { const u = process.cpuUsage(t); if (u.user + u.system >= 400000) break; } process.exit(0); })",
      ],
      { stdio: ['pipe', 'ignore', 'inherit'] },
    );
    await new Promise((resolve) => setTimeout(resolve, 300));
    const meter = new CpuMeter([child.pid!]);
    child.stdin.write('go\n');
    const exited = once(child, 'exit');
    while (child.exitCode === null) {
      meter.sample();
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
    await exited;
    meter.sample();
    const use = meter.use();
    if (process.platform !== 'linux') return assert.equal(use, undefined);
    assert.ok(use, 'readings on Linux');
    assert.ok(use.workers >= 0.2 && use.workers <= 2, `the child's CPU: ${use.workers} s`);
    assert.ok(use.postgres >= 0, `Postgres: ${use.postgres} s`);
    assert.ok(use.idle >= 0 && use.idle <= 1, `idle share ${use.idle}`);
  });
});
