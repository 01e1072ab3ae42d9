// The pure stages of applying the webhook inbox (activities/inbox.ts runs them with the I/O between):
// classify a batch of pending events (coalesced by object: which to fetch, which are settled as they
// are), then group what the upstream answered by stream (objects to write, objects gone, and the
// events each outcome settles). A DELETE event is a claim, not a fact: only the upstream's 404 makes
// the object gone; one the upstream still returns is written as an update.
import { scopeKindIn, type SourceSystemProfile } from '../connectors/source-systems/index.ts';
import { formatScope, resourceForWebhookType } from '../lib/resources.ts';
import type { PendingEvent } from '../mirror/streams/inbox.ts';
import type { StreamKey } from '../mirror/streams/streams.ts';

/** A service id as the contract gives every object (the receiver admits no other target). */
const serviceId = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/** One changed object to fetch, with every event of the batch that named it. */
export interface InboxObject {
  key: StreamKey;
  target: string;
  events: PendingEvent[];
  projectId?: string;
  /** The object's path at the upstream. */
  path: string;
}

/** Event ids by the outcome they are marked applied with, in the order outcomes first appeared. */
export class Outcomes {
  readonly #ids = new Map<string, number[]>();

  settle(outcome: string, events: readonly PendingEvent[]): void {
    this.#ids.set(outcome, [...(this.#ids.get(outcome) ?? []), ...events.map((e) => e.id)]);
  }

  entries(): [outcome: string, ids: number[]][] {
    return [...this.#ids];
  }
}

interface Classified {
  objects: InboxObject[];
  /** Events settled without a fetch (not mirrored, not an object id, no project). */
  skipped: number;
  /** Types whose `target` was `<type>:*`: a pass over them is needed. */
  fullPassTypes: string[];
}

/**
 * Stage 1: a batch's events coalesced by object (one fetch per object, whatever number of events named
 * it; the last event decides), and what needs no fetch settled in `outcomes`.
 */
export function classifyEvents(events: readonly PendingEvent[], accountId: string, profile: SourceSystemProfile | undefined, outcomes: Outcomes): Classified {
  const byObject = new Map<string, PendingEvent[]>();
  for (const e of events) {
    const k = `${e.type}|${e.projectId ?? ''}|${e.target}`;
    byObject.set(k, [...(byObject.get(k) ?? []), e]);
  }
  const classified: Classified = { objects: [], skipped: 0, fullPassTypes: [] };
  const skip = (outcome: string, group: PendingEvent[]) => {
    outcomes.settle(outcome, group);
    classified.skipped += group.length;
  };
  for (const group of byObject.values()) {
    const e = group[group.length - 1]!;
    const def = resourceForWebhookType(e.type);
    if (!def || def.scope === 'child') {
      skip('skipped: not mirrored', group);
      continue;
    }
    if (e.target.endsWith(':*')) {
      classified.fullPassTypes.push(def.name);
      outcomes.settle('pass requested', group);
      continue;
    }
    // The receiver admits service ids only; a row from before that check is not fetched.
    if (!serviceId.test(e.target)) {
      skip('skipped: target is not an object id', group);
      continue;
    }
    const kind = scopeKindIn(profile, def.name, def.scope);
    if (kind === 'project' && !e.projectId) {
      skip('skipped: no project', group);
      continue;
    }
    classified.objects.push({
      key: { accountId, resource: def.name, scope: kind === 'project' ? formatScope([['project', e.projectId!]]) : '' },
      target: e.target,
      events: group,
      ...(kind === 'project' ? { projectId: e.projectId! } : {}),
      path: `${def.path}/${encodeURIComponent(e.target)}`,
    });
  }
  return classified;
}

/** One stream's share of a batch. */
export interface StreamChanges {
  key: StreamKey;
  /** Objects the upstream returned, to write. */
  items: Record<string, unknown>[];
  /** Ids the upstream answered 404 for, to mark deleted. */
  gone: string[];
  /** Events applied by writing the objects. */
  upserted: PendingEvent[];
  /** DELETE events for objects the upstream still returned (written as an update). */
  refused: PendingEvent[];
  /** Events applied by marking the objects deleted. */
  deleted: PendingEvent[];
}

/**
 * Stage 3: what the upstream answered for each object (`undefined`: 404), grouped by stream. The first
 * fetch that failed is returned as `failure`; its events are in no stream and stay pending.
 */
export function groupByStream(
  objects: readonly InboxObject[],
  fetched: readonly PromiseSettledResult<Record<string, unknown> | undefined>[],
): { streams: StreamChanges[]; failure?: unknown } {
  const streams = new Map<string, StreamChanges>();
  let failure: { reason: unknown } | undefined;
  objects.forEach((o, i) => {
    const r = fetched[i]!;
    if (r.status === 'rejected') {
      failure ??= { reason: r.reason };
      return;
    }
    const k = `${o.key.resource}\n${o.key.scope}`;
    let stream = streams.get(k);
    if (!stream) streams.set(k, (stream = { key: o.key, items: [], gone: [], upserted: [], refused: [], deleted: [] }));
    if (r.value === undefined) {
      stream.gone.push(o.target);
      stream.deleted.push(...o.events);
    } else {
      stream.items.push(r.value);
      stream.upserted.push(...o.events.filter((e) => e.event !== 'DELETE'));
      stream.refused.push(...o.events.filter((e) => e.event === 'DELETE'));
    }
  });
  return failure ? { streams: [...streams.values()], failure: failure.reason } : { streams: [...streams.values()] };
}
