// Churn mode: a steady stream of creates, updates and deletes on one account, so incremental sync,
// webhooks and reconciliation can be watched under change.
import { asText } from '../data/as-text.ts';
import { randomUUID } from 'node:crypto';
import { z } from 'zod';
import type { LinkedAccount } from '../auth-and-link/accounts.ts';
import type { Logger } from '../../lib/logger.ts';
import { contractResourceNames, isTopLevel, type TopLevelResource } from '../data/catalog.ts';
import type { Scope } from '../data/dataset.ts';
import { Rng } from '../data/random.ts';
import { applyChange, type ChangeContext } from './changes.ts';

/** What churn needs of the sandbox (context.ts builds the runner, so this module does not import it). */
interface ChurnContext extends ChangeContext {
  options: { seed: number };
  logger: Logger | undefined;
}

export const churnSchema = z.object({
  account_token: z.string().min(1),
  per_second: z.number().positive().max(1000).default(5),
  seconds: z.number().positive().max(86_400).default(60),
  /**
   * Restrict churn to these resources (top-level, any the source system serves). Default: every
   * resource of the contract the source system serves. The real service's other resources churn only
   * when named, so a run that names none changes exactly what it changed before they were added.
   */
  resources: z.array(z.string()).optional(),
  /** Relative weights of create / update / delete. */
  mix: z
    .object({ create: z.number().nonnegative(), update: z.number().nonnegative(), delete: z.number().nonnegative() })
    .default({ create: 1, update: 6, delete: 1 }),
});
type ChurnRequest = z.infer<typeof churnSchema>;

interface Churn {
  id: string;
  timer: NodeJS.Timeout;
  stopAt: number;
  changes: number;
}

export class ChurnRunner {
  private readonly runs = new Map<string, Churn>();
  private n = 0;

  start(ctx: ChurnContext, account: LinkedAccount, req: ChurnRequest): { id: string; resources: string[] } {
    const resources = (req.resources ?? Object.keys(account.profile.resources).filter((r) => contractResourceNames.has(r))).filter(
      (r): r is TopLevelResource => isTopLevel(r) && account.profile.resources[r] !== undefined,
    );
    const rng = new Rng(`churn|${ctx.options.seed}|${account.key}|${++this.n}`);
    const id = randomUUID();
    const intervalMs = Math.max(1, Math.round(1000 / req.per_second));
    const churn: Churn = {
      id,
      stopAt: Date.now() + req.seconds * 1000,
      changes: 0,
      timer: setInterval(() => {
        if (Date.now() >= churn.stopAt || resources.length === 0) return this.stop(id);
        try {
          this.step(ctx, account, rng, resources, req.mix);
          churn.changes++;
        } catch (error) {
          ctx.logger?.warn({ err: (error as Error).message }, 'churn step failed');
        }
      }, intervalMs),
    };
    churn.timer.unref();
    this.runs.set(id, churn);
    return { id, resources };
  }

  private step(ctx: ChurnContext, account: LinkedAccount, rng: Rng, resources: TopLevelResource[], mix: ChurnRequest['mix']): void {
    const d = ctx.dataset;
    const resource = rng.pick(resources);
    const base: Scope = { company: 0, project: null, parent: null };
    let scope = base;
    if (account.profile.resources[resource]?.scope === 'project') {
      const projects = d.all(account, 'projects', base);
      if (projects.length === 0) return;
      scope = { ...base, project: d.find(account, 'projects', base, String(rng.pick(projects).id)) };
    }
    const total = mix.create + mix.update + mix.delete || 1;
    const roll = rng.next() * total;
    const n = d.count(account, resource, scope);
    const page = d.list(account, resource, [scope], { offset: rng.int(0, Math.max(0, n - 1)), limit: 1 }).items[0];
    if (roll < mix.create || !page) {
      applyChange(ctx, account, resource, scope, { op: 'create', object: { name: `Churn record ${++this.n}`, status: 'Active' } });
    } else if (roll < mix.create + mix.update) {
      const field = 'name' in page ? 'name' : 'description' in page ? 'description' : 'status';
      applyChange(ctx, account, resource, scope, {
        op: 'update',
        id: String(page.id),
        patch: { [field]: `${asText(page[field]).replace(/ \(rev \d+\)$/, '')} (rev ${++this.n})` },
      });
    } else {
      applyChange(ctx, account, resource, scope, { op: 'delete', id: String(page.id) });
    }
  }

  stop(id: string): boolean {
    const c = this.runs.get(id);
    if (!c) return false;
    clearInterval(c.timer);
    this.runs.delete(id);
    return true;
  }

  stopAll(): void {
    for (const id of [...this.runs.keys()]) this.stop(id);
  }

  list() {
    return [...this.runs.values()].map((c) => ({ id: c.id, changes: c.changes, stops_at: new Date(c.stopAt).toISOString() }));
  }
}
