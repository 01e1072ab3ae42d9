// Which server answers a read: the primary, or a streaming replica (DATABASE_REPLICA_URLS) that has
// replayed everything the reading account wrote through the mirror (read-your-writes), lags less than
// MIRROR_REPLICA_MAX_LAG_MS and answers. Writes, the control plane and the sync stay on the primary.
//
// An account's position (write-positions.ts) lives in a table on the primary, so every API process
// sees every other's writes. Reading it for each read would put a query on the primary per read, so
// each process keeps a snapshot of the accounts whose position some replica may not have replayed yet
// (one query per `positionsTtlMs`, whatever the number of accounts). A snapshot taken before another
// process's write would miss it; so a write's answer waits until every replica has replayed it, or
// `positionsTtlMs` has passed since it was recorded, whichever comes first: by then every snapshot that
// missed it has expired, and a read sent after the write's answer cannot use one.
import pg from 'pg';
import { isConnectionError, type Pool } from '../db/pool.ts';
import {
  positionsAbove,
  positionsSnapshotMs,
  primaryPosition,
  recordWritePosition,
  replayedPosition,
  replayState,
  type ServerQuery,
} from '../db/write-positions.ts';
import { RecordReader } from './records-read.ts';

interface ReadRouterOptions {
  /** Streaming replicas of the primary (postgres URLs). */
  replicaUrls: readonly string[];
  /** A replica further behind than this is not read from (MIRROR_REPLICA_MAX_LAG_MS). */
  maxLagMs: number;
  /** Connections per replica (default 10). */
  poolSize?: number;
  /** How often each replica's lag is measured (default 1 s). */
  probeEveryMs?: number;
  /** Longest a read waits for a replica to replay its account's position before it goes to the primary (default 100 ms). */
  replayWaitMs?: number;
  /** How long a snapshot of the accounts' positions is used; also the longest a write's answer waits for the replicas (default 50 ms). */
  positionsTtlMs?: number;
  /** A replica failed (its reads went to the primary meanwhile). Never given the URL: it may hold a password. */
  onReplicaError?: (replica: string, error: Error) => void;
}

/** Why a read that could have gone to a replica went to the primary. */
type FallbackReason = 'lagging' | 'down' | 'not_replayed' | 'failed';

interface ReplicaStatus {
  /** host:port/database (never the user or password). */
  name: string;
  up: boolean;
  /** Milliseconds behind the primary when last measured; null when not known (down, never measured). */
  lagMs: number | null;
  /** Reads routed to it. */
  reads: number;
  /** Its queries that failed and were answered by the primary. */
  failedQueries: number;
  lastError: string | null;
  /** When a replica that failed is tried again (ms from now); 0 when up. */
  retryInMs: number;
}

export interface ReadRouting {
  replicas: ReplicaStatus[];
  maxLagMs: number;
  /** Reads routed to the primary (all of them without replicas). */
  primaryReads: number;
  /** Reads that went to the primary although replicas are configured, by reason. */
  fallbacks: Record<FallbackReason, number>;
}

/** The name a replica is shown under: its address, never its credentials. */
function replicaName(url: string): string {
  const u = new URL(url);
  return `${u.hostname}:${u.port || 5432}${u.pathname}`;
}

/**
 * A replica's pool: a query that fails because the replica does not answer (down, restarting,
 * unreachable) or cancelled it (a conflict with recovery) is run again on the primary, so a read
 * never fails because a replica did.
 */
class ReplicaPool extends pg.Pool {
  readonly #fallback: Pool;
  readonly #failed: (error: Error) => void;

  constructor(config: pg.PoolConfig, fallback: Pool, failed: (error: Error) => void) {
    super(config);
    this.#fallback = fallback;
    this.#failed = failed;
  }

