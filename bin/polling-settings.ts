// The polling policy and the freshness views' settings, from the configuration: the worker's scheduler
// and the API's status page, `mirror status` and /metrics read the same numbers.
import { knownProfile } from '../connectors/source-systems/index.ts';
import { incrementalMinutes, type Config } from '../lib/config.ts';
import type { FreshnessSettings } from '../mirror/streams/freshness.ts';
import type { PollingPolicy } from '../mirror/streams/polling.ts';

type PollingConfig = Pick<
  Config,
  'SYNC_INCREMENTAL_MINUTES' | 'SYNC_FULL_HOURS' | 'SYNC_POLLS_PER_PASS' | 'MIRROR_SYNC_BUDGET_SHARE' | 'SYNC_POLLING_SHARE' | 'SYNC_FRESHNESS_TARGET'
>;

export function pollingPolicy(config: PollingConfig): PollingPolicy {
  return {
    incrementalMs: incrementalMinutes(config) * 60_000,
    fullMs: config.SYNC_FULL_HOURS * 3_600_000,
    pollsPerPass: config.SYNC_POLLS_PER_PASS,
    syncShare: config.MIRROR_SYNC_BUDGET_SHARE,
    pollingShare: config.SYNC_POLLING_SHARE,
    freshnessTargetMs: config.SYNC_FRESHNESS_TARGET,
  };
}

export function freshnessSettings(config: PollingConfig): FreshnessSettings {
  return { policy: pollingPolicy(config), publishedRate: (system) => knownProfile(system)?.requestsPerMinute };
}
