// Applies injected faults: exchange-level ones (status, 429 storm, slow, timeout, reset, and the
// hostile bodies of hostile-bodies.ts) before the handler runs, body-level ones (truncated or
// malformed JSON) as the answer is sent.
import type { FastifyReply, FastifyRequest } from 'fastify';
import type { SandboxContext } from '../context.ts';
import { isJsonPage } from '../resources/json-page.ts';
import type { Fault } from './faults.ts';
import { sendGzipBomb, sendOversizedPage, sendTrickle } from './hostile-bodies.ts';

const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

/** Returns true when the request may go on to its handler. */
export async function applyExchangeFaults(ctx: SandboxContext, fired: Fault[], request: FastifyRequest, reply: FastifyReply): Promise<boolean> {
  for (const f of fired) {
    switch (f.kind) {
      case 'slow':
        await sleep(f.delay_ms ?? 2000);
        break;
      case 'timeout':
        // Never answer: hold the request until the client gives up (or the server closes).
        await new Promise<void>((resolve) => reply.raw.once('close', () => resolve()));
        reply.hijack();
        return false;
      case 'reset':
        reply.hijack();
        request.raw.socket.destroy();
        return false;
      case 'oversized-page':
        await sendOversizedPage(reply, f.bytes);
        return false;
      case 'gzip-bomb':
        await sendGzipBomb(reply, f.bytes);
        return false;
      case 'trickle':
        await sendTrickle(reply, f.interval_ms);
        return false;
      case 'status': {
        const status = f.status ?? 503;
        if (f.retry_after !== undefined) void reply.header('Retry-After', String(f.retry_after));
        void reply.code(status).send({
          message:
            status === 503 ? 'Service temporarily unavailable' : status === 502 ? 'Bad gateway: the source system did not answer' : 'Internal server error',
        });
        return false;
      }
      case 'rate-limit': {
        const account = request.svc.account;
        const retry = f.retry_after ?? 1;
        if (f.retry_after !== undefined) void reply.header('Retry-After', String(retry));
        void reply.header(`${ctx.options.headerPrefix}-RateLimit-Remaining`, '0');
        if (account) {
          const limit = ctx.limiter.sourceLimit(account.profile);
          void reply.header(`${account.profile.headerName}-RateLimit-Total`, String(limit.limit));
          void reply.header(`${account.profile.headerName}-RateLimit-Remaining`, '0');
          void reply.header(`${account.profile.headerName}-RateLimit-ResetsAtTimestamp`, String(Math.ceil(Date.now() / 1000) + retry));
        }
        void reply.code(429).send({ message: 'Rate limit exceeded' });
        return false;
      }
      default:
        request.svc.faults.push(f);
    }
  }
  return true;
}

/** onSend: corrupts JSON bodies as the fired faults say. */
export function applyBodyFaults(request: FastifyRequest, payload: unknown): unknown {
  if (request.svc.faults.length === 0) return payload;
  if (!request.svc.faults.some((f) => f.kind === 'truncated-json' || f.kind === 'malformed-json')) return payload;
  // Lists are sent as pre-assembled JSON bytes: corrupted as the text they are (other bytes, as before, never).
  if (isJsonPage(payload)) payload = payload.toString('utf8');
  if (typeof payload !== 'string') return payload;
  for (const f of request.svc.faults) {
    if (f.kind === 'truncated-json') return payload.slice(0, Math.max(1, Math.floor(payload.length / 2)));
    if (f.kind === 'malformed-json') return `{"data": [${payload.slice(1, 40)}, }<html><body>502 Bad Gateway</body></html>`;
  }
  return payload;
}

export function hasFault(request: FastifyRequest, kind: Fault['kind']): Fault | undefined {
  return request.svc.faults.find((f) => f.kind === kind);
}
