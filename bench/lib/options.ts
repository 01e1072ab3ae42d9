// The options of `npm run bench` (`mirror bench --help`): sizes, rounds, which scenarios (`--only`).
import { manyProjectsOptions, type ManyProjectsOptions } from '../scenarios/many-projects.ts';

export interface BenchOptions {
  quick: boolean;
  records: number;
  scale: number[];
  only: Set<number> | undefined;
  save: boolean;
  readSeconds: number;
  warmupSeconds: number;
  rounds: number;
  connections: number;
  webhookPerSecond: number;
  webhookSeconds: number;
  pageSamples: number;
  rateWindowMs: number;
  rateLimit: number;
  rateWindows: number;
  rateRecords: number;
  manyProjects: ManyProjectsOptions;
}

function parseList(text: string, what: string): number[] {
  const out = text.split(',').map((s) => Number(s.trim().replace(/_/g, '').replace(/k$/i, '000').replace(/m$/i, '000000')));
  if (out.some((n) => !Number.isInteger(n) || n <= 0)) throw new Error(`${what}: expected positive whole numbers separated by commas, got "${text}"`);
  return out;
}

export function benchOptions(v: Record<string, string | boolean | undefined>): BenchOptions {
  const quick = Boolean(v.quick);
  const records = typeof v.records === 'string' ? parseList(v.records, '--records')[0]! : quick ? 20_000 : 200_000;
  const scale = typeof v.scale === 'string' ? parseList(v.scale, '--scale') : quick ? [5_000, 20_000, 100_000] : [50_000, 200_000, 1_000_000];
  const only = typeof v.only === 'string' ? new Set(parseList(v.only, '--only')) : undefined;
  const num = (key: string, fallback: number) => (typeof v[key] === 'string' ? parseList(v[key], `--${key}`)[0]! : fallback);
  return {
    quick,
    records,
    scale,
    only,
    save: Boolean(v.save),
    readSeconds: quick ? 3 : 10,
    warmupSeconds: quick ? 1 : 2,
    rounds: quick ? 1 : 3,
    connections: 10,
    webhookPerSecond: 100,
    webhookSeconds: quick ? 3 : 10,
    pageSamples: quick ? 30 : 100,
    rateWindowMs: num('rate-window-ms', 2_000),
    rateLimit: num('rate-limit', 20),
    rateWindows: quick ? 10 : 14,
    rateRecords: quick ? 10_000 : 20_000,
    manyProjects: manyProjectsOptions(
      quick,
      typeof v.projects === 'string' ? num('projects', 0) : undefined,
      typeof v.invoices === 'string' ? num('invoices', 0) : undefined,
    ),
  };
}
