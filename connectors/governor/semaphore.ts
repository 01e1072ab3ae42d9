// A first-in, first-out counting semaphore for one concurrency cap inside one process; a waiter can
// be aborted and then leaves the queue without taking a permit. An urgent waiter (an interactive
// request) goes ahead of every waiter that is not.

interface Waiter {
  resolve(): void;
  reject(reason: unknown): void;
  signal?: AbortSignal;
  onAbort?: () => void;
  urgent: boolean;
}

export class Semaphore {
  private active = 0;
  private readonly queue: Waiter[] = [];

  constructor(public limit: number) {}

  /** Requests holding a permit. */
  get inUse(): number {
    return this.active;
  }

  /** Requests waiting for one. */
  get waiting(): number {
    return this.queue.length;
  }

  acquire(signal?: AbortSignal, urgent = false): Promise<void> {
    if (signal?.aborted) return Promise.reject(abortReason(signal));
    if (this.active < this.limit && (this.queue.length === 0 || (urgent && !this.queue[0]!.urgent))) {
      this.active++;
      return Promise.resolve();
    }
    return new Promise<void>((resolve, reject) => {
      const waiter: Waiter = { resolve, reject, urgent };
      if (signal) {
        waiter.signal = signal;
        waiter.onAbort = () => {
          const i = this.queue.indexOf(waiter);
          if (i >= 0) this.queue.splice(i, 1);
          reject(abortReason(signal));
        };
        signal.addEventListener('abort', waiter.onAbort, { once: true });
      }
      if (!urgent) this.queue.push(waiter);
      else {
        const at = this.queue.findIndex((w) => !w.urgent);
        this.queue.splice(at < 0 ? this.queue.length : at, 0, waiter);
      }
    });
  }

  release(): void {
    this.active--;
    this.drain();
  }

  private drain(): void {
    while (this.active < this.limit && this.queue.length > 0) {
      const next = this.queue.shift()!;
      if (next.signal && next.onAbort) next.signal.removeEventListener('abort', next.onAbort);
      this.active++;
      next.resolve();
    }
  }
}

/** The signal's reason as an Error (Node's default reason is an AbortError DOMException). */
export function abortReason(signal: AbortSignal): Error {
  const reason: unknown = signal.reason;
  if (reason instanceof Error) return reason;
  const error = new Error('The operation was aborted', { cause: reason });
  error.name = 'AbortError';
  return error;
}
