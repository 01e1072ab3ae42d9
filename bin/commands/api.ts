// `mirror api`: the read API, status page and metrics.
import { untilSignal } from '../signals.ts';
import { cliConfig, type Command } from './shared.ts';

export const apiCommand: Command = {
  summary: "Run the mirror's read API (with /status, /metrics and /docs)",
  usage: 'mirror api [--port 4000]',
  help: "Serves the unified API's paths from the mirror, the status page at /status and Prometheus metrics at /metrics (both behind the mirror's client credentials or OPERATOR_TOKEN), and the API reference at /docs.",
  options: { port: { type: 'string' } },
  async run(v) {
    const config = cliConfig();
    const { createServices } = await import('../services.ts');
    const { startApi } = await import('../api-server.ts');
    const services = createServices(config, { name: 'api' });
    const api = await startApi(services, v.port ? { port: Number(v.port) } : {});
    services.logger.info({ url: api.url, status: `${api.url}/status`, docs: `${api.url}/docs` }, 'api listening');
    await untilSignal();
    await api.close();
    await services.close();
  },
};
