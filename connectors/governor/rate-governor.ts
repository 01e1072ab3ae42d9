// What the in-memory and the Postgres governors share: concurrency caps in this process, the order of
// acquiring (caps first, then one send slot in every budget the request spends), what each response's
// headers do to the pace, and the bookkeeping of our own requests the upstream has not counted yet.
// Two classes of request: interactive ones (an application waits) go first, may spend a
// whole window and are refused rather than held long; background ones also take a slot in each
// budget's background lane, which keeps them to the sync share of every window. Subclasses decide
// where the schedules live.
import { setTimeout as sleep } from 'node:timers/promises';
import type { Logger } from '../../lib/logger.ts';
import { GovernorWaitTooLongError, type ClassUsage, type Governor, type GovernorKeys, type KnownWindow, type Priority } from '../governor.ts';
import type { RateLimitReport, RateLimitWindow } from '../rate-limit-headers.ts';
import {
  laneOf,
  planFor,
  resolveOptions,
  sourceSystemWindow,
  type BudgetSpec,
  type CapSpec,
  type Clock,
  type RateGovernorOptions,
  type ResolvedOptions,
} from './budgets.ts';
import { blockAfterRejection, laneAnchor, laneSpacing, observeWindow, paceFor, windowLeft, type Pace, type WindowFacts } from './pacing.ts';
import { backgroundShare, emptyAppUse, recentAppUse, windowIndex, type AppUse } from './reserve.ts';
import { Semaphore } from './semaphore.ts';

const systemClock: Clock = {
  now: () => Date.now(),
  sleep: (ms, signal) => sleep(ms, undefined, signal ? { signal } : {}),
};

/** What this process knows of one budget. */
export interface BudgetView {
  spec: BudgetSpec;
  facts: WindowFacts;
  /** This process's estimate of the end of the schedule (epoch ms, local clock). */
  nextAt?: number;
  /** Our requests holding a slot and not yet released: request id -> slot (epoch ms). */
  inFlight: Map<number, number>;
  /** Interactive requests per window, as last known (the adaptive reserve; see reserve.ts). */
  appUse: AppUse;
  /** Where `appUse` was read from a shared store: its clock less ours (window numbers are on its clock). */
  appClock?: { offsetMs: number };
  /** When this process first saw the budget (epoch ms): windows before it are not known complete. */
  firstSeenAt: number;
}

export interface Reservation {
  /**
   * False when the next free slot lies beyond the reservation horizon: nothing was reserved, and
   * the caller asks again later. A slot is only held that close to its time, so a pace that the
   * headers speed up (a window learned shorter) applies to every waiting request at once instead
   * of after a queue of slots reserved at the old pace.
   */
  reserved: boolean;
  /** How long until the reserved slot (or, unreserved, the next free one). */
  waitMs: number;
  /** Per budget key: how long until the schedule's next free slot, when known. */
  nextInMs: Map<string, number>;
}

/** How a request reserves its slot. */
export interface ReserveRequest {
  /** Nothing is reserved when the slot is further away than this. */
  horizonMs: number;
  /** An application waits (and background work keeps to its share): the slot may come a spacing early (see reserveSlot). */
  early: boolean;
  /** An interactive request: counted in its budgets' windows for the adaptive reserve. */
  interactive: boolean;
}

/** Releases a cross-process concurrency slot; resolves once it is free for others. */
export type SharedRelease = () => Promise<void>;

const noUsage = (): ClassUsage => ({ granted: 0, refused: 0, waitedForConcurrencyMs: 0, waitedForRateMs: 0 });

export abstract class RateGovernor implements Governor {
  protected readonly options: ResolvedOptions;
  protected readonly clock: Clock;
  protected readonly logger: Logger | undefined;
  private readonly views = new Map<string, BudgetView>();
  private readonly semaphores = new Map<string, Semaphore>();
  private nextRequestId = 1;
  private readonly usageByClass: Record<Priority, ClassUsage> = { interactive: noUsage(), background: noUsage() };

  constructor(options: RateGovernorOptions = {}) {
    this.options = resolveOptions(options);
    this.clock = options.clock ?? systemClock;
    this.logger = options.logger;
  }

