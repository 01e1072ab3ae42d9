// The rate-limit and concurrency gate in front of every account request: quota windows with their
// headers, and the one-at-a-time queue of serial source systems with its execution limit.
import type { FastifyReply, FastifyRequest } from 'fastify';
import type { SandboxContext } from '../context.ts';

const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

/** Returns true when the request may go on. */
export async function passGate(ctx: SandboxContext, request: FastifyRequest, reply: FastifyReply): Promise<boolean> {
  const account = request.svc.account;
  if (!account) return true;
  if (!request.svc.internal) {
    const decision = ctx.limiter.take(account.id, account.profile);
    void reply.headers(decision.headers);
    if (decision.exceeded) {
      void reply.code(429).send({ message: decision.exceeded.message });
      return false;
    }
  }
  const profile = account.profile;
  const settings = ctx.sourceSettings.get(profile.slug);
  if (profile.serial) {
    const maxQueued = settings?.maxQueued ?? profile.serial.maxQueued;
    const maxExecutionMs = settings?.maxExecutionMs ?? profile.serial.maxExecutionMs;
    const closed = new Promise<void>((resolve) => reply.raw.once('close', () => resolve()));
    const release = await ctx.serial.acquire(account.id, maxQueued, closed);
    if (!release) {
      if (!reply.raw.writableEnded && !reply.raw.destroyed) {
        void reply
          .code(429)
          .send({ message: `${profile.name} serves one request at a time per linked account and at most ${maxQueued} may wait; retry later` });
      }
      return false;
    }
    reply.raw.once('close', release);
    const timer = setTimeout(() => {
      if (!reply.sent && !reply.raw.headersSent) {
        void reply
          .code(504)
          .send({ message: `${profile.name} did not answer within its maximum execution time of ${Math.round(maxExecutionMs / 1000)} seconds` });
      }
    }, maxExecutionMs);
    timer.unref();
    reply.raw.once('close', () => clearTimeout(timer));
  }
  if (settings && settings.latencyMs > 0) await sleep(settings.latencyMs);
  // The execution limit may have answered while we slept.
  return !reply.sent;
}
