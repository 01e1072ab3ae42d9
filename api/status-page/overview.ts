// Everything the status page shows, gathered in one call: Postgres for accounts, streams, budgets,
// errors, inbox and deliveries; Temporal for the passes running now. Also served as /status.json.
import type { ReadRouting } from '../../mirror/reads/read-router.ts';
import {
  accountsOverview,
  deliveriesOverview,
  inboxOverview,
  rateBudgets,
  recentErrors,
  streamProgress,
  type AccountOverview,
  type BudgetRow,
  type DeliveryOverview,
  type InboxOverview,
  type RecentError,
  type StreamProgressRow,
} from '../../mirror/ops/metrics-overview.ts';
import { pollingOverview, type DueStream, type PollingGroup } from '../../mirror/ops/status.ts';
import { freshnessOverview, type AccountFreshness, type FreshnessSettings, type ResourceFreshness } from '../../mirror/streams/freshness.ts';
import { accountSyncWorkflowId, streamWorkflowId } from '../../lib/workflow-ids.ts';
import type { Pool } from '../../mirror/db/pool.ts';
import type { ClassUsage, Priority } from '../../connectors/governor.ts';
import type { SyncControl } from '../sync-control.ts';
import { runningPasses, temporalLinks, type RunningPass } from './temporal.ts';

interface AccountStatus extends AccountOverview {
  /** The pass running now, with its progress as the workflow reports it. */
  pass: (RunningPass & { link: string | undefined }) | null;
  links: { sync: string | undefined; fullSchedule: string | undefined; incrementalSchedule: string | undefined };
}

interface ActiveStream extends StreamProgressRow {
  link: string | undefined;
}

export interface StatusOverview {
  generatedAt: string;
  temporal: { uiUrl: string | null; namespace: string | null; taskQueue: string | null; reachable: boolean; error: string | null };
  totals: {
    accounts: number;
    streams: number;
    syncing: number;
    failed: number;
    /** Streams whose pass is stalled (its checkpoint does not move; tried again after a backoff). */
    stalled: number;
    records: number;
    inboxPending: number;
    deliveryBacklog: number;
    deliveriesFailing: number;
  };
  accounts: AccountStatus[];
  active: ActiveStream[];
  budgets: BudgetRow[];
  /**
   * What this process's governor let through, refused and made wait, by class: `application` (the
   * forwarded calls, which an API process makes) and `sync` (background work, in workers).
   */
  upstreamClasses: { class: 'sync' | 'application'; granted: number; refused: number; waitedForConcurrencySeconds: number; waitedForRateSeconds: number }[];
  errors: RecentError[];
  /**
   * When incremental passes list streams next and why (adaptive polling): per account, the streams by
   * reason, and the next few due. Small whatever the number of streams.
   */
  polling: { groups: PollingGroup[]; next: DueStream[] };
  /**
   * Freshness (with the process's polling settings): per account and resource, the staleness of its
   * lists and whether each is within the target; per account, whether the scheduler's plan meets the
   * target, which lists miss it and what budget would meet it. Null without the settings.
   */
  freshness: { resources: ResourceFreshness[]; accounts: AccountFreshness[] } | null;
  inbox: InboxOverview[];
  deliveries: DeliveryOverview[];
  /** This process's reads by server: each replica's lag and state, reads per server, fallbacks to the primary. Null without replicas. */
  reads: ReadRouting | null;
}

interface OverviewDeps {
  pool: Pool;
  sync?: SyncControl;
  temporalUiUrl?: string;
  /** This process's upstream requests by class (the upstream client's `usage`). */
  upstreamUsage?: () => Record<Priority, ClassUsage> | undefined;
  freshness?: FreshnessSettings;
  /** Where this process's reads go (replicas): shown when it has replicas. */
  reads?: () => ReadRouting;
}

