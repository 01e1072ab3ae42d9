// The rate-limit governor: even pacing of every budget a request spends, concurrency caps per account
// and per source system; in memory for one process, in Postgres for many.
export { MemoryRateGovernor } from './memory-governor.ts';
export { PostgresRateGovernor, type PostgresRateGovernorOptions } from './postgres-governor.ts';
export { RateGovernor, systemClock, type BudgetView } from './rate-governor.ts';
export type { Clock, RateGovernorOptions } from './budgets.ts';
export { defaultPacing, paceFor, reserveSlot, type Pace, type PacingOptions, type Schedule, type WindowFacts } from './pacing.ts';
