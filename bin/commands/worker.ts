// `mirror worker`: a Temporal worker, optionally serving its own /metrics (the upstream requests and
// 429s it made, which only this process sees).
import { createServer, type Server } from 'node:http';
import { safeEqual, sha256Hex } from '../../lib/crypto.ts';
import { createProcessMetrics } from '../../lib/process-metrics.ts';
import { untilSignal } from '../signals.ts';
import { cliConfig, UsageError, type Command } from './shared.ts';

export const workerCommand: Command = {
  summary: 'Run a Temporal worker (sync workflows and activities)',
  usage: 'mirror worker [--metrics-port <port>] [--metrics-host 127.0.0.1] [--queues split|both|main|prompt]',
  help:
    'Run as many as you like against one Temporal server and one Postgres: rate budgets are shared through Postgres.\n' +
    "--metrics-port (or WORKER_METRICS_PORT) serves this worker's Prometheus metrics at /metrics: upstream requests, 429s and latency per source system. " +
    "Cluster-wide figures (records written, pages, lag, budgets) come from the API's /metrics. With OPERATOR_TOKEN set, scrapes must send it as a Bearer token. " +
    'The same port answers /healthz (no token): 200 while the worker polls its queue.\n' +
    '--queues: by default (split) this process polls the main task queue (passes) and starts a second process for the prompt task queue ' +
    "(webhook events), whose event loop a backfill's pages do not hold up; it stops with this one, and this one stops if it dies. " +
    '`both` polls both in this process; `main` or `prompt` polls one, for deployments that run them apart.',
  options: { 'metrics-port': { type: 'string' }, 'metrics-host': { type: 'string' }, queues: { type: 'string' } },
  async run(v) {
    const config = cliConfig();
    const queues = typeof v.queues === 'string' ? v.queues : 'split';
    if (!['split', 'both', 'main', 'prompt'].includes(queues)) throw new UsageError('--queues is split, both, main or prompt.');
    const port = v['metrics-port'] !== undefined ? Number(v['metrics-port']) : config.WORKER_METRICS_PORT;
    if (port !== undefined && !(Number.isInteger(port) && port >= 0 && port < 65536)) throw new UsageError('--metrics-port is a port number.');
    const { createServices } = await import('../services.ts');
    const { startWorker, workerPoolSize, promptPoolSize } = await import('../temporal-worker.ts');
    const services = createServices(config, { name: 'worker', poolSize: queues === 'prompt' ? promptPoolSize(config) : workerPoolSize(config) });
    let server: Server | undefined;
    let handle: Awaited<ReturnType<typeof startWorker>> | undefined = undefined;
    if (port !== undefined) {
      const metrics = createProcessMetrics({ process: 'worker' });
      services.upstream.observe((o) => metrics.observeUpstream(o));
      // The sync's requests and what the governor made them wait, by class.
      const { registerUpstreamClassMetrics } = await import('../../connectors/upstream-metrics.ts');
      registerUpstreamClassMetrics(metrics.registry, services.upstream);
      server = createServer((req, res) => {
        const token = config.OPERATOR_TOKEN;
        const presented = (req.headers.authorization ?? '').replace(/^Bearer\s+/i, '');
        // A container's health check: 200 while the worker polls its queue, 503 while it starts or stops.
        if (req.url === '/healthz') {
          const state = handle?.worker.getState() ?? 'STARTING';
          return void res
            .writeHead(state === 'RUNNING' ? 200 : 503, { 'content-type': 'application/json' })
            .end(JSON.stringify({ ok: state === 'RUNNING', state }));
        }
        if (req.url !== '/metrics') return void res.writeHead(404).end('Not found: scrape /metrics (or /healthz)\n');
        if (token && !safeEqual(sha256Hex(presented), sha256Hex(token)))
          return void res.writeHead(401, { 'www-authenticate': 'Bearer' }).end('Send OPERATOR_TOKEN as a Bearer token.\n');
        metrics.registry.metrics().then(
          (text) => res.writeHead(200, { 'content-type': metrics.registry.contentType }).end(text),
          (error: unknown) => res.writeHead(500).end(String(error)),
        );
      });
      const host = typeof v['metrics-host'] === 'string' ? v['metrics-host'] : '127.0.0.1';
      await new Promise<void>((resolve, reject) => server!.once('error', reject).listen(port, host, resolve));
      const address = server.address();
      services.logger.info({ metrics: `http://${host}:${typeof address === 'object' && address ? address.port : port}/metrics` }, 'worker metrics');
    }
    handle = await startWorker(services, {
      maintenanceSchedule: queues !== 'prompt',
      queues: queues === 'split' ? 'main' : (queues as 'both' | 'main' | 'prompt'),
    });
    const { startPromptProcess } = await import('../prompt-process.ts');
    const prompt = queues === 'split' ? startPromptProcess() : undefined;
    services.logger.info({ taskQueue: config.TEMPORAL_TASK_QUEUE, address: config.TEMPORAL_ADDRESS, queues }, 'worker running');
    let stopping = false;
    const promptDied = prompt?.exited.then((how) => {
      if (stopping) return;
      services.logger.error({ exit: how }, 'the prompt task queue process exited: the worker stops');
      process.exitCode = 1;
    });
    await Promise.race([untilSignal(), handle.running, ...(promptDied ? [promptDied] : [])]);
    stopping = true;
    await Promise.all([handle.shutdown(), prompt?.stop()]);
    server?.close();
    await services.close();
  },
};