export async function buildOverview(deps: OverviewDeps): Promise<StatusOverview> {
  const namespace = deps.sync?.client.options.namespace ?? null;
  const links = temporalLinks(deps.temporalUiUrl, namespace ?? 'default');
  const passes: Promise<{ passes: RunningPass[]; error: string | null }> = deps.sync
    ? runningPasses(deps.sync).then(
        (p) => ({ passes: p, error: null }),
        (error: unknown) => ({ passes: [], error: error instanceof Error ? error.message : String(error) }),
      )
    : Promise.resolve({ passes: [], error: 'not connected to Temporal' });
  const [accounts, active, budgets, errors, inbox, deliveries, temporal, polling, freshness] = await Promise.all([
    accountsOverview(deps.pool),
    streamProgress(deps.pool, { limit: 50 }),
    rateBudgets(deps.pool, 50),
    recentErrors(deps.pool, 20),
    inboxOverview(deps.pool),
    deliveriesOverview(deps.pool, 50),
    passes,
    pollingOverview(deps.pool, { next: 8 }),
    deps.freshness ? freshnessOverview(deps.pool, deps.freshness) : Promise.resolve(null),
  ]);
  const passOf = new Map<string, RunningPass>();
  // The account's own pass first (`account-sync:<id>`), else any scheduled or targeted one.
  for (const p of [...temporal.passes].sort((a, b) => a.workflowId.length - b.workflowId.length)) if (!passOf.has(p.accountId)) passOf.set(p.accountId, p);
  const ids = deps.sync?.scheduleIds.bind(deps.sync);
  return {
    generatedAt: new Date().toISOString(),
    temporal: {
      uiUrl: deps.temporalUiUrl ?? null,
      namespace,
      taskQueue: deps.sync?.taskQueue ?? null,
      reachable: temporal.error === null,
      error: temporal.error,
    },
    totals: {
      accounts: accounts.length,
      streams: accounts.reduce((n, a) => n + a.streams, 0),
      syncing: accounts.reduce((n, a) => n + (a.states.syncing ?? 0), 0),
      failed: accounts.reduce((n, a) => n + (a.states.failed ?? 0), 0),
      stalled: accounts.reduce((n, a) => n + (a.states.stalled ?? 0), 0),
      records: accounts.reduce((n, a) => n + a.liveRecords, 0),
      inboxPending: inbox.reduce((n, i) => n + i.pending, 0),
      deliveryBacklog: deliveries.reduce((n, d) => n + d.backlog, 0),
      deliveriesFailing: deliveries.filter((d) => d.lastError !== null).length,
    },
    accounts: accounts.map((a) => {
      const p = passOf.get(a.id);
      const schedules = ids?.(a.id);
      return {
        ...a,
        pass: p ? { ...p, link: links.workflow(p.workflowId, p.runId) } : null,
        links: {
          sync: links.workflow(accountSyncWorkflowId(a.id)),
          fullSchedule: schedules ? links.schedule(schedules.full) : undefined,
          incrementalSchedule: schedules ? links.schedule(schedules.incremental) : undefined,
        },
      };
    }),
    active: active.map((s) => ({ ...s, link: links.workflow(streamWorkflowId(s.accountId, s.resource, s.scope)) })),
    budgets,
    upstreamClasses: classesOf(deps.upstreamUsage?.()),
    errors,
    polling,
    freshness,
    inbox,
    deliveries,
    reads: deps.reads ? deps.reads() : null,
  };
}

function classesOf(usage: Record<Priority, ClassUsage> | undefined): StatusOverview['upstreamClasses'] {
  if (!usage) return [];
  return (['interactive', 'background'] as const).map((p) => ({
    class: p === 'interactive' ? 'application' : 'sync',
    granted: usage[p].granted,
    refused: usage[p].refused,
    waitedForConcurrencySeconds: Math.round(usage[p].waitedForConcurrencyMs) / 1000,
    waitedForRateSeconds: Math.round(usage[p].waitedForRateMs) / 1000,
  }));
}
