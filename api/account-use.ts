// Records that an account was read or written through the API, for idle accounts: at most one
// database write per account per `everyMs`, never awaited by the request. An idle account's first use
// wakes it (its schedules back to the usual cadence, an incremental pass now).
import type { Logger } from '../lib/logger.ts';
import type { Authenticator } from './auth.ts';
import { clearIdle, recordAccountUse } from '../mirror/control/account-use.ts';
import type { Pool } from '../mirror/db/pool.ts';

interface AccountWaker {
  woke(accountId: string): Promise<void>;
}

export class AccountUse {
  /** When each account's use was last written (ms): the throttle. */
  private readonly written = new Map<string, number>();
  private readonly everyMs: number;

  constructor(private readonly deps: { pool: Pool; waker?: AccountWaker | undefined; logger?: Logger | undefined; everyMs?: number }) {
    this.everyMs = deps.everyMs ?? 60_000;
  }

  /** The account was used now. Costs a map lookup, and a write in the background at most once per `everyMs`. */
  touch(accountId: string): void {
    const now = Date.now();
    const last = this.written.get(accountId);
    if (last !== undefined && now - last < this.everyMs) return;
    if (this.written.size >= 100_000) this.written.clear();
    this.written.set(accountId, now);
    void this.record(accountId);
  }

  /** Settles once the write (and a wake it led to) is done; for tests and shutdown. */
  private pending = new Set<Promise<void>>();

  async flush(): Promise<void> {
    await Promise.allSettled([...this.pending]);
  }

  private record(accountId: string): Promise<void> {
    const done = (async () => {
      try {
        const { idleSince } = await recordAccountUse(this.deps.pool, accountId);
        if (idleSince && this.deps.waker) {
          await this.deps.waker.woke(accountId);
          await clearIdle(this.deps.pool, accountId, idleSince);
          this.deps.logger?.info({ account: accountId, idleSince }, 'an idle account was used: its schedules are back to the usual cadence');
        }
      } catch (error) {
        // The next use after the throttle tries again.
        this.written.delete(accountId);
        this.deps.logger?.warn({ account: accountId, err: (error as Error).message }, "recording an account's use failed");
      }
    })();
    this.pending.add(done);
    void done.finally(() => this.pending.delete(done));
    return done;
  }
}

/** The authenticator, noting each account it answers for as used. */
export function withAccountUse(auth: Authenticator, use: AccountUse): Authenticator {
  return {
    client: (request) => auth.client(request),
    async account(request) {
      const account = await auth.account(request);
      use.touch(account.id);
      return account;
    },
  };
}