  // pg's overloads (callbacks, submittables) are left to pg; promise-returning calls fall back.
  override query(...args: unknown[]): never {
    const call = (pool: pg.Pool) => (pg.Pool.prototype.query as (...a: unknown[]) => unknown).apply(pool, args);
    const last = args.at(-1);
    if (typeof last === 'function' || typeof (args[0] as { submit?: unknown } | undefined)?.submit === 'function') return call(this) as never;
    return (call(this) as Promise<unknown>).catch((error: unknown) => {
      if (!(error instanceof Error) || !replicaFailure(error)) throw error;
      this.#failed(error);
      return call(this.#fallback);
    }) as never;
  }

  /** A query on this replica alone (its lag probes), never answered by the primary. */
  readonly direct: ServerQuery = (text) => (pg.Pool.prototype.query as (text: string) => Promise<never>).call(this, text);
}

/** A failure of the replica rather than of the statement: the primary answers the query instead. */
function replicaFailure(error: Error): boolean {
  const code = (error as { code?: unknown }).code;
  // 40001 on a standby: "canceling statement due to conflict with recovery"; 57P03: starting up.
  return isConnectionError(error) || code === '40001' || code === '57P03' || /timeout exceeded when trying to connect/i.test(error.message);
}

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

class Replica {
  readonly name: string;
  readonly pool: ReplicaPool;
  /** The replica's reads, with caches of their own. */
  readonly reader: RecordReader;
  /** What it had replayed when last asked (bytes from 0/0). */
  replayed = 0;
  lagMs: number | null = null;
  measuredAt = 0;
  failures = 0;
  downUntil = 0;
  lastError: string | null = null;
  reads = 0;
  failedQueries = 0;
  #poll: Promise<number> | undefined;

  constructor(url: string, primary: Pool, poolSize: number, onError: (replica: Replica, error: Error) => void) {
    this.name = replicaName(url);
    this.pool = new ReplicaPool(
      { connectionString: url, max: poolSize, application_name: 'mirror-reads', idleTimeoutMillis: 30_000, connectionTimeoutMillis: 2_000 },
      primary,
      (error) => {
        this.failedQueries++;
        onError(this, error);
      },
    );
    // An idle connection that dies is dropped by the pool; the next query reconnects (or falls back).
    this.pool.on('error', () => undefined);
    this.reader = new RecordReader(this.pool);
  }

