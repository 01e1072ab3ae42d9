// The freshness scheduler's rule, without I/O: which of an account's polled lists an incremental pass
// visits, given when each was last verified, the changes the mirror saw in it, and the visits the
// polling budget allows. Lists are visited at rates proportional to the square root of their change
// rates (the schedule with the lowest mean staleness under a fixed visit budget), with a floor: every
// list at least once per twice the cycle the budget allows (lists / visits a minute), so a list that
// never changes is never starved. Lists an event named come first, then lists that would pass the floor
// before the next pass, then the most overdue by their own interval; budget left over goes to lists
// still learning their rate. A list's rate is learned from its polls, weighed against how the rates of
// its resource's lists are spread and how active its project's other lists are. Lists the upstream's
// webhooks cover are visited at the floor only.

/** How long the changes the mirror saw keep their weight: a change a day old counts e^-1 as much. */
export const rateMemoryMs = 24 * 3_600_000;

/**
 * The estimate's prior: a list never seen changing is assumed to change about once a day, with the
 * weight of a fifth of a day's observation, so the first few polls do not decide alone.
 */
const priorChanges = 0.2;
const priorMs = 0.2 * 24 * 3_600_000;

/** What the mirror saw of a list's changes: weights decayed by {@link rateMemoryMs}. */
export interface ChangeHistory {
  /** Changes seen (records changed by a poll), decayed. */
  changes: number;
  /** Time observed (the polls' intervals), decayed, in milliseconds. */
  observedMs: number;
}

export const emptyHistory: Readonly<ChangeHistory> = { changes: 0, observedMs: 0 };

/** The history after a poll that covered `intervalMs` since the one before and found `changes` records changed. */
export function observe(h: ChangeHistory, intervalMs: number, changes: number): ChangeHistory {
  const interval = Math.max(0, intervalMs);
  const decay = Math.exp(-interval / rateMemoryMs);
  return { changes: h.changes * decay + Math.max(0, changes), observedMs: h.observedMs * decay + interval };
}

/** Changes a millisecond the history says the list sees. */
export function changeRate(h: ChangeHistory): number {
  return (h.changes + priorChanges) / (h.observedMs + priorMs);
}

/** A list's history with what it shares with other lists: its resource and its project. */
interface ListHistory extends ChangeHistory {
  resource: string;
  project: string;
}

/**
 * The rates a list may have, from which the lists' distribution of rates is learned: none at all, and
 * 40 rates evenly spaced on a log scale from once in a thousand days to a hundred times a day.
 */
const rateGrid: readonly number[] = [0, ...Array.from({ length: 40 }, (_, k) => Math.pow(10, -3 + (5 * k) / 39) / (24 * 3_600_000))];
const logGrid: readonly number[] = rateGrid.map((r) => Math.log(r * 24 * 3_600_000));

/**
 * The fit of how the rates are spread takes this many rounds at most (a round takes about a millisecond
 * for 5,000 lists, and the estimates barely move after the first few dozen), and ends sooner once a round
 * adds less than {@link fitTolerance} to the lists' mean log-likelihood (it has converged).
 */
const fitRounds = 40;
const fitTolerance = 1e-4;

/**
 * Each list's change rate: what its own history says, weighed against the rates lists like it have (an
 * empirical prior, learned instead of fixed). From the histories of a resource's lists the rule learns
 * how their rates are spread: what share of the lists changes at each rate of {@link rateGrid}, the
 * shares under which the changes seen are the most likely, no shape assumed (statisticians call this
 * the nonparametric maximum-likelihood mixture, after Kiefer and Wolfowitz). A list's rate is then its
 * expected rate given its own history and that spread: a list that changed often has a high rate, one
 * observed long without a change a low one, and one not observed yet the mean of its resource's lists.
 * A project whose other lists change more than their resources' pooled rates expect makes its lists'
 * rates higher by as much (and a quiet one lower): the spread is that of the rates a project of usual
 * activity would have, each list's time observed counted times its project's activity. Before anything
 * of a resource was observed its rate is the fixed prior's ({@link changeRate}), times the activity.
 */
