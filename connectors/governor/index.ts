// The rate-limit governor: even pacing of every budget a request spends, concurrency caps per account
// and per source system; in memory for one process, in Postgres for many.
export { PostgresRateGovernor } from './postgres-governor.ts';
