// Request counters for tests: requests, 429s and peak concurrency per linked account and per
// source system, so a test can prove a client respected the limits.

interface Counter {
  requests: number;
  rate_limited: number;
  errors: number;
  in_flight: number;
  peak_in_flight: number;
}

function counter(): Counter {
  return { requests: 0, rate_limited: 0, errors: 0, in_flight: 0, peak_in_flight: 0 };
}

interface AccountLabel {
  id: string;
  referenceId: string;
  slug: string;
}

export class Stats {
  private readonly accounts = new Map<string, Counter & { reference_id: string; source_system: string; by_path: Record<string, number> }>();
  private readonly systems = new Map<string, Counter>();
  private readonly total = counter();

  private forAccount(a: AccountLabel) {
    let c = this.accounts.get(a.id);
    if (!c) {
      c = { ...counter(), reference_id: a.referenceId, source_system: a.slug, by_path: {} };
      this.accounts.set(a.id, c);
    }
    let s = this.systems.get(a.slug);
    if (!s) {
      s = counter();
      this.systems.set(a.slug, s);
    }
    return [c, s] as const;
  }

  started(a: AccountLabel | undefined, route: string): void {
    this.total.requests++;
    if (!a) return;
    const [c, s] = this.forAccount(a);
    for (const x of [c, s]) {
      x.requests++;
      x.in_flight++;
      x.peak_in_flight = Math.max(x.peak_in_flight, x.in_flight);
    }
    c.by_path[route] = (c.by_path[route] ?? 0) + 1;
  }

  finished(a: AccountLabel | undefined, status: number): void {
    const targets: Counter[] = [this.total];
    if (a) targets.push(...this.forAccount(a));
    for (const x of targets) {
      if (a && x !== this.total) x.in_flight = Math.max(0, x.in_flight - 1);
      if (status === 429) x.rate_limited++;
      else if (status >= 500) x.errors++;
    }
  }

  reset(): void {
    this.accounts.clear();
    this.systems.clear();
    Object.assign(this.total, counter());
  }

  snapshot() {
    return {
      total: { requests: this.total.requests, rate_limited: this.total.rate_limited, errors: this.total.errors },
      accounts: Object.fromEntries(this.accounts),
      source_systems: Object.fromEntries(this.systems),
    };
  }
}
