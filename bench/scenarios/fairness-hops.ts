// Where a change's seconds go in bench [14]: each hop from the upstream change to the read API's answer,
// read back after the run from the mirror's own records (the inbox row, the record's row) and from the
// change workflow's history on the Temporal server. All clocks are this machine's.
import type { Client } from '@temporalio/client';
import type { Pool } from '../../mirror/db/pool.ts';
import { changesWorkflowId } from '../../lib/workflow-ids.ts';
import { fmt } from '../lib/report.ts';

/** One timed change of the small account: its lead, when it was made, when the upstream answered it, when the read API showed it. */
export interface TimedChange {
  id: string;
  t0: number;
  patched: number;
  seen: number | null;
}

/** The hops in their order, each as the time since the change was made (ms); null where it was not found. */
const hopNames = [
  'upstream answered the change',
  'webhook stored in the inbox (API)',
  'change workflow signalled',
  'event activity scheduled (workflow task done)',
  'event activity started (prompt queue)',
  'record written',
  'event marked applied',
  'event activity completed',
  'read API answered',
] as const;

type Hops = (number | null)[];

interface HistoryTimes {
  signals: number[];
  /** Activities of the change workflow: scheduled, started, completed (ms since the epoch). */
  activities: { scheduled: number; started?: number; completed?: number }[];
}

/** A history event's time (a protobuf Timestamp) in ms since the epoch. */
function eventMs(t: { seconds?: unknown; nanos?: number | null } | null | undefined): number {
  const s = t?.seconds;
  const seconds = s && typeof s === 'object' && 'toNumber' in s ? (s as { toNumber(): number }).toNumber() : Number(s ?? 0);
  return seconds * 1000 + Math.floor((t?.nanos ?? 0) / 1e6);
}

async function historyTimes(temporal: Client, accountId: string): Promise<HistoryTimes> {
  const out: HistoryTimes = { signals: [], activities: [] };
  const history = await temporal.workflow.getHandle(changesWorkflowId(accountId)).fetchHistory();
  const byScheduled = new Map<string, HistoryTimes['activities'][number]>();
  for (const e of history.events ?? []) {
    const at = eventMs(e.eventTime);
    if (e.workflowExecutionSignaledEventAttributes) out.signals.push(at);
    else if (e.activityTaskScheduledEventAttributes) {
      const a = { scheduled: at };
      out.activities.push(a);
      byScheduled.set(String(e.eventId), a);
    } else if (e.activityTaskStartedEventAttributes) {
      const a = byScheduled.get(String(e.activityTaskStartedEventAttributes.scheduledEventId));
      if (a) a.started = at;
    } else if (e.activityTaskCompletedEventAttributes) {
      const a = byScheduled.get(String(e.activityTaskCompletedEventAttributes.scheduledEventId));
      if (a) a.completed = at;
    }
  }
  return out;
}

/** Each change's hops, as times since it was made. */
export async function changeHops(pool: Pool, temporal: Client, accountId: string, changes: readonly TimedChange[]): Promise<Hops[]> {
  const ids = changes.map((c) => c.id);
  const { rows: inbox } = await pool.query<{ target: string; received: Date; applied: Date | null }>(
    `SELECT target, received_at AS received, applied_at AS applied FROM inbox_events WHERE account_id = $1 AND target = ANY($2) ORDER BY id`,
    [accountId, ids],
  );
  const { rows: records } = await pool.query<{ id: string; mirrored: Date }>(
    `SELECT id, mirrored_at AS mirrored FROM records WHERE account_id = $1 AND resource = 'leads' AND id = ANY($2)`,
    [accountId, ids],
  );
  const history = await historyTimes(temporal, accountId).catch(() => ({ signals: [], activities: [] }));
  return changes.map((c) => {
    const event = inbox.filter((r) => r.target === c.id).at(-1);
    const received = event ? event.received.getTime() : null;
    const signal = received === null ? undefined : history.signals.find((s) => s >= received - 5);
    const activity = signal === undefined ? undefined : history.activities.find((a) => a.scheduled >= signal);
    const record = records.find((r) => r.id === c.id);
    const since = (t: number | null | undefined) => (t === null || t === undefined ? null : t - c.t0);
    return [
      since(c.patched),
      since(received),
      since(signal),
      since(activity?.scheduled),
      since(activity?.started),
      since(record?.mirrored.getTime()),
      since(event?.applied?.getTime()),
      since(activity?.completed),
      c.seen === null ? null : c.seen,
    ];
  });
}

/** A note line: each hop's p50 and max over the changes, and the step from the hop before. */
export function hopsNote(hops: readonly Hops[]): string {
  const parts = hopNames.map((name, i) => {
    const at = hops.map((h) => h[i]).filter((v): v is number => v !== null && v !== undefined);
    const step = hops
      .map((h) => (h[i] !== null && h[i] !== undefined && i > 0 && h[i - 1] !== null && h[i - 1] !== undefined ? h[i] - h[i - 1]! : null))
      .filter((v): v is number => v !== null);
    if (at.length === 0) return `${name}: not found`;
    const sorted = [...step].sort((a, b) => a - b);
    const median = sorted.length > 0 ? sorted[Math.floor(sorted.length / 2)]! : null;
    return `${name} at max ${fmt(Math.max(...at))} ms` + (step.length > 0 ? ` (step median ${fmt(median)}, max ${fmt(Math.max(...step))})` : '');
  });
  return parts.join('; ');
}