export function learnedRates(lists: readonly ListHistory[]): number[] {
  const activity = projectActivity(lists);
  const rates = new Array<number>(lists.length).fill(0);
  const byResource = new Map<string, { observed: number[]; unobserved: number[] }>();
  lists.forEach((l, i) => {
    const members = byResource.get(l.resource) ?? { observed: [], unobserved: [] };
    (l.observedMs > 0 || l.changes > 0 ? members.observed : members.unobserved).push(i);
    byResource.set(l.resource, members);
  });
  for (const { observed, unobserved } of byResource.values()) {
    const fit =
      observed.length === 0
        ? { rates: [], mean: changeRate(emptyHistory) }
        : expectedRates(
            observed.map((i) => lists[i]!.changes),
            observed.map((i) => activity[i]! * lists[i]!.observedMs),
          );
    observed.forEach((i, at) => (rates[i] = activity[i]! * fit.rates[at]!));
    for (const i of unobserved) rates[i] = activity[i]! * fit.mean;
  }
  return rates;
}

/**
 * How active each list's project is by its other lists: the changes they saw against those their
 * resources' pooled rates expected, with the weight of one expected change on either side (1 where the
 * project has no other list observed).
 */
function projectActivity(lists: readonly ListHistory[]): number[] {
  const byResource = new Map<string, { changes: number; observedMs: number }>();
  for (const l of lists) {
    const p = byResource.get(l.resource) ?? { changes: 0, observedMs: 0 };
    p.changes += l.changes;
    p.observedMs += l.observedMs;
    byResource.set(l.resource, p);
  }
  const pooled = (resource: string) => changeRate(byResource.get(resource) ?? emptyHistory);
  const byProject = new Map<string, { seen: number; expected: number }>();
  for (const l of lists) {
    const p = byProject.get(l.project) ?? { seen: 0, expected: 0 };
    p.seen += l.changes;
    p.expected += pooled(l.resource) * l.observedMs;
    byProject.set(l.project, p);
  }
  return lists.map((l) => {
    const p = byProject.get(l.project)!;
    return Math.max(0, (p.seen - l.changes + 1) / (p.expected - pooled(l.resource) * l.observedMs + 1));
  });
}

/**
 * Given lists' changes seen and times observed, each list's expected rate under its own history and how
 * the lists' rates are spread over {@link rateGrid} ({@link fitWeights}), and the spread's mean (the rate
 * of a list not observed). A list seeing `c` changes in `t` is as likely under rate r as r^c e^(-r t):
 * only a list that saw none may have none. The likelihoods are computed once, scaled to at most 1 a list.
 */
function expectedRates(changes: readonly number[], times: readonly number[]): { rates: number[]; mean: number } {
  const n = changes.length;
  const k = rateGrid.length;
  const like = new Float64Array(n * k);
  for (let i = 0; i < n; i++) {
    const c = changes[i]!;
    const t = times[i]!;
    let top = -Infinity;
    for (let j = 0; j < k; j++) {
      const r = rateGrid[j]!;
      const log = r === 0 ? (c > 0 ? -Infinity : 0) : c * logGrid[j]! - r * t;
      like[i * k + j] = log;
      top = Math.max(top, log);
    }
    for (let j = 0; j < k; j++) like[i * k + j] = Math.exp(like[i * k + j]! - top);
  }
  const weights = fitWeights(like, n, k);
  // A list whose likely rates all lost their weight (too far from every other list's) has its own.
  const rates = new Array<number>(n);
  for (let i = 0; i < n; i++) {
    let [sum, rate, own, ownRate] = [0, 0, 0, 0];
    for (let j = 0; j < k; j++) {
      const p = weights[j]! * like[i * k + j]!;
      sum += p;
      rate += p * rateGrid[j]!;
      own += like[i * k + j]!;
      ownRate += like[i * k + j]! * rateGrid[j]!;
    }
    rates[i] = sum > 0 ? rate / sum : ownRate / own;
  }
  const mean = rateGrid.reduce((a, r, j) => a + r * weights[j]!, 0);
  return { rates, mean };
}

/**
 * The weights of the rates (`k` of them) under which `n` lists' likelihoods (`like`, a row a list) are
 * the most likely, by expectation-maximisation: from equal weights, each round a rate's weight becomes
 * the mean over the lists of the chance it is theirs under the weights before (each round makes the
 * changes seen more likely). A rate whose weight fell under a billionth is left out of later rounds (it
 * could not come back by much), and the fit ends when a round adds less than {@link fitTolerance} to
 * the lists' mean log-likelihood, or after {@link fitRounds} rounds.
 */
