// Every activity's timeouts and retries, by kind of work, in one place: each workflow's
// proxyActivities names a profile instead of spelling the options. Options are not commands:
// changing one needs no patched() guard (CONTRIBUTING.md "Changing workflow code"), but it changes
// how long a pass waits for a dead worker, so each profile says why it is what it is.
//
// Heartbeat timeouts go with activities/heartbeat.ts, which beats every 5 s: 20 s is four beats
// missed, so a killed worker's activity is retried after 20 s instead of its start-to-close timeout.
import type { ActivityOptions } from '@temporalio/workflow';

/** Retries of work that pages through the upstream: backing off to a minute, ten attempts. */
const pagingRetry = { initialInterval: '1 second', backoffCoefficient: 2, maximumInterval: '1 minute', maximumAttempts: 10 } as const;

/** Retries of short reads of the mirror's own tables (a plan, a list of parent ids). */
const lookupRetry = { initialInterval: '1 second', maximumInterval: '30 seconds', maximumAttempts: 10 } as const;

export const activityProfiles = {
  /** The pass's plan and its steps between streams (plan, parent ids, children plan, retiring projects). */
  plan: { startToCloseTimeout: '2 minutes', heartbeatTimeout: '20 seconds', retry: lookupRetry },
  /** A children workflow's list of parent ids (no heartbeat: one query). */
  parents: { startToCloseTimeout: '2 minutes', retry: lookupRetry },
  /** Many small streams in one activity: a killed worker's sweep is retried within a minute and skips the streams it finished. */
  sweep: { startToCloseTimeout: '2 hours', heartbeatTimeout: '60 seconds', retry: pagingRetry },
  /** One batch of parents' children streams. */
  children: { startToCloseTimeout: '15 minutes', heartbeatTimeout: '60 seconds', retry: pagingRetry },
  /** One bounded slice of a stream's pages. */
  slice: { startToCloseTimeout: '10 minutes', heartbeatTimeout: '20 seconds', retry: pagingRetry },
  /** Registering the account's upstream webhooks: a few attempts; periodic passes keep the mirror fresh meanwhile. */
  webhooks: { startToCloseTimeout: '5 minutes', retry: { initialInterval: '2 seconds', maximumInterval: '1 minute', maximumAttempts: 5 } },
  /** Applying the webhook inbox: retried without end, since the events wait in the inbox. */
  inbox: { startToCloseTimeout: '5 minutes', retry: { initialInterval: '1 second', maximumInterval: '1 minute' } },
  /** One outbound delivery round. */
  delivery: {
    startToCloseTimeout: '2 minutes',
    heartbeatTimeout: '20 seconds',
    retry: { initialInterval: '1 second', backoffCoefficient: 2, maximumInterval: '5 minutes' },
  },
  /**
   * A probe of a refused account or a purge: a probe makes at most one upstream request and never
   * throws for the upstream's trouble, so a retry is only for a worker or database that failed.
   */
  lifecycle: { startToCloseTimeout: '2 minutes', retry: { initialInterval: '5 seconds', backoffCoefficient: 2, maximumInterval: '5 minutes' } },
  /** One async request of a mirror user. */
  asyncRequest: { startToCloseTimeout: '10 minutes', retry: { initialInterval: '1 second', maximumInterval: '30 seconds', maximumAttempts: 5 } },
} as const satisfies Record<string, ActivityOptions>;
