// Starting and watching syncs through a Temporal client. Names workflow types; never imports workflow code.
import { Client, ScheduleAlreadyRunning, ScheduleNotFoundError, WorkflowIdConflictPolicy, type WorkflowHandle } from '@temporalio/client';
import type { AccountLifecycle } from '../connectors/credentials.ts';
import {
  accountProbeWorkflowId,
  accountPurgeWorkflowId,
  accountSyncWorkflowId,
  changesWorkflowId,
  maintenanceScheduleId,
  maintenanceWorkflowId,
  scheduledRunWorkflowId,
  scheduleIds,
} from '../lib/workflow-ids.ts';
import { workPriority, type WorkKind } from '../lib/work-priority.ts';

interface SyncRequest {
  accountId: string;
  registerWebhooks?: boolean;
  mode?: 'full' | 'incremental';
  resource?: string;
  scope?: string;
  concurrency?: number;
  /** Why the pass runs, for its priority (lib/work-priority.ts); default: a full pass is a backfill, an incremental one on demand. */
  kind?: WorkKind;
}

export interface AccountSyncSummary {
  accountId: string;
  streams: number;
  failed: { resource: string; scope: string; error?: string }[];
  /** Streams stalled at the pass's end, and why (absent from passes that ran before it was reported). */
  stalled?: { resource: string; scope: string; reason: string }[];
  records: number;
  byResource: Record<string, number>;
  /** Streams an incremental pass left alone as not due (adaptive polling). */
  notDue?: number;
  /** Why the pass stopped early: the account's credentials refused, or the account unlinked. */
  halted?: string;
}

/** The account pass by its workflow type's name, typed here so handles' results are typed too. */
type AccountSyncWorkflow = (input: Record<string, unknown>) => Promise<AccountSyncSummary>;

/** How accounts are handled over time (MIRROR_CREDENTIALS_PROBE_AFTER, MIRROR_CREDENTIALS_PROBE_MAX, MIRROR_RETENTION_AFTER_UNLINK). */
interface AccountPolicy {
  probeFirstMs: number;
  probeMaxMs: number;
  retentionAfterUnlinkMs: number;
}

const defaultAccountPolicy: AccountPolicy = { probeFirstMs: 60_000, probeMaxMs: 6 * 3_600_000, retentionAfterUnlinkMs: 30 * 86_400_000 };

export class SyncControl implements AccountLifecycle {
  constructor(
    readonly client: Client,
    readonly taskQueue: string,
    readonly every: { incrementalMinutes: number; fullHours: number } = { incrementalMinutes: 15, fullHours: 24 },
    /** How long a target started on demand (by a read) is not started again by another read. */
    readonly onDemandCooldownMs = 60_000,
    readonly accountPolicy: AccountPolicy = defaultAccountPolicy,
  ) {}

  /**
   * A known account linked again (a new token for it, or its refused token taken again): its schedules
   * run again and an incremental pass resumes it (streams that never completed are listed whole).
   */
  async relinked(accountId: string): Promise<void> {
    await this.ensureSchedules(accountId, this.every);
    await this.eachSchedule(accountId, (h) => h.unpause('the account is linked again'));
    await this.start({ accountId, mode: 'incremental', registerWebhooks: true });
  }

  /** The upstream refuses the account's token: its schedules pause, and a probe asks again with backoff. */
  async credentialsRefused(accountId: string): Promise<void> {
    await this.eachSchedule(accountId, (h) => h.pause('the upstream refuses the account token; a probe resumes it once it is taken again'));
    await this.client.workflow.start('accountProbeWorkflow', {
      taskQueue: this.taskQueue,
      workflowId: accountProbeWorkflowId(accountId),
      args: [{ accountId, firstDelayMs: this.accountPolicy.probeFirstMs, maxDelayMs: this.accountPolicy.probeMaxMs }],
      workflowIdConflictPolicy: WorkflowIdConflictPolicy.USE_EXISTING,
      priority: workPriority(accountId, 'scheduled'),
    });
  }

  /**
   * The account is unlinked (at the source or through the mirror): its schedules go, its running
   * passes, change workflow and probe are cancelled, and its data is purged after the retention.
   */
  async unlinked(accountId: string): Promise<void> {
    await this.deleteSchedules(accountId);
    const ids = this.scheduleIds(accountId);
    for (const id of [
      accountSyncWorkflowId(accountId),
      scheduledRunWorkflowId(ids.full),
      scheduledRunWorkflowId(ids.incremental),
      changesWorkflowId(accountId),
      accountProbeWorkflowId(accountId),
    ]) {
      await this.client.workflow
        .getHandle(id)
        .cancel()
        .catch(() => undefined);
    }
    await this.client.workflow.start('accountPurgeWorkflow', {
      taskQueue: this.taskQueue,
      workflowId: accountPurgeWorkflowId(accountId),
      args: [{ accountId, afterMs: this.accountPolicy.retentionAfterUnlinkMs }],
      workflowIdConflictPolicy: WorkflowIdConflictPolicy.USE_EXISTING,
      priority: workPriority(accountId, 'backfill'),
    });
  }

