// Which budgets and concurrency caps one request spends, from its governor keys and the options:
// the service window per (client, account), the source system's window per (account, source system),
// the account's concurrency cap and the source system's. Also matches a response's reported windows
// to those budgets.
import type { Logger } from '../../lib/logger.ts';
import type { GovernorKeys } from '../governor.ts';
import type { RateLimitReport, RateLimitWindow } from '../rate-limit-headers.ts';
import { knownProfile, type SourceSystemProfile } from '../source-systems/index.ts';
import { baseSpacing, defaultPacing, laneSpacing, type PacingOptions, type WindowFacts } from './pacing.ts';
import { defaultReserveRule, type ReserveRule } from './reserve.ts';

/** Time as the governor sees it; injected so tests run on a fake clock. */
export interface Clock {
  now(): number;
  sleep(ms: number, signal?: AbortSignal): Promise<void>;
}

export interface RateGovernorOptions {
  /** Brand prefix of the upstream's headers (`Svc`); names the service budget. */
  headerPrefix?: string;
  /**
   * Pace to first guesses (the service's 150 per 60 s, a profile's published rate) until the headers
   * say. Default true; false paces only to what the upstream reports (an upstream without limits).
   */
  assumeLimits?: boolean;
  /** First guess of the service window until its headers say (150 per 60 s, per the reference notes). */
  serviceLimit?: { total: number; windowMs?: number };
  /** Length of a source system's window (its headers give no length; "typically 60 seconds"). */
  sourceSystemWindowMs?: number;
  /** Concurrent requests per linked account (10, per the reference notes). */
  accountConcurrency?: number;
  /** Concurrency cap for a source system without a profile; none by default. */
  sourceSystemConcurrency?: number;
  /** A source system's profile by slug: its `concurrency` and first-guess `requestsPerMinute`. */
  profiles?: (slug: string) => SourceSystemProfile | undefined;
  /** Share of each window's budget to plan for (default 0.98). */
  utilization?: number;
  /** Extra wait after a reported reset, capped by what even pacing leaves free (default 1000 ms). */
  resetSlackMs?: number;
  /** A send slot is reserved at most this long before its time (default 1000 ms); see `Reservation`. */
  reserveHorizonMs?: number;
  /**
   * Most of each budget background requests may spend (MIRROR_SYNC_BUDGET_SHARE), in (0, 1]. Below 1
   * they also take a slot in the budget's background lane, paced `1 / share` times slower, so the
   * rest of each window stays free for interactive requests. `adaptive`: the rest (the application's
   * reserve) follows what interactive requests took in the budget's recent windows (see reserve.ts
   * and `reserveRule`). Default 1 (no lane).
   */
  syncShare?: number | 'adaptive';
  /** The numbers of the adaptive reserve (default `defaultReserveRule`). */
  reserveRule?: Partial<ReserveRule>;
  /**
   * An interactive request whose slot is further than this is refused at once (a 429 with what the
   * governor knows of the windows) instead of held (MIRROR_INTERACTIVE_MAX_WAIT_MS). Default 2000 ms.
   */
  interactiveMaxWaitMs?: number;
  /**
   * With a lane (share below 1), how far ahead a background request takes its slot: 25 ms with the
   * adaptive reserve, 0 with a fixed share (the defaults). Far ahead, background slots would make an
   * interactive request wait behind them; taken only once due, every slot was late by a timer's wake-up
   * and a round trip to the store, and the sync got 14-16 of the 17.25 a window its lane allows (bench
   * [10]: total use 0.85-0.94 of the window; 25 ms ahead, 0.95 with the application's added wait p99
   * under 30 ms of a 100 ms spacing). A fixed share is a hard cap, kept as it was measured: its slots
   * are taken once due (a slot taken ahead is not re-checked against a lane anchor that an answer sets
   * meanwhile; the adaptive reserve's margin absorbs such a request).
   */
  backgroundHorizonMs?: number;
  clock?: Clock;
  logger?: Logger;
}

export interface ResolvedOptions {
  prefix: string;
  serviceTotal: number | undefined;
  serviceWindowMs: number;
  sourceSystemWindowMs: number;
  /** No length was given: the 60 s is a guess until the headers teach the real one (see WindowFacts.lengthGuessed). */
  sourceSystemWindowGuessed: boolean;
  accountConcurrency: number;
  sourceSystemConcurrency: number | undefined;
  profiles: (slug: string) => SourceSystemProfile | undefined;
  pacing: PacingOptions;
  assumeLimits: boolean;
  reserveHorizonMs: number;
  /** A fixed share, or undefined for the adaptive reserve. */
  syncShare: number | undefined;
  reserveRule: ReserveRule;
  interactiveMaxWaitMs: number;
  backgroundHorizonMs: number;
}