  /**
   * Reserves one slot in every budget at once (the later of their next slots), unless that slot is
   * more than `horizonMs` away.
   */
  protected abstract reserve(budgets: readonly BudgetSpec[], request: ReserveRequest, signal?: AbortSignal): Promise<Reservation>;

  /** Makes a new pace (from a response's headers, or a 429) the budget's. */
  protected abstract applyPace(view: BudgetView, pace: Pace, now: number): void;

  /** Takes a cross-process slot of a cap, for implementations shared by processes. */
  protected acquireShared(_cap: CapSpec, _signal?: AbortSignal): Promise<SharedRelease | undefined> {
    return Promise.resolve(undefined);
  }

  async acquire(keys: GovernorKeys, signal?: AbortSignal): Promise<() => void> {
    const plan = planFor(keys, this.options);
    const views = [plan.service, ...(plan.sourceSystem ? [plan.sourceSystem] : [])].map((spec) => this.view(spec));
    const priority: Priority = keys.priority ?? 'background';
    const interactive = priority === 'interactive';
    const laned = this.laned();
    // Background requests also take a slot in the lane of each budget with a known limit (paced
    // 1/share slower), and take it only just before its time (backgroundHorizonMs), so an interactive
    // request never waits behind a queue of them. A budget without a limit (an upstream that reports
    // none) has no lane.
    const laneViews = !interactive && laned ? views.filter((v) => v.facts.total !== undefined) : [];
    const lanes = laneViews.length > 0;
    const specs = [...views.map((v) => v.spec), ...laneViews.map((v) => laneOf(v.spec, this.shareOf(v, this.clock.now())))];
    const horizon = interactive
      ? this.options.interactiveMaxWaitMs
      : lanes
        ? Math.min(this.options.backgroundHorizonMs, this.options.reserveHorizonMs)
        : this.options.reserveHorizonMs;
    const usage = this.usageByClass[priority];
    const held: { semaphore: Semaphore; shared?: SharedRelease }[] = [];
    const releaseCaps = () => {
      for (const { semaphore, shared } of held.reverse()) {
        if (!shared) {
          semaphore.release();
          continue;
        }
        shared()
          .catch((error: unknown) => this.logger?.warn({ err: error }, 'rate governor: releasing a concurrency lease failed (it will expire)'))
          .finally(() => semaphore.release());
      }
    };
    const id = this.nextRequestId++;
    const started = this.clock.now();
    try {
      // Caps first: a send slot reserved and then held back by a full cap would be a slot wasted.
      for (const cap of plan.caps) {
        const semaphore = this.semaphore(cap);
        await semaphore.acquire(signal, interactive);
        const entry: { semaphore: Semaphore; shared?: SharedRelease } = { semaphore };
        held.push(entry);
        const shared = await this.acquireShared(cap, signal);
        if (shared) entry.shared = shared;
      }
      const capsDone = this.clock.now();
      usage.waitedForConcurrencyMs += capsDone - started;
      // Early slots only with a lane: it keeps background work to its share, so the rest of the
      // window is there for them; at share 1 the sync may spend the whole window, and an early slot
      // could be one more than it holds.
      const request: ReserveRequest = { horizonMs: horizon, early: interactive && laned, interactive };
      let reservation = await this.reserve(specs, request, signal);
      if (interactive && !reservation.reserved) {
        usage.refused++;
        throw this.tooLong(views, reservation.waitMs);
      }
      while (!reservation.reserved) {
        // Woken when the slot comes within the horizon (and at least every reserveHorizonMs, so a pace
        // the headers change applies to waiting requests too).
        const sleepMs = lanes
          ? Math.max(1, Math.min(reservation.waitMs - horizon, this.options.reserveHorizonMs))
          : Math.min(reservation.waitMs, this.options.reserveHorizonMs);
        await this.clock.sleep(sleepMs, signal);
        reservation = await this.reserve(specs, request, signal);
      }
      const now = this.clock.now();
      for (const v of views) {
        v.inFlight.set(id, now + reservation.waitMs);
        const nextIn = reservation.nextInMs.get(v.spec.key);
        if (nextIn !== undefined) v.nextAt = now + nextIn;
      }
      // Where the lanes' schedules were left (a lane's anchor behind them changes nothing).
      for (const v of laneViews) {
        const lane = this.view(laneOf(v.spec, 1));
        const nextIn = reservation.nextInMs.get(lane.spec.key);
        if (nextIn !== undefined) lane.nextAt = now + nextIn;
      }
      if (reservation.waitMs > 0) await this.clock.sleep(reservation.waitMs, signal);
      usage.waitedForRateMs += this.clock.now() - capsDone;
      usage.granted++;
    } catch (error) {
      for (const v of views) v.inFlight.delete(id);
      releaseCaps();
      throw error;
    }
    let released = false;
    return () => {
      if (released) return;
      released = true;
      for (const v of views) v.inFlight.delete(id);
      releaseCaps();
    };
  }