  /**
   * An idle account (nobody used it for MIRROR_IDLE_AFTER): its incremental and full schedules run
   * `slowdown` times less often. A paused schedule stays paused.
   */
  async slowSchedules(accountId: string, slowdown: number): Promise<void> {
    await this.setIntervals(accountId, { incrementalMinutes: this.every.incrementalMinutes * slowdown, fullHours: this.every.fullHours * slowdown });
  }

  /** An idle account used again: its schedules back to the usual cadence, and an incremental pass now. */
  async woke(accountId: string): Promise<void> {
    await this.setIntervals(accountId, this.every);
    await this.startOnDemand({ accountId, mode: 'incremental' });
  }

  private async setIntervals(accountId: string, every: { incrementalMinutes: number; fullHours: number }): Promise<void> {
    const ids = this.scheduleIds(accountId);
    const plans = [
      { id: ids.incremental, every: `${every.incrementalMinutes} minutes` },
      { id: ids.full, every: `${every.fullHours} hours` },
    ];
    for (const plan of plans) {
      try {
        await this.client.schedule.getHandle(plan.id).update((previous) => ({ ...previous, spec: { intervals: [{ every: plan.every }] } }));
      } catch (error) {
        if (!(error instanceof ScheduleNotFoundError)) throw error;
      }
    }
  }

  /**
   * The mirror's maintenance (retention purges, idle accounts) as a Temporal schedule, every hour, on
   * this task queue: made once by whichever worker starts first.
   */
  async ensureMaintenanceSchedule(): Promise<void> {
    try {
      await this.client.schedule.create({
        scheduleId: maintenanceScheduleId(this.taskQueue),
        spec: { intervals: [{ every: '1 hour' }] },
        action: {
          type: 'startWorkflow',
          workflowType: 'maintenanceWorkflow',
          taskQueue: this.taskQueue,
          workflowId: maintenanceWorkflowId(this.taskQueue),
          args: [],
        },
        policies: { overlap: 'SKIP', catchupWindow: '1 minute' },
      });
    } catch (error) {
      if (!(error instanceof ScheduleAlreadyRunning)) throw error;
    }
  }

  private async eachSchedule(accountId: string, fn: (handle: ReturnType<Client['schedule']['getHandle']>) => Promise<void>): Promise<void> {
    for (const id of Object.values(this.scheduleIds(accountId))) {
      try {
        await fn(this.client.schedule.getHandle(id));
      } catch (error) {
        if (!(error instanceof ScheduleNotFoundError)) throw error;
      }
    }
  }

  /** A newly linked (or adopted) account: its first full pass now, then its periodic passes. */
  async onLinked(accountId: string): Promise<WorkflowHandle<AccountSyncWorkflow>> {
    const handle = await this.start({ accountId, mode: 'full', registerWebhooks: true, kind: 'backfill' });
    await this.ensureSchedules(accountId, this.every);
    return handle;
  }

  workflowId(req: SyncRequest): string {
    return accountSyncWorkflowId(req.accountId, { resource: req.resource, scope: req.scope });
  }

  /**
   * Starts an account pass, or joins the one already running for the same target (a closed one is
   * started again: Temporal's default reuse policy allows a new run once the last has closed).
   */
  async start(req: SyncRequest): Promise<WorkflowHandle<AccountSyncWorkflow>> {
    return this.client.workflow.start<AccountSyncWorkflow>('accountSyncWorkflow', {
      taskQueue: this.taskQueue,
      workflowId: this.workflowId(req),
      args: [
        {
          accountId: req.accountId,
          mode: req.mode ?? 'full',
          resource: req.resource,
          scope: req.scope,
          concurrency: req.concurrency,
          registerWebhooks: req.registerWebhooks,
        },
      ],
      workflowIdConflictPolicy: WorkflowIdConflictPolicy.USE_EXISTING,
      priority: workPriority(req.accountId, req.kind ?? (req.mode === 'incremental' ? 'on-demand' : 'backfill')),
    });
  }

  /** Targets started on demand lately (workflow id -> until when another start is refused). */
  private readonly onDemand = new Map<string, number>();

  /**
   * A pass a read asked for (a scope not synced yet, answered by the upstream meanwhile): at most one
   * start per target per `onDemandCooldownMs`. Joining a running pass (`start`) is not enough: a pass
   * that ended without syncing the scope (it failed, or the upstream does not serve it) would be
   * started again by every read after it. Of concurrent reads, the first starts it and the others
   * go on without waiting. Returns whether this call started (or joined) a pass. Targets are bounded: callers name only scopes the
   * mirror has checked (an account's known projects, or a resource as a whole).
   */
  async startOnDemand(req: SyncRequest): Promise<boolean> {
    const id = this.workflowId(req);
    const now = Date.now();
    const until = this.onDemand.get(id);
    if (until !== undefined && until > now) return false;
    if (this.onDemand.size >= 10_000) {
      for (const [k, v] of this.onDemand) if (v <= now) this.onDemand.delete(k);
      if (this.onDemand.size >= 10_000) this.onDemand.clear();
    }
    this.onDemand.set(id, now + this.onDemandCooldownMs);
    try {
      await this.start({ ...req, kind: 'on-demand' });
      return true;
    } catch (error) {
      // Not started (Temporal unreachable): the next read may try again.
      this.onDemand.delete(id);
      throw error;
    }
  }

