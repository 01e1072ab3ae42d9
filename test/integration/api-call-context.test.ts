// The API's Temporal connection leaves no async hooks running once its calls have started
// (bin/api-server.ts releaseCallContext): the client's call context is an AsyncLocalStorage, and an
// enabled one makes Node run hooks for every promise of the process, every read's included. A
// call's context still holds: its deadline and its namespace's metadata reach the call.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { Client, Connection } from '@temporalio/client';
import { releaseCallContext } from '../../bin/api-server.ts';
import { temporalForTests } from '../helpers/temporal.ts';

/** Whether the storage is enabled (Node's own flag; while one is, async hooks run for every promise). */
const enabled = (connection: Connection) => (connection.callContextStorage as unknown as { enabled: boolean }).enabled;

describe("the API's Temporal calls and the process's async hooks", { timeout: 60_000 }, () => {
  let temporal: Awaited<ReturnType<typeof temporalForTests>>;
  let connection: Connection;
  let client: Client;

  before(async () => {
    temporal = await temporalForTests();
    connection = await Connection.connect({ address: temporal.address });
    releaseCallContext(connection);
    client = new Client({ connection, namespace: 'default' });
  });
  after(async () => {
    await connection?.close();
    await temporal?.stop();
  });

  it('disables the call context once a call has started, and the call is answered', async () => {
    // Connecting made a call (its deadline's run).
    assert.equal(enabled(connection), false, 'the call context is disabled after connecting');
    // A call with the namespace's metadata (the client wraps it in the storage's run).
    const described = await connection.workflowService.describeNamespace({ namespace: 'default' });
    assert.equal(described.namespaceInfo?.name, 'default');
    assert.equal(enabled(connection), false, 'the call context is disabled after a call');
    // Several at once, and one listed through the client.
    await Promise.all([client.workflow.count(), client.workflow.count(), connection.workflowService.getSystemInfo({})]);
    assert.equal(enabled(connection), false, 'the call context is disabled after calls in parallel');
  });

  it("keeps a call's context: a deadline already past ends the call", async () => {
    await assert.rejects(
      connection.withDeadline(Date.now() - 1000, () => connection.workflowService.describeNamespace({ namespace: 'default' })),
      (error: Error & { code?: number }) => error.code === 4 || /deadline/i.test(error.message),
    );
    // And nested: the deadline's run around the metadata's run.
    const ok = await connection.withDeadline(Date.now() + 10_000, () => connection.workflowService.describeNamespace({ namespace: 'default' }));
    assert.equal(ok.namespaceInfo?.name, 'default');
    assert.equal(enabled(connection), false);
  });
});
