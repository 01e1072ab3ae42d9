// The Temporal dev server for a test file: the one `npm test` started (TEMPORAL_TEST_ADDRESS), or a
// fresh one when a file runs alone.
import { freePort } from '../../bin/test-runner.ts';
import { startDevServer } from '../../bin/temporal-cli.ts';

export async function temporalForTests(): Promise<{ address: string; stop(): Promise<void> }> {
  const given = process.env.TEMPORAL_TEST_ADDRESS;
  if (given) return { address: given, stop: async () => undefined };
  const server = await startDevServer({ port: await freePort(), headless: true });
  return { address: server.address, stop: () => server.stop() };
}