  scheduleIds(accountId: string): { full: string; incremental: string } {
    return scheduleIds(accountId);
  }

  /**
   * Periodic passes for an account as Temporal Schedules: incremental passes often, full passes
   * (which also find deletions) daily. Each can be triggered or paused from the Temporal UI.
   */
  async ensureSchedules(accountId: string, every: { incrementalMinutes: number; fullHours: number }): Promise<void> {
    const ids = this.scheduleIds(accountId);
    const plans = [
      { scheduleId: ids.incremental, mode: 'incremental' as const, interval: `${every.incrementalMinutes} minutes`, kind: 'scheduled' as const },
      { scheduleId: ids.full, mode: 'full' as const, interval: `${every.fullHours} hours`, kind: 'backfill' as const },
    ];
    for (const plan of plans) {
      const priority = workPriority(accountId, plan.kind);
      // The SDK's type of a schedule's action leaves `priority` out; its encoder sends it (and a
      // schedule's description reads it back).
      const action = {
        type: 'startWorkflow' as const,
        workflowType: 'accountSyncWorkflow',
        taskQueue: this.taskQueue,
        workflowId: scheduledRunWorkflowId(plan.scheduleId),
        args: [{ accountId, mode: plan.mode }],
        priority,
      };
      try {
        await this.client.schedule.create({
          scheduleId: plan.scheduleId,
          spec: { intervals: [{ every: plan.interval }] },
          action,
          policies: { overlap: 'SKIP', catchupWindow: '1 minute' },
        });
      } catch (error) {
        if (!(error instanceof ScheduleAlreadyRunning)) throw error;
        // A schedule made by an earlier release starts its passes without a priority: given one.
        const handle = this.client.schedule.getHandle(plan.scheduleId);
        const { action } = await handle.describe();
        if (action.type === 'startWorkflow' && (action.priority?.fairnessKey !== priority.fairnessKey || action.priority.priorityKey !== priority.priorityKey))
          await handle.update((previous) => ({ ...previous, action: { ...previous.action, priority } }));
      }
    }
  }

  async deleteSchedules(accountId: string): Promise<void> {
    for (const id of Object.values(this.scheduleIds(accountId))) {
      try {
        await this.client.schedule.getHandle(id).delete();
      } catch (error) {
        if (!(error instanceof ScheduleNotFoundError)) throw error;
      }
    }
  }

  private readonly signalsInFlight = new Map<string, Promise<void>>();
  private readonly signalsQueued = new Map<string, Promise<void>>();

  /**
   * Wakes (or starts) the account's change workflow: events are waiting in the inbox. Coalesced per
   * account: while one signal is in flight, callers share a single next one, sent after it, which
   * covers every event stored meanwhile; a burst of deliveries costs Temporal two signals at a time,
   * not one per event.
   */
  signalEvents(accountId: string): Promise<void> {
    const inFlight = this.signalsInFlight.get(accountId);
    if (inFlight) {
      let next = this.signalsQueued.get(accountId);
      if (!next) {
        next = inFlight
          .catch(() => undefined)
          .then(() => {
            this.signalsQueued.delete(accountId);
            return this.signalEvents(accountId);
          });
        this.signalsQueued.set(accountId, next);
      }
      return next;
    }
    const sent = this.sendEventsSignal(accountId).finally(() => this.signalsInFlight.delete(accountId));
    this.signalsInFlight.set(accountId, sent);
    return sent;
  }

  private async sendEventsSignal(accountId: string): Promise<void> {
    // Started on the main queue, which workers of every release poll; a worker of this release moves
    // it to the prompt task queue at once (workflows/account-changes.ts), where its workflow tasks, like
    // its activities, are the prompt worker's, which a backfill on the main queue does not hold up.
    await this.client.workflow.signalWithStart('accountChangesWorkflow', {
      taskQueue: this.taskQueue,
      workflowId: changesWorkflowId(accountId),
      args: [{ accountId, mainTaskQueue: this.taskQueue }],
      signal: 'events',
      signalArgs: [],
      priority: workPriority(accountId, 'event'),
    });
  }

  async progress(
    handle: WorkflowHandle,
  ): Promise<{ phase: string; streamsTotal: number; streamsDone: number; streamsFailed: number; records: number } | undefined> {
    try {
      return await handle.query('progress');
    } catch {
      return undefined;
    }
  }
}
