// Async requests served by the mirror: the request (without credentials) is stored before the 202,
// a workflow runs it, and the stored response is served until it expires.
import type { PrismaClient } from '../db/prisma.ts';

export interface StoredRequest {
  id: string;
  accountId: string;
  method: string;
  path: string;
  headers: Record<string, string>;
  body: Buffer | null;
}

export interface StoredResponse {
  status: number;
  headers: Record<string, string>;
  body: Buffer;
}

export class AsyncRequestStore {
  constructor(private readonly prisma: PrismaClient) {}

  async create(req: StoredRequest, expiresAt: Date): Promise<void> {
    await this.prisma.asyncRequest.create({
      data: {
        id: req.id,
        accountId: req.accountId,
        method: req.method,
        path: req.path,
        headers: req.headers,
        body: req.body ? new Uint8Array(req.body) : null,
        expiresAt,
      },
    });
  }

  async get(id: string) {
    return this.prisma.asyncRequest.findUnique({ where: { id } });
  }

  /** Claims a pending request for execution; returns it, or undefined when already finished. */
  async start(id: string): Promise<StoredRequest | undefined> {
    const row = await this.prisma.asyncRequest.findUnique({ where: { id } });
    if (!row) throw new Error(`async request ${id} is not stored (yet)`);
    if (row.state === 'executed' || row.state === 'failure') return undefined;
    await this.prisma.asyncRequest.update({ where: { id }, data: { state: 'running', startedAt: row.startedAt ?? new Date() } });
    return {
      id,
      accountId: row.accountId,
      method: row.method,
      path: row.path,
      headers: row.headers as Record<string, string>,
      body: row.body ? Buffer.from(row.body) : null,
    };
  }

  async finish(id: string, res: StoredResponse): Promise<void> {
    await this.prisma.asyncRequest.update({
      where: { id },
      data: {
        state: res.status >= 500 ? 'failure' : 'executed',
        status: res.status,
        responseHeaders: res.headers,
        responseBody: new Uint8Array(res.body),
        finishedAt: new Date(),
      },
    });
  }

  async fail(id: string, message: string): Promise<void> {
    await this.prisma.asyncRequest.update({ where: { id }, data: { state: 'failure', error: message.slice(0, 2000), finishedAt: new Date() } });
  }
}
