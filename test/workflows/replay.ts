// Replaying recorded histories (test/workflows/histories/<release>/<workflow>-<case>.json.gz, written by
// `npx mirror record-histories`) against workflow code, and saying clearly where one diverged: the file,
// the workflow, and the event of the history that the code no longer produces.
import { readdirSync, readFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import { gunzipSync } from 'node:zlib';
import { historyFromJSON } from '@temporalio/common/lib/proto-utils.js';
import { Worker } from '@temporalio/worker';

export const historiesRoot = join(import.meta.dirname, 'histories');

/** Every recorded history under `root`, as paths relative to it, releases in order. */
export function historyFiles(root = historiesRoot): string[] {
  return readdirSync(root, { recursive: true, withFileTypes: true })
    .filter((e) => e.isFile() && e.name.endsWith('.json.gz'))
    .map((e) => relative(root, join(e.parentPath, e.name)))
    .sort();
}

interface JsonEvent {
  eventId: string;
  eventType: string;
  [attributes: string]: unknown;
}

/** A history file in the JSON form of the Temporal CLI and UI export. */
export function readHistory(path: string): { events: JsonEvent[] } {
  return JSON.parse(gunzipSync(readFileSync(path)).toString('utf8')) as { events: JsonEvent[] };
}

/** The workflow type a history ran. */
export function workflowTypeOf(history: { events: JsonEvent[] }): string {
  const started = history.events[0]?.workflowExecutionStartedEventAttributes as { workflowType?: { name?: string } } | undefined;
  return started?.workflowType?.name ?? 'unknown workflow';
}

/** One event in words: its id, type, and the activity, timer or child it is about. */
export function describeEvent(event: JsonEvent | undefined): string {
  if (!event) return 'an event past the end of the history';
  const type = event.eventType.replace(/^EVENT_TYPE_/, '');
  const attrs = Object.entries(event).find(([k]) => k.endsWith('EventAttributes'))?.[1] as Record<string, unknown> | undefined;
  const name = (attrs?.activityType as { name?: string } | undefined)?.name ?? (attrs?.workflowType as { name?: string } | undefined)?.name;
  const detail = name ?? (typeof attrs?.timerId === 'string' ? `timer ${attrs.timerId}` : undefined);
  return `event ${event.eventId} ${type}${detail ? ` (${detail})` : ''}`;
}

export class ReplayDivergence extends Error {
  constructor(
    readonly file: string,
    readonly workflowType: string,
    readonly eventId: string | undefined,
    detail: string,
  ) {
    super(detail);
    this.name = 'ReplayDivergence';
  }
}

/**
 * The clear message of a replay that failed: which file, which workflow, which event of the history
 * the code no longer matches (Temporal's nondeterminism message names it as `EventId=<n>`), then
 * Temporal's own words.
 */
export function divergence(file: string, history: { events: JsonEvent[] }, error: Error): ReplayDivergence {
  const workflowType = workflowTypeOf(history);
  // Temporal's core names the event as `HistoryEvent(id: 5, ...)` or `EventId=5`, depending on the machine.
  const id = [/HistoryEvent\(id: (\d+)/, /EventId[=: ]+(\d+)/i, /event[ _]id[=: ]+(\d+)/i].map((re) => re.exec(error.message)?.[1]).find(Boolean);
  const event = id ? history.events.find((e) => e.eventId === id) : undefined;
  const where = id ? describeEvent(event) : 'an event Temporal did not name';
  // The core's own sentence, without the Rust debug dump around it.
  const said = /message: "([^"]+)"/.exec(error.message)?.[1] ?? error.message;
  const message =
    `The history ${file} of ${workflowType} no longer replays: the current code diverges at ${where}. ` +
    `A change that alters a running workflow's commands needs \`patched()\` (CONTRIBUTING.md). ` +
    `Temporal says (${error.name}): ${said}`;
  return new ReplayDivergence(file, workflowType, id, message);
}

/** Replays each file against the bundle at `codePath`; returns one divergence per history that failed. */
export async function replayFiles(codePath: string, files: string[], root = historiesRoot): Promise<ReplayDivergence[]> {
  const histories = new Map(files.map((f) => [f, readHistory(join(root, f))]));
  const failures: ReplayDivergence[] = [];
  const results = Worker.runReplayHistories(
    { workflowBundle: { codePath } },
    [...histories].map(([file, history]) => ({ workflowId: file, history: historyFromJSON(history) })),
  );
  for await (const result of results) {
    if (result.error) failures.push(divergence(result.workflowId, histories.get(result.workflowId)!, result.error));
  }
  return failures;
}