function fitWeights(like: Float64Array, n: number, k: number): Float64Array {
  const weights = new Float64Array(k).fill(1 / k);
  // The rates still in the fit.
  let active = Int32Array.from({ length: k }, (_, j) => j);
  let last = -Infinity;
  for (let round = 0; round < fitRounds; round++) {
    const m = active.length;
    const next = new Float64Array(k);
    let logLikelihood = 0;
    for (let i = 0, row = 0; i < n; i++, row += k) {
      let sum = 0;
      for (let a = 0; a < m; a++) sum += weights[active[a]!]! * like[row + active[a]!]!;
      if (!(sum > 0)) continue;
      logLikelihood += Math.log(sum);
      const share = 1 / sum;
      for (let a = 0; a < m; a++) next[active[a]!]! += like[row + active[a]!]! * share;
    }
    for (const j of active) weights[j] = (next[j]! * weights[j]!) / n;
    for (const j of active) if (weights[j]! < 1e-9) weights[j] = 0;
    active = active.filter((j) => weights[j]! > 0);
    if (logLikelihood / n - last < fitTolerance) break;
    last = logLikelihood / n;
  }
  return weights;
}

export interface PlanList {
  key: string;
  /** Milliseconds since the list was last verified. */
  stalenessMs: number;
  /** Estimated changes a millisecond ({@link changeRate}). */
  rate: number;
  /** An event named the list since its last visit. */
  event?: boolean;
  /** Time the list's history covers ({@link ChangeHistory} `observedMs`); unset: taken as learned. */
  observedMs?: number;
  /**
   * The upstream's webhooks bring the list's changes: it is visited at the floor only (a webhook may be
   * lost), and the budget its visits leave goes to the lists only polling keeps fresh.
   */
  covered?: boolean;
}

interface PlanInput {
  lists: readonly PlanList[];
  /** Visits a minute the polling budget allows for these lists. */
  visitsPerMinute: number;
  /** The time between two incremental passes. */
  passMs: number;
}

interface PlannedList {
  key: string;
  visit: boolean;
  /**
   * Why: `event`, `floor` (would pass the floor before the next pass), `due` (by its interval), `learning`
   * (budget left over, its rate still mostly the prior's), `deferred`.
   */
  why: 'event' | 'floor' | 'due' | 'learning' | 'deferred';
  /** The interval between visits the schedule aims at for this list. */
  intervalMs: number;
}

export interface FreshnessPlan {
  lists: PlannedList[];
  /** Visits this pass may make (the budget for one pass). */
  budget: number;
  /** Lists / visits a minute: every list visited in turn, once each per this time. */
  cycleMs: number;
  /** The longest interval the schedule lets a list go unvisited: twice the cycle. */
  floorMs: number;
}

/**
 * Visit rates (per millisecond) proportional to the square root of each rate, none below `floor`, adding
 * up to `total` (water-filling: the lists whose share would fall under the floor get the floor, the rest
 * share what is left by their square roots). Where no list changes, every list gets an equal share.
 */
export function sqrtRates(rates: readonly number[], total: number, floor: number): number[] {
  const roots = rates.map((r) => Math.sqrt(Math.max(0, r)));
  const n = rates.length;
  if (n === 0) return [];
  if (floor * n >= total || roots.every((r) => r === 0)) return rates.map(() => total / n);
  // The lists at the floor are those with the smallest roots: try k of them, for k from 0 up.
  const order = roots.map((_, i) => i).sort((a, b) => roots[a]! - roots[b]!);
  const position = new Array<number>(n);
  order.forEach((i, at) => (position[i] = at));
  let rootSum = roots.reduce((a, b) => a + b, 0);
  for (let k = 0; k < n; k++) {
    const scale = (total - k * floor) / rootSum;
    if (roots[order[k]!]! * scale >= floor) return roots.map((r, i) => (position[i]! < k ? floor : r * scale));
    rootSum -= roots[order[k]!]!;
    if (rootSum <= 0) break;
  }
  return rates.map(() => total / n);
}