  /** Its replay position now; concurrent callers share one query. */
  poll(): Promise<number> {
    return (this.#poll ??= replayedPosition(this.pool.direct)
      .then((at) => {
        if (at > this.replayed) this.replayed = at;
        return at;
      })
      .finally(() => (this.#poll = undefined)));
  }
}

/**
 * Picks the server of each read (`readerFor`: its RecordReader, whose `pool` the request's other reads use), records each write's position (`wrote`), and measures the
 * replicas in the background (`start`; `close` stops it and the replicas' pools). Owned by the API.
 */
export class ReadRouter {
  readonly primary: Pool;
  /** The primary's reads (every read without replicas). */
  readonly primaryReader: RecordReader;
  readonly maxLagMs: number;
  readonly #replicas: Replica[];
  readonly #probeEveryMs: number;
  readonly #replayWaitMs: number;
  readonly #ttlMs: number;
  readonly #onError: ReadRouterOptions['onReplicaError'];
  /** This process's own writes: account -> position. */
  readonly #own = new Map<string, number>();
  #snapshot: { pending: Map<string, number>; until: number } | undefined;
  #refresh: { started: number; pending: Promise<Map<string, number>> } | undefined;
  /** The primary's position as sampled by the probes (time, position), oldest first. */
  readonly #samples: { at: number; lsn: number }[] = [];
  #timer: NodeJS.Timeout | undefined;
  #probing: Promise<void> | undefined;
  #next = 0;
  #primaryReads = 0;
  readonly #fallbacks: Record<FallbackReason, number> = { lagging: 0, down: 0, not_replayed: 0, failed: 0 };
  readonly #observers = new Set<(read: { accountId: string; server: string; fallback?: FallbackReason }) => void>();

  constructor(primary: Pool, options: ReadRouterOptions) {
    this.primary = primary;
    this.primaryReader = new RecordReader(primary);
    this.maxLagMs = options.maxLagMs;
    this.#probeEveryMs = options.probeEveryMs ?? 1000;
    this.#replayWaitMs = options.replayWaitMs ?? 100;
    this.#ttlMs = options.positionsTtlMs ?? positionsSnapshotMs;
    this.#onError = options.onReplicaError;
    this.#replicas = options.replicaUrls.map((url) => new Replica(url, primary, options.poolSize ?? 10, (r, error) => this.#failed(r, error, true)));
  }

  /** Whether any replica is configured (without one every read is the primary's and nothing is recorded). */
  get hasReplicas(): boolean {
    return this.#replicas.length > 0;
  }

  /** Measures the replicas now, then every `probeEveryMs`. */
  async start(): Promise<void> {
    if (!this.hasReplicas || this.#timer) return;
    await this.probe();
    this.#timer = setInterval(() => void this.probe(), this.#probeEveryMs);
    this.#timer.unref();
  }

  async close(): Promise<void> {
    if (this.#timer) clearInterval(this.#timer);
    this.#timer = undefined;
    await this.#probing?.catch(() => undefined);
    await Promise.allSettled(this.#replicas.map((r) => r.pool.end()));
  }

  /**
   * The server a read of `accountId` runs on: a replica that is up, within the lag bound and has
   * replayed the account's last write (waiting up to `replayWaitMs` for one to), else the primary.
   */
  async readerFor(accountId: string): Promise<RecordReader> {
    if (!this.hasReplicas) return this.#onPrimary(undefined, accountId);
    const arrival = Date.now();
    const usable = this.#replicas.filter((r) => this.#usable(r, arrival));
    if (usable.length === 0) return this.#onPrimary(this.#replicas.some((r) => arrival < r.downUntil || r.lagMs === null) ? 'down' : 'lagging', accountId);
    let required: number;
    try {
      required = Math.max(this.#own.get(accountId) ?? 0, (await this.#pending(arrival)).get(accountId) ?? 0);
    } catch {
      // The positions could not be read: only the primary is sure to hold the account's writes.
      return this.#onPrimary('failed', accountId);
    }
    const first = this.#next++ % usable.length;
    for (let i = 0; i < usable.length; i++) {
      const r = usable[(first + i) % usable.length]!;
      if (r.replayed >= required) return this.#onReplica(r, accountId);
    }
    // Every usable replica was behind the account's position when last asked: wait a little for one,
    // unless it lags more than the wait could cover.
    const best = usable.reduce((a, b) => (b.replayed > a.replayed ? b : a));
    if ((best.lagMs ?? Infinity) > this.#replayWaitMs) return this.#onPrimary('not_replayed', accountId);
    const deadline = arrival + this.#replayWaitMs;
    while (Date.now() < deadline) {
      const at = await best.poll().catch(() => -1);
      if (at < 0) break;
      if (at >= required) return this.#onReplica(best, accountId);
      await sleep(Math.min(5, Math.max(1, deadline - Date.now())));
    }
    return this.#onPrimary('not_replayed', accountId);
  }

  /**
   * After a write for `accountId` committed on the primary (a write route, an object fetched for a
   * read): records the account's position and waits until every replica has replayed it, or
   * `positionsTtlMs` has passed (see the top of this file). The caller answers its write after this.
   */
  async wrote(accountId: string): Promise<void> {
    if (!this.hasReplicas) return;
    const lsn = await recordWritePosition(this.primary, accountId);
    const recorded = Date.now();
    if ((this.#own.get(accountId) ?? 0) < lsn) this.#own.set(accountId, lsn);
    // A few milliseconds beyond the snapshots' lifetime: timers fire late, never early.
    const deadline = recorded + this.#ttlMs + 5;
    while (Date.now() < deadline) {
      const at = await Promise.all(this.#replicas.map((r) => (r.replayed >= lsn ? Promise.resolve(r.replayed) : r.poll().catch(() => 0))));
      if (at.every((x) => x >= lsn)) return;
      await sleep(Math.min(5, Math.max(1, deadline - Date.now())));
    }
  }

  /** Per replica: lag, reads, failures; reads per server and the fallbacks to the primary. */
  status(): ReadRouting {
    const now = Date.now();
    return {
      maxLagMs: this.maxLagMs,
      replicas: this.#replicas.map((r) => ({
        name: r.name,
        up: now >= r.downUntil && r.lagMs !== null,
        lagMs: r.lagMs,
        reads: r.reads,
        failedQueries: r.failedQueries,
        lastError: r.lastError,
        retryInMs: Math.max(0, r.downUntil - now),
      })),
      primaryReads: this.#primaryReads,
      fallbacks: { ...this.#fallbacks },
    };
  }

  /** Measures each replica that is not waiting out a failure: its replay position and its lag. */
  probe(): Promise<void> {
    return (this.#probing ??= this.#probeOnce().finally(() => (this.#probing = undefined)));
  }

  async #probeOnce(): Promise<void> {
    const at = Date.now();
    const primary = await primaryPosition(this.primary).then(
      (lsn) => ({ at, lsn }),
      () => undefined,
    );
    if (primary) {
      this.#samples.push(primary);
      // Enough samples to tell a lag well past the bound.
      const keep = Math.ceil((this.maxLagMs * 2) / this.#probeEveryMs) + 2;
      if (this.#samples.length > keep) this.#samples.splice(0, this.#samples.length - keep);
    }
    await Promise.all(
      this.#replicas
        .filter((r) => Date.now() >= r.downUntil)
        .map(async (r) => {
          try {
            const state = await replayState(r.pool.direct);
            if (!state.standby) throw new Error('not a standby (pg_is_in_recovery() is false): it is not read from');
            r.replayed = state.replayed;
            r.lagMs = this.#lag(state.replayed, state.sinceLastCommitMs, primary);
            r.measuredAt = Date.now();
            r.failures = 0;
            r.downUntil = 0;
            r.lastError = null;
          } catch (error) {
            this.#failed(r, error instanceof Error ? error : new Error(String(error)), false);
          }
        }),
    );
    // Positions every replica has replayed no longer steer a read.
    const floor = Math.min(...this.#replicas.map((r) => r.replayed));
    for (const [account, lsn] of this.#own) if (lsn <= floor) this.#own.delete(account);
  }

  /**
   * How far behind the primary a replica is: 0 when it has replayed the primary's position sampled
   * before asking it; else the time since the latest primary sample it has replayed, or since the
   * primary committed the last transaction it replayed, whichever is shorter (both bound its age).
   */
  #lag(replayed: number, sinceLastCommitMs: number | null, primary: { at: number; lsn: number } | undefined): number | null {
    if (primary && replayed >= primary.lsn) return 0;
    const now = Date.now();
    let bySample = Infinity;
    for (let i = this.#samples.length - 1; i >= 0; i--)
      if (this.#samples[i]!.lsn <= replayed) {
        bySample = now - this.#samples[i]!.at;
        break;
      }
    const lag = Math.min(bySample, sinceLastCommitMs ?? Infinity);
    return Number.isFinite(lag) ? Math.max(0, Math.round(lag)) : null;
  }

  #usable(r: Replica, now: number): boolean {
    return now >= r.downUntil && r.lagMs !== null && r.lagMs <= this.maxLagMs && now - r.measuredAt <= this.#probeEveryMs * 3 + 1000;
  }

  /** A replica failed: not read from until a probe after its backoff (250 ms, doubling to 10 s) finds it again. */
  #failed(r: Replica, error: Error, duringRead: boolean): void {
    const now = Date.now();
    if (duringRead) this.#fallbacks.failed++;
    r.lastError = error.message.slice(0, 300);
    if (duringRead && now < r.downUntil) return;
    r.failures++;
    r.downUntil = now + Math.min(10_000, 250 * 2 ** Math.min(r.failures - 1, 10));
    r.lagMs = null;
    this.#onError?.(r.name, error);
  }

  /**
   * The accounts whose position some replica may not have replayed, as of a snapshot taken after
   * `arrival - positionsTtlMs`; concurrent reads share one query.
   */
  #pending(arrival: number): Promise<Map<string, number>> {
    const s = this.#snapshot;
    const r = this.#refresh;
    if (s && arrival < s.until) {
      // Past half its life, the next snapshot is asked for ahead of the reads that will need it.
      if (!r && arrival > s.until - this.#ttlMs / 2) this.#refreshPositions().catch(() => undefined);
      return Promise.resolve(s.pending);
    }
    if (r && arrival < r.started + this.#ttlMs) return r.pending;
    return this.#refreshPositions();
  }

  #refreshPositions(): Promise<Map<string, number>> {
    const started = Date.now();
    const floor = Math.min(...this.#replicas.map((x) => x.replayed));
    const pending = positionsAbove(this.primary, floor).then((map) => {
      if (!this.#snapshot || started + this.#ttlMs > this.#snapshot.until) this.#snapshot = { pending: map, until: started + this.#ttlMs };
      return map;
    });
    const refresh = { started, pending };
    this.#refresh = refresh;
    void pending.then(
      () => (this.#refresh === refresh ? (this.#refresh = undefined) : undefined),
      () => (this.#refresh === refresh ? (this.#refresh = undefined) : undefined),
    );
    return pending;
  }

  /** Calls `fn` with each read's account and server (`primary` or a replica's name) until the returned function is called. */
  observe(fn: (read: { accountId: string; server: string; fallback?: FallbackReason }) => void): () => void {
    this.#observers.add(fn);
    return () => this.#observers.delete(fn);
  }

  #onPrimary(reason: FallbackReason | undefined, accountId: string): RecordReader {
    this.#primaryReads++;
    if (reason) this.#fallbacks[reason]++;
    for (const fn of this.#observers) fn({ accountId, server: 'primary', ...(reason ? { fallback: reason } : {}) });
    return this.primaryReader;
  }

  #onReplica(r: Replica, accountId: string): RecordReader {
    r.reads++;
    for (const fn of this.#observers) fn({ accountId, server: r.name });
    return r.reader;
  }
}
