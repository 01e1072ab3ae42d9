// The operator's status page (`/status`, HTML that refreshes itself) and its data (`/status.json`):
// accounts, streams syncing now, freshness, rate budgets, recent errors, inbox and outbound-delivery
// backlog, with links into the Temporal UI. Behind the mirror's client credentials or OPERATOR_TOKEN.
import type { FastifyInstance, FastifySchema } from 'fastify';
import { z } from 'zod';
import { answer, errorAnswer, json, typedRoutes } from '../route-schema.ts';
import type { UpstreamClient } from '../../connectors/upstream-client.ts';
import type { Pool } from '../../mirror/db/pool.ts';
import type { ReadRouter } from '../../mirror/reads/read-router.ts';
import type { Authenticator } from '../auth.ts';
import type { SyncControl } from '../sync-control.ts';
import { operatorGuard } from '../status-page/auth.ts';
import { buildOverview } from '../status-page/overview.ts';
import { renderMain, renderPage } from '../status-page/page.ts';
import type { FreshnessSettings } from '../../mirror/streams/freshness.ts';

interface StatusRouteDeps {
  pool: Pool;
  /** This process's reads by server (shown when it has replicas). */
  router?: ReadRouter;
  auth: Authenticator;
  sync?: SyncControl;
  operator?: { token?: string; temporalUiUrl?: string; refreshMs?: number };
  /** This process's upstream client: its requests by class (sync, application) are shown. */
  upstream?: UpstreamClient;
  /** With them, the page shows each account's and resource's freshness against the target. */
  freshness?: FreshnessSettings;
}

export function registerStatusRoutes(fastify: FastifyInstance, deps: StatusRouteDeps): void {
  const app = typedRoutes(fastify);
  const preHandler = operatorGuard({ auth: deps.auth, token: deps.operator?.token });
  const upstreamUsage = deps.upstream && (() => deps.upstream!.usage());
  const overview = () =>
    buildOverview({
      pool: deps.pool,
      sync: deps.sync,
      temporalUiUrl: deps.operator?.temporalUiUrl,
      ...(upstreamUsage ? { upstreamUsage } : {}),
      ...(deps.freshness ? { freshness: deps.freshness } : {}),
      ...(deps.router?.hasReplicas ? { reads: () => deps.router!.status() } : {}),
    });

  const statusPage = {
    summary: 'Status page (HTML)',
    description:
      'Accounts, streams syncing now, freshness, rate budgets, recent errors, inbox and delivery backlog, links into the Temporal UI. `?fragment=1` answers only the main part (the page refreshes itself with it).',
    tags: ['operator'],
    access: 'operator',
    querystring: z.looseObject({ fragment: z.string().optional().describe('Any value: only the main part of the page.') }),
    response: { 200: answer('HTML', 'text/html'), 401: errorAnswer('No operator credentials.') },
  } satisfies FastifySchema;
  app.get('/status', { preHandler, schema: statusPage }, async (request, reply) => {
    const o = await overview();
    void reply.header('cache-control', 'no-store').type('text/html; charset=utf-8');
    return reply.send(request.query.fragment ? renderMain(o) : renderPage(o, { refreshMs: deps.operator?.refreshMs }));
  });

  const statusJson = {
    summary: 'What the status page shows, as JSON',
    tags: ['operator'],
    access: 'operator',
    response: { 200: json('The overview.', z.looseObject({})) },
  } satisfies FastifySchema;
  app.get('/status.json', { preHandler, schema: statusJson }, async (_request, reply) => {
    void reply.header('cache-control', 'no-store');
    return reply.send(await overview());
  });
}
