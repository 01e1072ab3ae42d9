// Which project a request's `Project-Id` names, settled before anything is read, forwarded or started
// for it: a value of the wrong form is a 400; a project the account does not have is a 404. Without
// this, every new value named a scope never synced, and each such read started a sync of it.
import { getObject } from '../connectors/operations.ts';
import type { UpstreamClient } from '../connectors/upstream-client.ts';
import { BadRequestError, NotFoundError, UpstreamNotFoundError } from '../lib/errors.ts';
import type { AccountStore, AccountSummary } from '../mirror/control/accounts.ts';
import { idStanding } from '../mirror/streams/known-ids.ts';
import type { Pool } from '../mirror/db/pool.ts';

const uuid = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
/** Source ids are the source system's own (digits, 18-character CRM ids, job numbers with spaces). */
const maxSourceIdLength = 256;

/**
 * What is wrong with a `Project-Id` value (`*` aside, which the routes handle), or undefined: a
 * service UUID, or `source_id:` and the source system's id (no control characters, no `/` or `\`:
 * it goes into an upstream path).
 */
function projectRefProblem(ref: string): string | undefined {
  if (uuid.test(ref)) return undefined;
  const shown = JSON.stringify(ref.length > 60 ? `${ref.slice(0, 60)}...` : ref);
  const expected = "send a project's id (a UUID), source_id:<the source system's id>, or * where all projects are accepted";
  if (!ref.startsWith('source_id:')) return `Project-Id ${shown} is not a project id: ${expected}.`;
  const sourceId = ref.slice('source_id:'.length);
  if (sourceId.length === 0) return `Project-Id ${shown} names no source id: ${expected}.`;
  if (sourceId.length > maxSourceIdLength) return `Project-Id's source id is longer than ${maxSourceIdLength} characters: ${expected}.`;
  // eslint-disable-next-line no-control-regex
  if (/[\u0000-\u001f\u007f/\\]/.test(sourceId)) return `Project-Id ${shown} holds a control character, / or \\, which no source id has: ${expected}.`;
  return undefined;
}

interface ProjectIdsDeps {
  pool: Pool;
  /** Asked once per value (then cached) while the account's projects list is not mirrored yet. */
  upstream?: { client: UpstreamClient; accounts: AccountStore };
  /** How long an upstream lookup's answer, found or not, is kept. */
  ttlMs?: number;
}

/** Upstream lookups remembered at most (per process); past it, expired ones go, then all. */
const maxRemembered = 10_000;

export class ProjectIds {
  private readonly lookups = new Map<string, { until: number; found: Promise<string | undefined> }>();
  private readonly ttlMs: number;

  constructor(private readonly deps: ProjectIdsDeps) {
    this.ttlMs = deps.ttlMs ?? 30_000;
  }

  /**
   * The service id of the account's project named by `ref`. Once a pass over the account's projects
   * has completed, the mirror alone answers (a project created upstream since shows after the next
   * pass or its webhook); before that, the upstream is asked once per value, and its answer (found or
   * not) kept for a short while, so a stream of invented values costs one lookup each and no sync.
   * `pool` is the server the request reads from (a replica, or the primary by default).
   */
  async resolve(account: AccountSummary, ref: string, pool: Pool = this.deps.pool): Promise<string> {
    const problem = projectRefProblem(ref);
    if (problem) throw new BadRequestError(problem);
    const standing = await idStanding(pool, { accountId: account.id, resource: 'projects', scope: '', ref });
    if (standing.id) return standing.id;
    const found = standing.listSynced ? undefined : this.deps.upstream ? await this.lookup(account, ref) : uuid.test(ref) ? ref : undefined;
    if (!found) throw new NotFoundError(`No project ${ref} in this account.`);
    return found;
  }

  private lookup(account: AccountSummary, ref: string): Promise<string | undefined> {
    const key = `${account.id}\u0000${ref}`;
    const now = Date.now();
    const hit = this.lookups.get(key);
    if (hit && hit.until > now) return hit.found;
    if (this.lookups.size >= maxRemembered) {
      for (const [k, v] of this.lookups) if (v.until <= now) this.lookups.delete(k);
      if (this.lookups.size >= maxRemembered) this.lookups.clear();
    }
    // Concurrent requests naming the same value share this one lookup.
    const entry = { until: now + this.ttlMs, found: this.ask(account, ref) };
    this.lookups.set(key, entry);
    // A lookup that failed (the upstream down or rate limited) is no answer: the next request asks again.
    entry.found.catch(() => {
      if (this.lookups.get(key) === entry) this.lookups.delete(key);
    });
    return entry.found;
  }

  private async ask(account: AccountSummary, ref: string): Promise<string | undefined> {
    const upstream = this.deps.upstream!;
    const path = ref.startsWith('source_id:') ? `/projects/source_id:${encodeURIComponent(ref.slice('source_id:'.length))}` : `/projects/${ref}`;
    try {
      const res = await getObject(upstream.client, {
        accountToken: await upstream.accounts.token(account.id),
        accountId: account.id,
        sourceSystem: account.sourceSystem,
        path,
      });
      return uuid.test(res.body.id) ? res.body.id : undefined;
    } catch (error) {
      if (error instanceof UpstreamNotFoundError) return undefined;
      throw error;
    }
  }
}
