// A delivery whose worker is killed mid-activity is retried within its heartbeat timeout:
// the delivery activity beats every 5 s (activities/heartbeat.ts) and the workflow gives it a 20 s
// heartbeat timeout (workflows/delivery.ts). Without them Temporal waits out the 2-minute
// start-to-close timeout before it retries, and the subscriber hears nothing for two minutes.
//
// The worker runs as its own process (test/helpers/processes.ts) so that it can be killed with SIGKILL
// while it holds a POST open to a subscriber that does not answer; a second worker takes over.
import assert from 'node:assert/strict';
import { createServer, type IncomingMessage, type ServerResponse, type Server } from 'node:http';
import { after, before, describe, it } from 'node:test';
import { startWorker } from '../../bin/temporal-worker.ts';
import { cliEnv, sandboxAdmin, startHarness, upstreamAll, type Harness } from '../helpers/harness.ts';
import { LogCollector, MirrorProcess, waitFor } from '../helpers/processes.ts';

describe("heartbeats: a killed worker's delivery is retried within the heartbeat timeout", { timeout: 480_000 }, () => {
  let h: Harness;
  let server: Server;
  let worker: MirrorProcess;
  /** When each POST reached the subscriber (ms since the epoch). */
  const posts: number[] = [];
  /** The first POST is held open, never answered: the worker is killed while it waits. */
  const held: ServerResponse[] = [];
  const logs = new LogCollector();

  before(async () => {
    h = await startHarness({ sandbox: { size: 8 } });
    server = createServer((req: IncomingMessage, res: ServerResponse) => {
      req.resume();
      req.on('end', () => {
        posts.push(Date.now());
        if (posts.length === 1) held.push(res);
        else res.writeHead(200).end();
      });
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  });
  after(async () => {
    for (const res of held) res.destroy();
    await worker?.stop().catch(() => undefined);
    if (posts.length < 2)
      console.log(
        logs.lines
          .slice(-30)
          .map((l) => `${l.process}: ${l.line}`)
          .join('\n'),
      );
    await new Promise((r) => server?.close(r));
    await h?.close();
  });

  it('retries the delivery within 20 s (+ slack) of the kill, not after the 2-minute start-to-close', async () => {
    const account = await h.link('buildpro');
    const first = await (await h.sync.onLinked(account.accountId)).result();
    assert.deepEqual(first.failed, []);
    // From here the worker is a process of its own.
    await h.worker.shutdown();
    worker = new MirrorProcess({
      command: 'worker',
      env: { ...cliEnv(h), MIRROR_CALLBACK_ALLOW: '127.0.0.1', UPSTREAM_ASSUME_LIMITS: 'false', LOG_LEVEL: 'info' },
      logs,
    });
    // A worker process bundles the workflows at start: minutes on a busy two-core machine.
    await worker.start({ timeoutMs: 240_000 });

    const { port } = server.address() as { port: number };
    const headers = { ...h.clientHeaders, 'account-token': account.accountToken };
    const created = await h.app.inject({
      method: 'POST',
      url: '/webhooks',
      headers,
      payload: { callback_url: `http://127.0.0.1:${port}/hook`, event: 'UPDATE', type: 'vendor' },
    });
    assert.equal(created.statusCode, 201, created.body);
    const vendor = (await upstreamAll(h, '/vendors', { 'account-token': account.accountToken }))[0]!;
    await sandboxAdmin(h, 'PATCH', '/_admin/objects', {
      account_token: account.accountToken,
      resource: 'vendors',
      id: vendor.id,
      patch: { name: 'Held delivery' },
    });
    await waitFor('the delivery to reach the subscriber', () => posts.length >= 1, { timeoutMs: 60_000 });

    // Today's worker again, in this process, started before the kill (bundling the workflows takes a
    // minute on a busy machine, which is not what is measured): it takes the retry once Temporal times
    // the killed worker's attempt out.
    const t0 = Date.now();
    h.worker = await startWorker(h.services, { publicBaseUrl: h.apiUrl });
    console.log(`second worker ready in ${Date.now() - t0} ms`);
    assert.equal(posts.length, 1, 'the first delivery is still held open');
    await worker.kill9();
    const killedAt = Date.now();
    await waitFor('the retried delivery', () => posts.length >= 2, { timeoutMs: 75_000 });
    const retryMs = posts[1]! - killedAt;
    console.log(`delivery retried ${retryMs} ms after the worker was killed (heartbeat timeout 20 s, start-to-close 120 s)`);
    assert.ok(retryMs < 45_000, `retried after ${retryMs} ms`);
  });
});
