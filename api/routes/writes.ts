// Writes through the mirror: a create or update of a resource is forwarded to the upstream (with
// `Ignore-Prohibited-Fields` and the other contract headers), the upstream's answer is relayed as it
// came, and the object it returned is applied to the mirror at once, so a read right after the
// write sees it. Nothing is written to the mirror when the upstream refuses or fails; a write is
// never resent (it is not idempotent).
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { knownProfile, scopeKindIn } from '../../connectors/source-systems/index.ts';
import { NotFoundError } from '../../lib/errors.ts';
import { formatScope, resources, type ResourceDef } from '../../lib/resources.ts';
import { getObject } from '../../connectors/operations.ts';
import type { UpstreamClient } from '../../connectors/upstream-client.ts';
import type { AccountStore, AccountSummary } from '../../mirror/accounts.ts';
import type { Pool } from '../../mirror/pool.ts';
import { resolveId } from '../../mirror/records-read.ts';
import { applyObjects } from '../../mirror/records-store.ts';
import { header, type Authenticator } from '../auth.ts';
import { forward, jsonOf, refuseHostileTarget, type UpstreamTarget } from '../forward.ts';

export interface WriteRouteDeps {
  pool: Pool;
  auth: Authenticator;
  target: UpstreamTarget;
  headerPrefix: string;
  upstream: UpstreamClient;
  accounts: AccountStore;
}

/** A write's answer is one object (or, for budget line items, a one-item list): well under this. */
const maxAnswerBytes = 8 * 1024 * 1024;

/** The objects a write answered: the object itself, or the `data` of a list answer. */
export function objectsOf(body: unknown): Record<string, unknown>[] {
  const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);
  if (isObject(body) && Array.isArray(body.data)) return body.data.filter(isObject).filter((o) => typeof o.id === 'string');
  if (isObject(body) && typeof body.id === 'string') return [body];
  return [];
}

export function registerWriteRoutes(app: FastifyInstance, deps: WriteRouteDeps): void {
  const { pool, auth } = deps;

  /** Where the written object lives in the mirror; undefined when its project is not mirrored yet. */
  async function placeOf(request: FastifyRequest, account: AccountSummary, def: ResourceDef): Promise<{ scope: string; projectId?: string } | undefined> {
    const kind = scopeKindIn(knownProfile(account.sourceSystem), def.name, def.scope);
    if (kind !== 'project') return { scope: '' };
    const ref = header(request, 'project-id')?.trim();
    // The upstream answers a missing or unknown Project-Id itself; nothing to apply then.
    if (!ref || ref === '*') return undefined;
    const projectId = await resolveId(pool, account.id, 'projects', '', ref);
    return projectId ? { scope: formatScope([['project', projectId]]), projectId } : undefined;
  }

  /**
   * The written objects as the mirror keeps them: with their source data. An answer without it
   * (the caller did not ask) is completed by reading each object back; should that read fail, the
   * answer is applied as it is and the next pass completes it.
   */
  async function complete(account: AccountSummary, def: ResourceDef, place: { projectId?: string }, objects: Record<string, unknown>[]): Promise<Record<string, unknown>[]> {
    if (objects.every((o) => 'source_data' in o)) return objects;
    const accountToken = await deps.accounts.token(account.id);
    return Promise.all(
      objects.map(async (o) => {
        try {
          const res = await getObject(deps.upstream, {
            accountToken,
            accountId: account.id,
            sourceSystem: account.sourceSystem,
            path: `${def.path}/${encodeURIComponent(String(o.id))}`,
            ...(place.projectId ? { projectId: place.projectId } : {}),
            includeSourceData: true,
          });
          return res.body;
        } catch {
          return o;
        }
      }),
    );
  }

  const write = (def: ResourceDef) => async (request: FastifyRequest<{ Params: { id?: string } }>, reply: FastifyReply) => {
    const account = await auth.account(request);
    const place = await placeOf(request, account, def);
    return forward(request, reply, deps.target, {
      account,
      capture: {
        maxBytes: maxAnswerBytes,
        async onAnswer(status, body) {
          if (status < 200 || status >= 300) return;
          if (place === undefined) {
            void reply.header(`${deps.headerPrefix}-Warnings`, `The written ${def.name} is not applied to the mirror yet (its project is not mirrored); the next pass brings it.`);
            return;
          }
          const parsed = jsonOf(body);
          if (parsed === undefined) return;
          const objects = objectsOf(parsed);
          if (request.params.id && objects.length === 0) throw new NotFoundError(`The upstream answered the update of ${def.name} ${request.params.id} without the object.`);
          await applyObjects(pool, { accountId: account.id, resource: def.name, scope: place.scope }, await complete(account, def, place, objects));
        },
      },
    });
  };

  // A hostile id (dot segments, backslashes, encoded separators, ...) is refused before anything else,
  // async or not; forward() applies the whole path rule.
  const guarded = { onRequest: refuseHostileTarget };
  for (const def of resources) {
    if (def.scope === 'child') continue;
    app.post<{ Params: { id?: string } }>(def.path, guarded, write(def));
    app.patch<{ Params: { id?: string } }>(`${def.path}/:id`, guarded, write(def));
    app.put<{ Params: { id?: string } }>(`${def.path}/:id`, guarded, write(def));
  }
}
