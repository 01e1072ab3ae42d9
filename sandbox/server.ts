// The sandbox: a faithful, deterministic stand-in for the unified API. `buildSandboxApp` builds the
// Fastify app (for inject), `startSandbox` listens. Route modules are registered explicitly, one
// per part of the contract.
import { randomBytes, randomUUID } from 'node:crypto';
import Fastify, { LogController, type FastifyInstance } from 'fastify';
import { createLogger } from '../lib/logger.ts';
import { registerAdminRoutes } from './admin/routes.ts';
import { registerAsyncRoutes } from './async/routes.ts';
import { registerLinkPage } from './auth-and-link/link-page.ts';
import { registerLinkRoutes } from './auth-and-link/link-routes.ts';
import { createContext, setBaseUrl, type SandboxContext } from './context.ts';
import { installErrorHandlers } from './http/errors.ts';
import { installPipeline } from './http/pipeline.ts';
import { resolveOptions, type SandboxOptions } from './options.ts';
import { registerBodyParsers } from './pass-through/body-parsers.ts';
import { registerPassthroughRoutes } from './pass-through/routes.ts';
import { registerResourceRoutes } from './resources/routes.ts';
import { registerWriteRoutes } from './resources/write-routes.ts';
import { registerStorageRoutes } from './storage/routes.ts';
import { registerWebhookRoutes } from './webhooks/routes.ts';

export type { SandboxOptions } from './options.ts';

export interface Sandbox {
  url: string;
  port: number;
  app: FastifyInstance;
  close(): Promise<void>;
}

const contexts = new WeakMap<FastifyInstance, SandboxContext>();

export async function buildSandboxApp(options: SandboxOptions): Promise<FastifyInstance> {
  const resolved = resolveOptions(options);
  const logger = options.logger === false ? undefined : (options.logger ?? createLogger({ name: 'sandbox', level: process.env.LOG_LEVEL ?? 'warn' }));
  const ctx = createContext(resolved, logger);
  const app = Fastify({
    ...(logger ? { loggerInstance: logger } : { logger: false }),
    // Per-request log lines would drown benchmarks; errors are still logged.
    logController: new LogController({ disableRequestLogging: true }),
    genReqId: () => randomUUID(),
    requestIdHeader: false,
    // Held requests (the `timeout` fault) must not keep close() waiting.
    forceCloseConnections: true,
    bodyLimit: 64 * 1024 * 1024,
    routerOptions: { ignoreTrailingSlash: true },
    // The pino Logger type is narrower than FastifyBaseLogger's generic slot; the instance is the same.
  }) as unknown as FastifyInstance;
  contexts.set(app, ctx);
  // Async replays are marked with a nonce only this instance knows.
  const internalNonce = randomBytes(16).toString('hex');
  installErrorHandlers(app);
  registerBodyParsers(app);
  installPipeline(app, ctx, internalNonce);
  registerLinkRoutes(app, ctx);
  registerLinkPage(app, ctx);
  registerAdminRoutes(app, ctx);
  registerWebhookRoutes(app, ctx);
  registerAsyncRoutes(app, ctx, internalNonce);
  registerPassthroughRoutes(app, ctx);
  registerStorageRoutes(app, ctx);
  // Last: their parametric paths yield to every static path above.
  registerResourceRoutes(app, ctx);
  registerWriteRoutes(app, ctx);
  app.addHook('onClose', async () => {
    ctx.churn.stopAll();
    await Promise.race([ctx.webhooks.drain(), new Promise((r) => setTimeout(r, 2000).unref())]);
  });
  await app.ready();
  return app;
}

export async function startSandbox(options: SandboxOptions & { port?: number; host?: string }): Promise<Sandbox> {
  const app = await buildSandboxApp(options);
  const address = await app.listen({ port: options.port ?? 0, host: options.host ?? '127.0.0.1' });
  const addr = app.server.address();
  const port = typeof addr === 'object' && addr ? addr.port : Number(new URL(address).port);
  const host = options.host && options.host !== '0.0.0.0' && options.host !== '::' ? options.host : '127.0.0.1';
  const url = `http://${host.includes(':') ? `[${host}]` : host}:${port}`;
  const ctx = contexts.get(app)!;
  setBaseUrl(ctx, options.publicUrl ?? url);
  return {
    url,
    port,
    app,
    close: async () => {
      await app.close();
    },
  };
}