export function resolveOptions(options: RateGovernorOptions): ResolvedOptions {
  const pacing: PacingOptions = {
    utilization: options.utilization ?? defaultPacing.utilization,
    resetSlackMs: options.resetSlackMs ?? defaultPacing.resetSlackMs,
  };
  if (!(pacing.utilization > 0 && pacing.utilization <= 1)) throw new RangeError('utilization must be in (0, 1]');
  const syncShare = options.syncShare === 'adaptive' ? undefined : (options.syncShare ?? 1);
  if (syncShare !== undefined && !(syncShare > 0 && syncShare <= 1)) throw new RangeError('syncShare must be in (0, 1]');
  const reserveRule = { ...defaultReserveRule, ...options.reserveRule };
  if (!(reserveRule.floor > 0 && reserveRule.floor <= reserveRule.ceiling && reserveRule.ceiling < 1 && reserveRule.windows >= 1 && reserveRule.windows < 8))
    throw new RangeError('reserveRule: 0 < floor <= ceiling < 1 and 1 <= windows < 8');
  return {
    prefix: (options.headerPrefix ?? 'Svc').toLowerCase(),
    serviceTotal: options.assumeLimits === false ? undefined : (options.serviceLimit?.total ?? 150),
    assumeLimits: options.assumeLimits !== false,
    serviceWindowMs: options.serviceLimit?.windowMs ?? 60_000,
    sourceSystemWindowMs: options.sourceSystemWindowMs ?? 60_000,
    sourceSystemWindowGuessed: options.sourceSystemWindowMs === undefined,
    accountConcurrency: options.accountConcurrency ?? 10,
    sourceSystemConcurrency: options.sourceSystemConcurrency,
    profiles: options.profiles ?? knownProfile,
    pacing,
    reserveHorizonMs: Math.max(0, options.reserveHorizonMs ?? 1_000),
    syncShare,
    reserveRule,
    interactiveMaxWaitMs: Math.max(0, options.interactiveMaxWaitMs ?? 2_000),
    backgroundHorizonMs: Math.max(0, options.backgroundHorizonMs ?? (syncShare === undefined ? 25 : 0)),
  };
}

/** One rate budget (a window) a request spends. */
export interface BudgetSpec {
  key: string;
  kind: 'service' | 'source-system';
  /** What is known before any response: the first guess. */
  initial: WindowFacts;
  /**
   * A budget's background lane (see `syncShare`): a schedule of its own, `share` of the window's
   * requests of the budget it belongs to (`of`), which background requests also take a slot in.
   */
  lane?: { of: string; share: number };
}

/** The background lane of a budget, for a sync share below 1. */
export function laneOf(spec: BudgetSpec, share: number): BudgetSpec {
  return { key: `${spec.key}|background`, kind: spec.kind, initial: spec.initial, lane: { of: spec.key, share } };
}

/**
 * The keys of the budgets whose lanes a request takes: their schedules count a background slot from
 * when it was due (reserveSlot's `fromDue` in pacing.ts).
 */
export function lanedKeys(budgets: readonly BudgetSpec[]): string[] {
  return budgets.flatMap((b) => (b.lane ? [b.lane.of] : []));
}

/** A schedule's spacing before any answer, from the first guesses. */
export function initialSpacing(spec: BudgetSpec, pacing: PacingOptions): number {
  return spec.lane ? laneSpacing(spec.initial, 0, spec.lane.share, pacing) : baseSpacing(spec.initial, pacing);
}

export interface CapSpec {
  key: string;
  limit: number;
}

interface Plan {
  service: BudgetSpec;
  sourceSystem?: BudgetSpec & { slug: string; profile?: SourceSystemProfile };
  /** In the order they are taken: the narrower (source system) first. */
  caps: CapSpec[];
}

export function planFor(keys: GovernorKeys, o: ResolvedOptions): Plan {
  const account = keys.account ?? '';
  if (keys.origin === 'storage') {
    // The storage is another host: its budget is whatever its answers report (none assumed), and an
    // API concurrency slot is not held while a file streams.
    return { service: { key: `${o.prefix}-storage:${keys.client}:${account}`, kind: 'service', initial: { windowMs: o.serviceWindowMs } }, caps: [] };
  }
  const service: BudgetSpec = {
    key: `${o.prefix}:${keys.client}:${account}`,
    kind: 'service',
    initial: { windowMs: o.serviceWindowMs, ...(o.serviceTotal !== undefined ? { total: o.serviceTotal } : {}) },
  };
  const caps: CapSpec[] = [];
  let sourceSystem: Plan['sourceSystem'];
  if (keys.sourceSystem) {
    const slug = keys.sourceSystem.toLowerCase();
    const profile = o.profiles(keys.sourceSystem) ?? o.profiles(slug);
    const key = `source:${account}:${slug}`;
    const rpm = o.assumeLimits ? profile?.requestsPerMinute : undefined;
    sourceSystem = {
      key,
      kind: 'source-system',
      slug,
      ...(profile ? { profile } : {}),
      initial: {
        windowMs: o.sourceSystemWindowMs,
        ...(o.sourceSystemWindowGuessed ? { lengthGuessed: true } : {}),
        ...(rpm !== undefined ? { total: Math.max(1, Math.floor((rpm * o.sourceSystemWindowMs) / 60_000)) } : {}),
      },
    };
    const limit = profile?.concurrency ?? o.sourceSystemConcurrency;
    if (limit !== undefined) caps.push({ key: `concurrency:${key}`, limit });
  }
  if (keys.account !== undefined) caps.push({ key: `concurrency:account:${account}`, limit: o.accountConcurrency });
  return { service, ...(sourceSystem ? { sourceSystem } : {}), caps };
}

function normalized(name: string): string {
  return name.toLowerCase().replace(/[^a-z0-9]/g, '');
}

/**
 * The reported window of the request's source system: the header named like its slug or its
 * profile's name (`SQLERP-RateLimit-*` for "SQL ERP"), else the only one reported.
 */
export function sourceSystemWindow(plan: Plan, report: RateLimitReport): RateLimitWindow | undefined {
  const spec = plan.sourceSystem;
  if (!spec) return undefined;
  const entries = Object.entries(report.sourceSystems);
  const names = new Set([normalized(spec.slug), ...(spec.profile ? [normalized(spec.profile.name), normalized(spec.profile.slug)] : [])]);
  const match = entries.find(([name]) => names.has(normalized(name)));
  if (match) return match[1];
  return entries.length === 1 ? entries[0]![1] : undefined;
}
