// `mirror sandbox`: the sandbox upstream alone.
import { untilSignal } from '../signals.ts';
import type { Command } from './shared.ts';

export const sandboxCommand: Command = {
  summary: 'Run the sandbox upstream (a faithful stand-in for the unified API)',
  usage: 'mirror sandbox [--port 4010] [--seed 1] [--size 60] [--no-rate-limits]',
  help: 'It accepts UPSTREAM_CLIENT_ID / UPSTREAM_CLIENT_SECRET from .env.local, so the worker and API find it with no more set-up. See sandbox/README.md for its admin API (faults, latency, churn).',
  options: { port: { type: 'string' }, seed: { type: 'string' }, size: { type: 'string' }, 'no-rate-limits': { type: 'boolean' } },
  async run(v) {
    const { setup } = await import('../setup-steps.ts');
    const { config } = await setup({ temporal: false, log: () => undefined });
    const { startSandbox } = await import('../../sandbox/server.ts');
    const { createLogger } = await import('../../lib/logger.ts');
    const sandbox = await startSandbox({
      port: v.port ? Number(v.port) : config.SANDBOX_PORT,
      seed: v.seed ? Number(v.seed) : 1,
      ...(v.size ? { size: Number(v.size) } : {}),
      clientId: config.UPSTREAM_CLIENT_ID,
      clientSecret: config.UPSTREAM_CLIENT_SECRET,
      ...(v['no-rate-limits'] ? { rateLimits: false as const } : {}),
      logger: createLogger({ level: config.LOG_LEVEL, name: 'sandbox' }),
    });
    console.error(
      `Sandbox upstream at ${sandbox.url}\n  Client-Id: ${config.UPSTREAM_CLIENT_ID}\n  Client-Secret: (UPSTREAM_CLIENT_SECRET in .env.local)\n  API-Version: 2021-11-21`,
    );
    await untilSignal();
    await sandbox.close();
  },
};
