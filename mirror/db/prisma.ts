// The Prisma client of the control plane (accounts, streams, runs), on the pg driver adapter.
import { PrismaPg } from '@prisma/adapter-pg';
import { PrismaClient } from '../../prisma/generated/client.ts';

export type { PrismaClient };

export function createPrisma(databaseUrl: string): PrismaClient {
  return new PrismaClient({ adapter: new PrismaPg({ connectionString: databaseUrl, max: 4 }) });
}
