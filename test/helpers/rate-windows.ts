// Every answer the sandbox gives one account, with the rate window (its reported reset) it fell in:
// what the budget tests count per window (sync, application, 429s).
import type { IncomingMessage, Server, ServerResponse } from 'node:http';

export interface Seen {
  t: number;
  path: string;
  status: number;
  resetsAt: number | undefined;
}

/** Records the sandbox `server`'s answers to `accountToken`; `header` is the rate-limit header prefix (`crmcloud-ratelimit`). */
export function recordWindows(server: Server, accountToken: string, header: string): { seen: Seen[]; stop(): void } {
  const seen: Seen[] = [];
  const listener = (req: IncomingMessage, res: ServerResponse) => {
    if (req.headers['account-token'] !== accountToken) return;
    const t = Date.now();
    let resetsAt: number | undefined;
    const writeHead = res.writeHead.bind(res) as (...args: unknown[]) => ServerResponse;
    res.writeHead = (...args: unknown[]) => {
      const headers = args.find((a): a is Record<string, unknown> => typeof a === 'object' && a !== null && !Array.isArray(a));
      const key = headers && Object.keys(headers).find((k) => k.toLowerCase() === `${header}-resetsattimestamp`);
      if (key) resetsAt = Number(headers[key]);
      return writeHead(...args);
    };
    res.once('close', () => {
      const reset = resetsAt ?? res.getHeader(`${header}-resetsattimestamp`);
      seen.push({ t, path: (req.url ?? '').split('?')[0]!, status: res.statusCode, resetsAt: reset === undefined ? undefined : Number(reset) });
    });
  };
  server.on('request', listener);
  return { seen, stop: () => server.off('request', listener) };
}