  /** Whether background requests keep to a lane: a fixed share below 1, or the adaptive reserve. */
  protected laned(): boolean {
    const share = this.options.syncShare;
    return share === undefined || share < 1;
  }

  /**
   * The share of a budget's window background work may spend: the fixed MIRROR_SYNC_BUDGET_SHARE, or
   * 1 less the application's reserve sized by its use in the recent complete windows (reserve.ts).
   */
  shareOf(view: BudgetView, now: number): number {
    const fixed = this.options.syncShare;
    if (fixed !== undefined) return fixed;
    const rule = this.options.reserveRule;
    const windowMs = view.facts.windowMs;
    const at = now + (view.appClock?.offsetMs ?? 0);
    const recent = recentAppUse(view.appUse, windowIndex(at, windowMs), rule.windows, windowIndex(view.firstSeenAt, windowMs) + 1);
    return backgroundShare(recent, view.facts.total ?? 0, rule);
  }

  /** What this process's requests of each class got so far (counters; they only grow). */
  usage(): Record<Priority, ClassUsage> {
    return { interactive: { ...this.usageByClass.interactive }, background: { ...this.usageByClass.background } };
  }

  /** The refusal of an interactive request, with the windows as this process knows them. */
  private tooLong(views: readonly BudgetView[], waitMs: number): GovernorWaitTooLongError {
    const windows: KnownWindow[] = views.map((v) => ({
      name: v.spec.kind === 'service' ? 'service' : v.spec.key.slice(v.spec.key.lastIndexOf(':') + 1),
      ...(v.facts.total !== undefined ? { total: v.facts.total } : {}),
      ...(v.facts.remaining !== undefined ? { remaining: v.facts.remaining } : {}),
      ...(v.facts.resetsAt !== undefined ? { resetsAt: v.facts.resetsAt } : {}),
    }));
    const seconds = Math.ceil(waitMs / 1000);
    return new GovernorWaitTooLongError(
      `The upstream's rate limit for this account leaves no request free for about ${seconds} s, longer than the mirror holds a call (MIRROR_INTERACTIVE_MAX_WAIT_MS, ${this.options.interactiveMaxWaitMs} ms): retry after that.`,
      waitMs,
      windows,
    );
  }

