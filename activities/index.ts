// All activities, built from their dependencies (the worker passes real ones; tests may pass their own).
import { createAccountActivities, type AccountActivityDeps } from './accounts.ts';
import { createAsyncActivities, type AsyncDeps } from './async-requests.ts';
import { createDeliveryActivities, type DeliveryDeps } from './delivery.ts';
import { createEventActivities, type EventDeps } from './events.ts';
import { createSyncActivities } from './sync.ts';

export type ActivityDeps = EventDeps & AsyncDeps & DeliveryDeps & Pick<AccountActivityDeps, 'retention' | 'idle'>;

export function createActivities(deps: ActivityDeps) {
  return {
    ...createSyncActivities(deps),
    ...createEventActivities(deps),
    ...createAsyncActivities(deps),
    ...createDeliveryActivities(deps),
    ...createAccountActivities(deps),
  };
}

export type Activities = ReturnType<typeof createActivities>;
