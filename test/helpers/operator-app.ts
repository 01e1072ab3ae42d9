// The mirror's API as `mirror api` builds it (forwarding, sync control, operator pages), listening on
// a free port for a browser or a scraper, over a test harness.
import type { FastifyInstance } from 'fastify';
import { buildApp } from '../../api/app.ts';
import { upstreamTarget } from '../../bin/services.ts';
import { randomSecret } from '../../lib/crypto.ts';
import type { Harness } from './harness.ts';

export interface OperatorApp {
  app: FastifyInstance;
  url: string;
  operatorToken: string;
  temporalUiUrl: string;
  close(): Promise<void>;
}

export async function startOperatorApp(h: Harness, options: { refreshMs?: number } = {}): Promise<OperatorApp> {
  const operatorToken = randomSecret(32);
  const temporalUiUrl = 'http://temporal-ui.invalid:8233';
  const { services } = h;
  const app = await buildApp({
    pool: services.pool,
    prisma: services.prisma,
    accounts: services.accounts,
    logger: services.logger,
    upstream: { client: services.upstream, target: upstreamTarget(services.config) },
    sync: h.sync,
    hashKey: services.keys.signingKey,
    encryptionKey: services.keys.encryptionKey,
    callbacks: { allow: services.config.MIRROR_CALLBACK_ALLOW },
    operator: { token: operatorToken, temporalUiUrl, ...(options.refreshMs ? { refreshMs: options.refreshMs } : {}) },
  });
  const address = await app.listen({ port: 0, host: '127.0.0.1' });
  return { app, url: address, operatorToken, temporalUiUrl, close: () => app.close() };
}

/** Slows a source system of the sandbox (every request waits), so a sync can be watched. */
export async function setLatency(h: Harness, sourceSystem: string, latencyMs: number): Promise<void> {
  const res = await fetch(`${h.sandbox.url}/_admin/source-systems/${sourceSystem}`, {
    method: 'PUT',
    headers: { ...h.upstreamHeaders, 'content-type': 'application/json' },
    body: JSON.stringify({ latency_ms: latencyMs }),
  });
  if (!res.ok) throw new Error(`sandbox latency: ${res.status} ${await res.text()}`);
}
