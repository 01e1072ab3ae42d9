// The governor for one process: schedules in memory, same pacing and caps as the Postgres one. For a
// single worker, the sandbox's own tools and tests.
import { initialSpacing, lanedKeys, type BudgetSpec, type RateGovernorOptions } from './budgets.ts';
import { reserveSlot, resetEdge, type Pace, type Schedule } from './pacing.ts';
import { countAppUse, windowIndex } from './reserve.ts';
import { RateGovernor, type BudgetView, type ReserveRequest, type Reservation } from './rate-governor.ts';

export class MemoryRateGovernor extends RateGovernor {
  private readonly schedules = new Map<string, Schedule>();

  constructor(options: RateGovernorOptions = {}) {
    super(options);
  }

  /** A budget's schedule, for inspection. */
  schedule(key: string): Schedule | undefined {
    const s = this.schedules.get(key);
    return s && { ...s };
  }

  protected reserve(budgets: readonly BudgetSpec[], request: ReserveRequest): Promise<Reservation> {
    const { horizonMs } = request;
    const now = this.clock.now();
    const laned = new Set(lanedKeys(budgets));
    const current = budgets.map((b) => this.withEdge(b, this.scheduleOf(b)));
    const { at, schedules } = reserveSlot(
      current,
      now,
      request.early,
      budgets.map((b) => laned.has(b.key)),
    );
    const nextInMs = new Map<string, number>();
    if (at - now > horizonMs) {
      for (const [i, b] of budgets.entries()) nextInMs.set(b.key, current[i]!.nextAt - now);
      return Promise.resolve({ waitMs: at - now, nextInMs, reserved: false });
    }
    budgets.forEach((b, i) => {
      const s = schedules[i]!;
      this.schedules.set(b.key, s);
      nextInMs.set(b.key, s.nextAt - now);
      if (request.interactive && !b.lane) {
        const view = this.view(b);
        view.appUse = countAppUse(view.appUse, windowIndex(at, view.facts.windowMs));
      }
    });
    return Promise.resolve({ waitMs: at - now, nextInMs, reserved: true });
  }

  protected applyPace(view: BudgetView, pace: Pace): void {
    const s = this.scheduleOf(view.spec);
    s.spacingMs = pace.spacingMs;
    if (pace.blockedUntil !== undefined) s.blockedUntil = Math.max(s.blockedUntil ?? 0, pace.blockedUntil);
    if (pace.left !== undefined) s.left = pace.left;
    else delete s.left;
    if (pace.anchor !== undefined) {
      s.nextAt = Math.max(s.nextAt, pace.anchor.notBefore);
      view.nextAt = s.nextAt;
    }
  }

  /**
   * A lane's schedule with its budget's reset interval, as last reported (see Schedule.edge); a
   * budget's with its reset's latest bound (see Schedule.resetAt).
   */
  private withEdge(spec: BudgetSpec, s: Schedule): Schedule {
    const { edge: _old, resetAt: _reset, ...rest } = s;
    const facts = this.view(spec).facts;
    if (!spec.lane) {
      const resetAt = facts.resetBound ?? facts.resetsAt;
      return resetAt !== undefined ? { ...rest, resetAt } : rest;
    }
    const edge = resetEdge(facts);
    return edge ? { ...rest, edge } : rest;
  }

  private scheduleOf(spec: BudgetSpec): Schedule {
    let s = this.schedules.get(spec.key);
    if (!s) {
      s = { nextAt: Number.NEGATIVE_INFINITY, spacingMs: initialSpacing(spec, this.options.pacing), ...(spec.lane ? { banks: true } : {}) };
      this.schedules.set(spec.key, s);
    }
    return s;
  }
}
