// Injected faults: what a real upstream does on a bad day. Each fault matches requests by method,
// path (prefix, or a regular expression written /like this/ or ^like this) and source system, and
// fires a number of times or with a probability.
import { randomUUID } from 'node:crypto';
import { z } from 'zod';
import { Rng } from '../data/random.ts';

const faultKinds = [
  'status',
  'rate-limit',
  'slow',
  'timeout',
  'reset',
  'truncated-json',
  'malformed-json',
  'lying-has-more',
  'repeat-page',
  // A cursor that does not move: the page answers as the page before it (its records), saying there is more.
  'stuck-page',
  // A hostile or broken upstream's bodies: far too big, a gzip bomb, a trickle that never ends,
  // pages that cycle (1, 2, 1, 2, ...) and full pages that never end (`has_more_results` null).
  'oversized-page',
  'gzip-bomb',
  'trickle',
  'alternating-pages',
  'endless-pages',
] as const;

export const faultSpecSchema = z.object({
  match: z
    .object({
      method: z.string().optional(),
      path: z.string().optional(),
      source_system: z.string().optional(),
    })
    .default({}),
  kind: z.enum(faultKinds),
  /** How many matching requests it hits; unlimited when absent. */
  times: z.number().int().positive().optional(),
  /** Chance to hit a matching request; 1 when absent. */
  probability: z.number().min(0).max(1).optional(),
  /** `status`: the status to answer (default 503). */
  status: z.number().int().min(400).max(599).optional(),
  /** `status` and `rate-limit`: seconds for Retry-After (and the reset header of rate-limit). */
  retry_after: z.number().int().nonnegative().optional(),
  /** `slow`: added latency (default 2000 ms). */
  delay_ms: z.number().int().nonnegative().optional(),
  /** `lying-has-more`: the value to report (default: the opposite of the truth). */
  has_more_results: z.union([z.boolean(), z.null()]).optional(),
  /**
   * `oversized-page`: bytes of the body sent (streamed, without a length); `gzip-bomb`: bytes the
   * gzip body inflates to. Default 256 MB.
   */
  bytes: z
    .number()
    .int()
    .positive()
    .max(4 * 1024 ** 3)
    .optional(),
  /** `trickle`: time between two bytes of a body that never ends (default 1000 ms). */
  interval_ms: z.number().int().positive().optional(),
});
type FaultSpec = z.infer<typeof faultSpecSchema>;

export interface Fault extends FaultSpec {
  id: string;
  hits: number;
}

export class FaultRegistry {
  private faults: Fault[] = [];
  private readonly rng: Rng;

  constructor(seed: number) {
    this.rng = new Rng(`faults|${seed}`);
  }

  add(spec: FaultSpec): Fault {
    const fault: Fault = { ...spec, id: randomUUID(), hits: 0 };
    this.faults.push(fault);
    return fault;
  }

  clear(): void {
    this.faults = [];
  }

  remove(id: string): boolean {
    const before = this.faults.length;
    this.faults = this.faults.filter((f) => f.id !== id);
    return this.faults.length < before;
  }

  list(): Fault[] {
    return this.faults.map((f) => ({ ...f }));
  }

  /**
   * The faults that fire for this request (each counted once). `sourceSystem` is undefined for
   * requests without an account: faults that name a source system skip them.
   */
  take(method: string, path: string, sourceSystem: string | undefined): Fault[] {
    if (this.faults.length === 0) return [];
    const fired: Fault[] = [];
    for (const f of this.faults) {
      if (!matches(f, method, path, sourceSystem)) continue;
      if (f.probability !== undefined && this.rng.next() >= f.probability) continue;
      f.hits++;
      fired.push(f);
    }
    this.faults = this.faults.filter((f) => f.times === undefined || f.hits < f.times);
    return fired;
  }
}

function matches(f: Fault, method: string, path: string, sourceSystem: string | undefined): boolean {
  const m = f.match;
  if (m.method && m.method.toUpperCase() !== method.toUpperCase()) return false;
  if (m.source_system && m.source_system !== sourceSystem) return false;
  if (m.path) {
    const p = m.path;
    if (p.length > 2 && p.startsWith('/') && p.endsWith('/')) {
      if (!new RegExp(p.slice(1, -1)).test(path)) return false;
    } else if (p.startsWith('^')) {
      if (!new RegExp(p).test(path)) return false;
    } else if (!path.startsWith(p)) return false;
  }
  return true;
}
