// A deliberately broken copy of workflows/delivery.ts, for test/unit/workflows/replay-divergence.test.ts
// only: the idle timer comes before the delivery activity instead of after it, the kind of reordering a
// change of workflow code without `patched()` makes. A history recorded with the real workflow must fail
// to replay against it, naming the event where the two part.
import { proxyActivities, sleep } from '@temporalio/workflow';
import type { DeliveryActivities } from '../../../activities/delivery.ts';

const { deliverChanges } = proxyActivities<DeliveryActivities>({ startToCloseTimeout: '2 minutes' });

export async function subscriptionDeliveryWorkflow(input: { subscriptionId: string }): Promise<void> {
  for (;;) {
    await sleep(500);
    const r = await deliverChanges({ subscriptionId: input.subscriptionId });
    if (!r.active) return;
  }
}
