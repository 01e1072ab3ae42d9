// Link sessions: time- and scope-limited credentials for a front end, sent as a `Session` header
// instead of the client credentials and account token.
import { randomBytes, randomUUID } from 'node:crypto';
import { z } from 'zod';
import { BadRequestError } from '../../lib/errors.ts';

const readScopes = ['projects:read', 'documents:read', 'drawings:read', 'specification-sections:read'];
const sessionModes: Record<string, string[]> = {
  'file-picker': ['link:read', ...readScopes],
  'construction-file-picker': ['link:read', ...readScopes.map((s) => `construction.${s}`)],
};

export const createSessionSchema = z
  .object({
    name: z.string().min(1).max(255),
    ttl: z.union([z.string().regex(/^\d+$/, 'ttl is a number of seconds, sent as a string'), z.number().int().positive()]),
    mode: z.string().optional(),
    scopes: z
      .array(z.string().regex(/^[a-z.-]+:(read|write)$/, 'a scope looks like projects:read'))
      .min(1)
      .optional(),
  })
  .refine((b) => b.mode !== undefined || b.scopes !== undefined, { message: 'give a mode or a list of scopes' });
type CreateSession = z.infer<typeof createSessionSchema>;

export const extendSessionSchema = z.object({
  ttl: z.union([z.string().regex(/^\d+$/), z.number().int().positive()]),
});

export interface LinkSession {
  id: string;
  name: string;
  secret: string;
  scopes: string[];
  expiresAt: number;
  accountId: string;
}

export class LinkSessions {
  private readonly byId = new Map<string, LinkSession>();
  private readonly bySecret = new Map<string, LinkSession>();

  create(accountId: string, body: CreateSession): LinkSession {
    const ttl = Number(body.ttl);
    if (ttl < 1 || ttl > 86_400 * 30) throw new BadRequestError('ttl must be between 1 and 2592000 seconds');
    let scopes: string[];
    if (body.mode !== undefined) {
      const s = sessionModes[body.mode];
      if (!s) throw new BadRequestError(`Unknown mode ${body.mode}; known: ${Object.keys(sessionModes).join(', ')}`);
      scopes = s;
    } else scopes = body.scopes!;
    const session: LinkSession = {
      id: randomUUID(),
      name: body.name,
      secret: `sess_${randomBytes(32).toString('base64url')}`,
      scopes: [...scopes],
      expiresAt: Date.now() + ttl * 1000,
      accountId,
    };
    this.byId.set(session.id, session);
    this.bySecret.set(session.secret, session);
    return session;
  }

  bySessionSecret(secret: string): LinkSession | undefined {
    return this.bySecret.get(secret);
  }

  get(accountId: string, id: string): LinkSession | undefined {
    const s = this.byId.get(id);
    return s && s.accountId === accountId ? s : undefined;
  }

  list(accountId: string): LinkSession[] {
    return [...this.byId.values()].filter((s) => s.accountId === accountId);
  }

  extend(s: LinkSession, ttlSeconds: number): void {
    s.expiresAt = Date.now() + ttlSeconds * 1000;
  }

  expire(s: LinkSession): void {
    s.expiresAt = Date.now() - 1;
  }
}

/** The response object of the contract (2.3). The secret is shown at creation only. */
export function sessionView(s: LinkSession, withSecret: boolean) {
  return { id: s.id, name: s.name, ...(withSecret ? { session: s.secret } : {}), scopes: s.scopes, expires_at: new Date(s.expiresAt).toISOString() };
}

/** The scope a request needs: `<area>:read` for GET, `<area>:write` otherwise. */
export function requiredScope(method: string, path: string): string {
  const area = path.split('?')[0]!.split('/').filter(Boolean)[0] ?? '';
  return `${area}:${method === 'GET' || method === 'HEAD' ? 'read' : 'write'}`;
}

export function sessionAllows(s: LinkSession, scope: string): boolean {
  return s.scopes.includes(scope) || s.scopes.includes(`construction.${scope}`);
}
