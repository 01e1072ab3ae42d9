// Live mutations on top of the generated data: patches, deletions and created records, per list.
// Generated records stay virtual; only what changed is stored.
import type { Fields } from './generators.ts';

export interface CreatedRecord {
  id: string;
  fields: Fields;
}

export interface ListOverlay {
  /** Patched generated records by index: the merged fields and their new update time. */
  patches: Map<number, { patch: Fields; updatedAt: string }>;
  deleted: Set<number>;
  /** Appended after the generated records, in creation order. */
  created: CreatedRecord[];
  /** Generated indices still present, then created records; rebuilt lazily after a change. */
  entries: Array<number | CreatedRecord> | null;
}

export class OverlayStore {
  private readonly lists = new Map<string, ListOverlay>();
  private counter = 0;

  /** The overlay of one list, or undefined when that list was never mutated (the fast path). */
  get(listKey: string): ListOverlay | undefined {
    return this.lists.get(listKey);
  }

  ensure(listKey: string): ListOverlay {
    let o = this.lists.get(listKey);
    if (!o) {
      o = { patches: new Map(), deleted: new Set(), created: [], entries: null };
      this.lists.set(listKey, o);
    }
    return o;
  }

  /** A number unique in this sandbox, for ids and source ids of created records. */
  next(): number {
    return ++this.counter;
  }

  private lastTick = 0;

  /** Now as ISO 8601, strictly later than the previous tick (mutations get distinct update times). */
  tick(): string {
    this.lastTick = Math.max(Date.now(), this.lastTick + 1);
    return new Date(this.lastTick).toISOString();
  }

  private changes = 0;

  /**
   * Counts every change to any list. A record may read other lists (an invoice embeds its line
   * items, a child its parent's fields), so what was derived from the data holds while this stands.
   */
  get version(): number {
    return this.changes;
  }

  changed(o: ListOverlay): void {
    o.entries = null;
    this.changes++;
  }

  clear(): void {
    this.lists.clear();
    this.changes++;
  }
}
