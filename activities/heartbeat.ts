// Heartbeats on a timer for activities that do one thing at a time (a plan, a delivery): while the
// activity's process lives it beats every few seconds, so an activity whose worker died is retried
// after its heartbeat timeout (20 s) instead of its whole start-to-close timeout (2 minutes).
import { Context } from '@temporalio/activity';

/** How often: a quarter of the 20 s heartbeat timeouts the workflows set, so one late beat is not a timeout. */
const heartbeatEveryMs = 5_000;

/** Runs `fn` beating on a timer (outside an activity, e.g. a unit test calling it directly: just runs it). */
export async function withHeartbeat<T>(fn: () => Promise<T>, everyMs = heartbeatEveryMs): Promise<T> {
  let ctx: Context;
  try {
    ctx = Context.current();
  } catch {
    return fn();
  }
  ctx.heartbeat();
  const beat = setInterval(() => ctx.heartbeat(), everyMs);
  try {
    return await fn();
  } finally {
    clearInterval(beat);
  }
}
