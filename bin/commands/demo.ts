// `mirror demo`: the whole product on one machine (see bin/demo-run.ts).
import type { Command } from './shared.ts';

export const demoCommand: Command = {
  summary: 'Sandbox upstream -> sync -> read API, with the Temporal UI',
  usage: 'mirror demo [--once] [--size 60]',
  help: 'Starts a Temporal dev server (unless one answers at TEMPORAL_ADDRESS), the sandbox, a worker and the API, links demo accounts and syncs them. --once prints one JSON summary line and exits.',
  options: { once: { type: 'boolean' }, size: { type: 'string' } },
  async run(v) {
    const { runDemo } = await import('../demo-run.ts');
    return runDemo({ once: Boolean(v.once), ...(v.size ? { size: Number(v.size) } : {}) });
  },
};
