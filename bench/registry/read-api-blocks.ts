// [5] Why random pages cost more than page 1 here, in Postgres's own counts of the blocks a page reads.
import { probeListBuffers } from '../scenarios/read-api.ts';
import type { Scenario } from './scenario.ts';

export const readApiBlocks: Scenario = {
  number: 5,
  label: 'read API: blocks a page reads',
  setup: 'main',
  api: true,
  async run({ notes, results }, { env: main, account }) {
    if (!results.first) return;
    const b = await probeListBuffers(main, account, 100);
    const mb = (n: number) => `${Math.round(n / 2 ** 20)} MB`;
    notes.push(
      `[5] blocks a 100-record range reads (EXPLAIN, after the loads): at a random place ${b.random.read.toFixed(1)} from outside shared_buffers + ${b.random.hit.toFixed(1)} in them; page 1 ${b.first.read} + ${b.first.hit}. The list's heap is ${mb(b.heapBytes)}, shared_buffers ${mb(b.sharedBuffersBytes)}: a random page reads its rows from the operating system's cache, page 1 from shared_buffers.`,
    );
  },
};
