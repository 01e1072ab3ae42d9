// One outbound subscription's delivery loop: delivers changes as they appear, polling faster while
// there is traffic and slower when idle; ends when the subscription is deleted.
import { continueAsNew, proxyActivities, sleep, workflowInfo } from '@temporalio/workflow';
import type { DeliveryActivities } from '../activities/delivery.ts';
import { activityProfiles } from './activity-profiles.ts';

const { deliverChanges } = proxyActivities<DeliveryActivities>(activityProfiles.delivery);

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