  report(keys: GovernorKeys, report: RateLimitReport, status: number, sentAt?: number): void {
    const plan = planFor(keys, this.options);
    const now = this.clock.now();
    const observed: [BudgetView, RateLimitWindow | undefined][] = [[this.view(plan.service), report.service]];
    if (plan.sourceSystem) observed.push([this.view(plan.sourceSystem), sourceSystemWindow(plan, report)]);
    const rejected = status === 429;
    // A 429 blocks the windows it reports spent; when none says so, every window of the request.
    const spent = observed.filter(([, w]) => w !== undefined && w.remaining <= 0).map(([v]) => v);
    for (const [view, window] of observed) {
      if (window) view.facts = observeWindow(view.facts, window, now, sentAt);
      else if (!rejected) continue;
      const unseen = unseenBy(view, sentAt);
      let pace = paceFor({ facts: view.facts, now, nextAt: view.nextAt, unseen }, this.options.pacing);
      const left = windowLeft(view.facts, now, unseen);
      if (left !== undefined) pace = { ...pace, left };
      if (rejected && (spent.length === 0 || spent.includes(view))) {
        pace = { ...pace, blockedUntil: Math.max(pace.blockedUntil ?? 0, blockAfterRejection(view.facts, now, this.options.pacing)) };
      }
      this.applyPace(view, pace, now);
      const share = this.shareOf(view, now);
      if (this.laned() && view.facts.total !== undefined) {
        // The lane keeps the window's even pace, `1 / share` slower (the budget's own schedule slows
        // it further when others spend the window), and takes the budget's blocks. A blocked lane's
        // pace is the one after the block: paced by the span of what was left of the window, it
        // would let the sync take the next window's slots a few ms apart.
        const lane = this.view(laneOf(view.spec, share));
        lane.facts = view.facts;
        const spacingMs = laneSpacing(view.facts, Math.max(now, pace.blockedUntil ?? now), share, this.options.pacing);
        // A background request that began this window (its only request so far): the lane's next slot is
        // at least its second there. Anchored on every background answer, the lane lost a request or two
        // a window in some runs of bench [10] (share 0.8 of what the application left: 0.74-0.84, against
        // 0.84-0.88 without an anchor; 0.79-0.83 so); simulated with late arrivals, 3 of 60 runs still put
        // one more than the share in a window, against 1 anchored on every answer and 36 without.
        const began = window !== undefined && window.total !== undefined && window.remaining === window.total - 1;
        const found = began && keys.priority !== 'interactive' ? laneAnchor(view.facts, spacingMs, now) : undefined;
        const anchor = found && (lane.nextAt === undefined || found.notBefore > lane.nextAt) ? found : undefined;
        const { anchor: _none, left: _left, ...lanePace } = pace;
        this.applyPace(lane, { ...lanePace, spacingMs, ...(anchor ? { anchor } : {}) }, now);
      }
    }
  }

  /** Takes a window length another process learned, when shorter than what this one knows. */
  protected adoptWindow(spec: BudgetSpec, windowMs: number): void {
    const view = this.view(spec);
    if (windowMs > 0 && windowMs < view.facts.windowMs) {
      const { lengthGuessed: _guessed, ...facts } = view.facts;
      view.facts = { ...facts, windowMs };
    }
  }

  /**
   * Takes a bound on the current window's reset another process learned (it sent the window's first
   * request): when it names the same reset as ours (less than a second before the whole-second
   * header) and is tighter than what this one knows.
   */
  protected adoptResetBound(spec: BudgetSpec, at: number): void {
    const view = this.view(spec);
    const { resetsAt, resetBound, windowMs } = view.facts;
    if (resetsAt === undefined || at >= resetsAt || at <= resetsAt - Math.min(1_000, windowMs)) return;
    if (resetBound === undefined || at < resetBound) view.facts = { ...view.facts, resetBound: at };
  }

  /** What this process knows of the budgets a request with these keys spends (for logs and tests). */
  budgets(keys: GovernorKeys): BudgetView[] {
    const plan = planFor(keys, this.options);
    return [plan.service, ...(plan.sourceSystem ? [plan.sourceSystem] : [])].map((spec) => this.view(spec));
  }

  protected view(spec: BudgetSpec): BudgetView {
    let v = this.views.get(spec.key);
    if (!v) {
      v = { spec, facts: spec.initial, inFlight: new Map(), appUse: emptyAppUse(), firstSeenAt: this.clock.now() };
      this.views.set(spec.key, v);
    }
    return v;
  }

  private semaphore(cap: CapSpec): Semaphore {
    let s = this.semaphores.get(cap.key);
    if (!s) {
      s = new Semaphore(cap.limit);
      this.semaphores.set(cap.key, s);
    }
    s.limit = cap.limit;
    return s;
  }
}

/**
 * Our requests with a slot before the window's reset that the reported `remaining` cannot include.
 * Counting one too many costs a window a request (the rest is spread thinner); one too few, a 429.
 */
function unseenBy(view: BudgetView, sentAt?: number): number {
  const before = view.facts.resetBound ?? view.facts.resetsAt ?? Number.POSITIVE_INFINITY;
  let n = 0;
  if (sentAt === undefined) {
    // Not knowing when the reporting request went, every other one in flight may be uncounted.
    for (const slot of view.inFlight.values()) if (slot < before) n++;
    return Math.max(0, n - 1);
  }
  // The upstream counted every request that reached it before the reporting one: only those sent
  // after it (or still waiting for their slot) are missing from its `remaining`.
  for (const slot of view.inFlight.values()) if (slot > sentAt && slot < before) n++;
  return n;
}
