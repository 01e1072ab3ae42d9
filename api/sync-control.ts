// Starting and watching syncs through a Temporal client. Names workflow types; never imports workflow code.
import { Client, ScheduleAlreadyRunning, ScheduleNotFoundError, WorkflowIdConflictPolicy, type WorkflowHandle } from '@temporalio/client';

export interface SyncRequest {
  accountId: string;
  registerWebhooks?: boolean;
  mode?: 'full' | 'incremental';
  resource?: string;
  scope?: string;
  concurrency?: number;
}

export interface AccountSyncSummary {
  accountId: string;
  streams: number;
  failed: { resource: string; scope: string; error?: string }[];
  records: number;
  byResource: Record<string, number>;
}

/** The account pass by its workflow type's name, typed here so handles' results are typed too. */
export type AccountSyncWorkflow = (input: Record<string, unknown>) => Promise<AccountSyncSummary>;

export class SyncControl {
  constructor(
    readonly client: Client,
    readonly taskQueue: string,
    readonly every: { incrementalMinutes: number; fullHours: number } = { incrementalMinutes: 15, fullHours: 24 },
  ) {}

  /** A newly linked (or adopted) account: its first full pass now, then its periodic passes. */
  async onLinked(accountId: string): Promise<WorkflowHandle<AccountSyncWorkflow>> {
    const handle = await this.start({ accountId, mode: 'full', registerWebhooks: true });
    await this.ensureSchedules(accountId, this.every);
    return handle;
  }

  workflowId(req: SyncRequest): string {
    const target = req.resource ? `:${req.resource}${req.scope ? `:${req.scope}` : ''}` : '';
    return `account-sync:${req.accountId}${target}`;
  }

  /** Starts an account pass, or joins the one already running for the same target. */
  async start(req: SyncRequest): Promise<WorkflowHandle<AccountSyncWorkflow>> {
    return this.client.workflow.start<AccountSyncWorkflow>('accountSyncWorkflow', {
      taskQueue: this.taskQueue,
      workflowId: this.workflowId(req),
      args: [{ accountId: req.accountId, mode: req.mode ?? 'full', resource: req.resource, scope: req.scope, concurrency: req.concurrency, registerWebhooks: req.registerWebhooks }],
      workflowIdConflictPolicy: WorkflowIdConflictPolicy.USE_EXISTING,
    });
  }

  scheduleIds(accountId: string): { full: string; incremental: string } {
    return { full: `account-full:${accountId}`, incremental: `account-incremental:${accountId}` };
  }

  /**
   * Periodic passes for an account as Temporal Schedules: incremental passes often, full passes
   * (which also find deletions) daily. Each can be triggered or paused from the Temporal UI.
   */
  async ensureSchedules(accountId: string, every: { incrementalMinutes: number; fullHours: number }): Promise<void> {
    const ids = this.scheduleIds(accountId);
    const plans = [
      { scheduleId: ids.incremental, mode: 'incremental' as const, interval: `${every.incrementalMinutes} minutes` },
      { scheduleId: ids.full, mode: 'full' as const, interval: `${every.fullHours} hours` },
    ];
    for (const plan of plans) {
      try {
        await this.client.schedule.create({
          scheduleId: plan.scheduleId,
          spec: { intervals: [{ every: plan.interval }] },
          action: {
            type: 'startWorkflow',
            workflowType: 'accountSyncWorkflow',
            taskQueue: this.taskQueue,
            workflowId: `${plan.scheduleId}:run`,
            args: [{ accountId, mode: plan.mode }],
          },
          policies: { overlap: 'SKIP', catchupWindow: '1 minute' },
        });
      } catch (error) {
        if (!(error instanceof ScheduleAlreadyRunning)) throw error;
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
    await this.client.workflow.signalWithStart('accountChangesWorkflow', {
      taskQueue: this.taskQueue,
      workflowId: `account-changes:${accountId}`,
      args: [{ accountId }],
      signal: 'events',
      signalArgs: [],
    });
  }

  async progress(handle: WorkflowHandle): Promise<{ phase: string; streamsTotal: number; streamsDone: number; streamsFailed: number; records: number } | undefined> {
    try {
      return await handle.query('progress');
    } catch {
      return undefined;
    }
  }
}