/**
 * A list observed for less than this is still learning its rate: budget its interval leaves unspent
 * visits it (after a full pass every list is, so the first hours are spent finding out which lists
 * change instead of waiting a whole cycle for the first intervals to come round).
 */
export const learningMs = rateMemoryMs / 3;

/**
 * Which lists this pass visits. The budget is the visits a minute times the pass period (at least one);
 * lists an event named and lists that would otherwise pass the floor by the next pass are visited even
 * past it (the floor is the promise; it takes at most half the budget when the lists are spread out).
 */
export function planVisits(input: PlanInput): FreshnessPlan {
  const n = input.lists.length;
  const perMs = Math.max(1e-12, input.visitsPerMinute / 60_000);
  const cycleMs = n / perMs;
  const floorMs = 2 * cycleMs;
  const budget = Math.max(1, Math.round(perMs * input.passMs));
  // Lists the webhooks cover take the floor's visits; the polled lists share the rest by their rates.
  const polled = input.lists.filter((l) => !l.covered);
  const shared = sqrtRates(
    polled.map((l) => l.rate),
    perMs - (n - polled.length) / floorMs,
    1 / floorMs,
  );
  const interval = new Map(polled.map((l, i) => [l.key, 1 / shared[i]!]));
  const scored = input.lists.map((l) => {
    const intervalMs = interval.get(l.key) ?? floorMs;
    const rank = l.event && !l.covered ? 0 : l.stalenessMs + input.passMs >= floorMs ? 1 : 2;
    return { l, intervalMs, rank, score: l.stalenessMs / intervalMs };
  });
  const order = [...scored].sort((a, b) => a.rank - b.rank || b.score - a.score || b.l.stalenessMs - a.l.stalenessMs || (a.l.key < b.l.key ? -1 : 1));
  const out = new Map<string, PlannedList>();
  let spent = 0;
  for (const s of order) {
    const must = s.rank < 2;
    // By the budget, only a list its interval brings round by the middle of the next period, or one still
    // learning its rate and not verified within the period: a list verified moments ago is not asked again.
    // A list the webhooks cover is visited at the floor only.
    const due = !s.l.covered && s.l.stalenessMs + input.passMs / 2 >= s.intervalMs;
    const learning = !s.l.covered && s.l.observedMs !== undefined && s.l.observedMs < learningMs && s.l.stalenessMs >= input.passMs;
    const visit = must || (spent < budget && (due || learning));
    if (visit) spent++;
    const why = !visit ? 'deferred' : s.rank === 0 ? 'event' : s.rank === 1 ? 'floor' : due ? 'due' : 'learning';
    out.set(s.l.key, { key: s.l.key, visit, why, intervalMs: s.intervalMs });
  }
  return { lists: input.lists.map((l) => out.get(l.key)!), budget, cycleMs, floorMs };
}

interface TargetReport {
  targetMs: number;
  /** Lists whose planned interval is longer than the target (each may then be that stale). */
  missing: string[];
  /** Visits a minute that would keep every list within the target (each at least once per target, in whole passes). */
  visitsPerMinuteNeeded: number;
  met: boolean;
}

/**
 * Whether the plan keeps every list within the target: a list is verified at least once per its
 * planned interval, so one whose interval is longer than the target misses it. Visiting every list once
 * per target is what meets it: lists / target visits a minute (no schedule meets it with fewer).
 */
export function targetReport(plan: FreshnessPlan, targetMs: number, passMs: number): TargetReport {
  // Lists are visited at passes: a list's longest wait is its interval rounded up to whole passes.
  const passes = (ms: number) => Math.max(1, Math.ceil(ms / passMs - 1e-9)) * passMs;
  const missing = plan.lists.filter((l) => passes(Math.min(l.intervalMs, plan.floorMs)) > targetMs).map((l) => l.key);
  // Every list once per the longest whole number of passes within the target (a target shorter than
  // a pass cannot be met by passes: every list at every pass is then what comes closest).
  const within = Math.max(1, Math.floor(targetMs / passMs + 1e-9)) * passMs;
  return { targetMs, missing, visitsPerMinuteNeeded: (plan.lists.length * 60_000) / within, met: missing.length === 0 };
}
