// A process's connections opened before its first real work: the Prisma client's engine and a few
// pooled connections. Without it the first webhook event a fresh process handled paid for both (bench
// [14]: 2.7 s from the event activity's start to its record written for the first change, 0.3 s for the
// next ones).
import type { Pool } from './pool.ts';
import type { PrismaClient } from './prisma.ts';

/** Best effort: a database not reachable yet is not this step's to report (the process's work retries). */
export async function warmUp(pool: Pool, prisma: PrismaClient, connections: number): Promise<void> {
  try {
    await prisma.$connect();
    await prisma.$queryRaw`SELECT 1`;
    const clients = await Promise.allSettled(Array.from({ length: Math.max(1, connections) }, () => pool.connect()));
    for (const c of clients) if (c.status === 'fulfilled') c.value.release();
  } catch {
    // Opened on first use instead.
  }
}
