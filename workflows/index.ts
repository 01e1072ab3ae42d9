// Every workflow the worker registers. Workflow code is deterministic: it imports activity types only.
export { accountSyncWorkflow } from './account-sync.ts';
export { streamSyncWorkflow } from './stream-sync.ts';
export { accountChangesWorkflow, promptWarmUpWorkflow } from './account-changes.ts';
export { asyncRequestWorkflow } from './async-request.ts';
export { subscriptionDeliveryWorkflow } from './delivery.ts';
export { childStreamsWorkflow } from './child-streams.ts';
export { accountProbeWorkflow, accountPurgeWorkflow, maintenanceWorkflow } from './account-lifecycle.ts';
