// Source systems that serve one request at a time per account (on-premises ERPs): at most one runs,
// a few wait, the rest are refused with 429; a request running too long is cut off.

interface Lane {
  running: number;
  waiting: Array<() => void>;
  /** Highest concurrency ever observed (always 1 here): stats prove a client never overlapped. */
  peakWaiting: number;
}

export class SerialQueues {
  private readonly lanes = new Map<string, Lane>();

  private lane(key: string): Lane {
    let l = this.lanes.get(key);
    if (!l) {
      l = { running: 0, waiting: [], peakWaiting: 0 };
      this.lanes.set(key, l);
    }
    return l;
  }

  /**
   * Waits for the account's turn. Returns a release function, or null when the queue is full.
   * `onAbandon` lets a caller that gave up leave the queue.
   */
  async acquire(key: string, maxQueued: number, abandoned: Promise<void>): Promise<(() => void) | null> {
    const lane = this.lane(key);
    const release = () => {
      lane.running--;
      const next = lane.waiting.shift();
      if (next) next();
    };
    if (lane.running === 0) {
      lane.running++;
      return once(release);
    }
    if (lane.waiting.length >= maxQueued) return null;
    let resolveTurn!: () => void;
    const turn = new Promise<void>((resolve) => {
      resolveTurn = () => {
        lane.running++;
        resolve();
      };
    });
    lane.waiting.push(resolveTurn);
    lane.peakWaiting = Math.max(lane.peakWaiting, lane.waiting.length);
    const outcome = await Promise.race([turn.then(() => 'turn' as const), abandoned.then(() => 'gone' as const)]);
    if (outcome === 'gone') {
      const at = lane.waiting.indexOf(resolveTurn);
      if (at >= 0) lane.waiting.splice(at, 1);
      else release(); // our turn came at the same moment: pass it on
      return null;
    }
    return once(release);
  }

  snapshot(): Record<string, { running: number; waiting: number; peak_waiting: number }> {
    return Object.fromEntries([...this.lanes].map(([k, l]) => [k, { running: l.running, waiting: l.waiting.length, peak_waiting: l.peakWaiting }]));
  }
}

function once(fn: () => void): () => void {
  let done = false;
  return () => {
    if (!done) {
      done = true;
      fn();
    }
  };
}
