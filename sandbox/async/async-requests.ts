// Async requests: the request runs in the background; its stored answer is polled at
// `/async-requests/{id}` until it expires.
import { randomUUID } from 'node:crypto';

type AsyncState = 'pending' | 'running' | 'executed' | 'failure';

interface StoredResponse {
  status: number;
  headers: Record<string, string>;
  body: string;
}

export interface AsyncRequest {
  id: string;
  accountId: string;
  state: AsyncState;
  startedAt: string | null;
  finishedAt: string | null;
  expiresAt: number;
  result: StoredResponse | null;
}

/** Results larger than this are refused with 413 when polled, as upstream does. */
export const MAX_ASYNC_RESULT_BYTES = 2 * 1024 * 1024;

export class AsyncRequests {
  private readonly requests = new Map<string, AsyncRequest>();

  constructor(public ttlMs: number) {}

  create(accountId: string): AsyncRequest {
    this.sweep();
    const r: AsyncRequest = {
      id: randomUUID(),
      accountId,
      state: 'pending',
      startedAt: null,
      finishedAt: null,
      expiresAt: Date.now() + this.ttlMs,
      result: null,
    };
    this.requests.set(r.id, r);
    return r;
  }

  get(id: string): AsyncRequest | undefined {
    return this.requests.get(id);
  }

  /** Forgets requests long past expiry (expired ones are kept a while to answer 410, not 404). */
  private sweep(): void {
    const horizon = Date.now() - this.ttlMs;
    for (const [id, r] of this.requests) if (r.expiresAt < horizon) this.requests.delete(id);
  }
}
