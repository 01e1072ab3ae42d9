// One outbound subscription's delivery loop: delivers changes as they appear, polling faster while
// there is traffic and slower when idle; ends when the subscription is deleted.
import { continueAsNew, proxyActivities, sleep, workflowInfo } from '@temporalio/workflow';
import type { DeliveryActivities } from '../activities/delivery.ts';

// The activity heartbeats every 5 s (activities/heartbeat.ts): a worker killed mid-delivery has it
// retried after 20 s, not after the 2-minute start-to-close. Activity options change no command, so
// this needs no patched() guard (CONTRIBUTING.md "Changing workflow code").
const { deliverChanges } = proxyActivities<DeliveryActivities>({
  startToCloseTimeout: '2 minutes',
  heartbeatTimeout: '20 seconds',
  retry: { initialInterval: '1 second', backoffCoefficient: 2, maximumInterval: '5 minutes' },
});

export async function subscriptionDeliveryWorkflow(input: { subscriptionId: string }): Promise<void> {
  let idle = 0;
  for (;;) {
    const r = await deliverChanges({ subscriptionId: input.subscriptionId });
    if (!r.active) return;
    idle = r.delivered > 0 ? 0 : Math.min(idle + 1, 10);
    if (r.delivered === 0) await sleep(500 * Math.max(1, idle));
    if (workflowInfo().continueAsNewSuggested || workflowInfo().historyLength > 3000) {
      await continueAsNew<typeof subscriptionDeliveryWorkflow>(input);
    }
  }
}
