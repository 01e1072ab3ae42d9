// Who may read the operator pages (/status, /metrics): holders of the mirror's client credentials, or
// of OPERATOR_TOKEN. A browser signs in with Basic auth (it prompts once and resends it, also for the
// page's own fetches); Prometheus and curl send a Bearer token or the contract's headers.
import type { FastifyReply, FastifyRequest } from 'fastify';
import { safeEqual, sha256Hex } from '../../lib/crypto.ts';
import { UnauthorizedError } from '../../lib/errors.ts';
import { apiVersion, type Authenticator } from '../auth.ts';

interface OperatorAuthDeps {
  auth: Authenticator;
  /** OPERATOR_TOKEN, if configured. */
  token?: string;
}

const realm = 'Basic realm="mirror operator", charset="UTF-8"';

function header(request: FastifyRequest, name: string): string | undefined {
  const v = request.headers[name];
  return Array.isArray(v) ? v[0] : v;
}

/** A preHandler that lets operators through and answers 401 (with a Basic challenge) otherwise. */
export function operatorGuard(deps: OperatorAuthDeps): (request: FastifyRequest, reply: FastifyReply) => Promise<void> {
  const tokenOk = (presented: string) => deps.token !== undefined && safeEqual(sha256Hex(presented), sha256Hex(deps.token));
  const clientOk = async (clientId: string, clientSecret: string) => {
    const shim = { headers: { 'api-version': apiVersion, 'client-id': clientId, 'client-secret': clientSecret } } as unknown as FastifyRequest;
    try {
      await deps.auth.client(shim);
      return true;
    } catch {
      return false;
    }
  };
  return async (request, reply) => {
    const authorization = header(request, 'authorization') ?? '';
    let ok = false;
    const [scheme, value = ''] = authorization.split(/\s+/, 2);
    if (scheme?.toLowerCase() === 'bearer') ok = tokenOk(value);
    else if (scheme?.toLowerCase() === 'basic') {
      const decoded = Buffer.from(value, 'base64').toString('utf8');
      const colon = decoded.indexOf(':');
      const user = colon < 0 ? decoded : decoded.slice(0, colon);
      const password = colon < 0 ? '' : decoded.slice(colon + 1);
      ok = user === 'operator' ? tokenOk(password) : await clientOk(user, password);
    } else {
      const clientId = header(request, 'client-id');
      const clientSecret = header(request, 'client-secret');
      if (clientId && clientSecret) ok = await clientOk(clientId, clientSecret);
    }
    if (ok) return;
    void reply.header('www-authenticate', realm);
    throw new UnauthorizedError(
      "Operator pages need the mirror's client credentials (Basic auth with Client-Id as user and Client-Secret as password, or the Client-Id and Client-Secret headers)" +
        (deps.token ? ' or OPERATOR_TOKEN (Authorization: Bearer <token>, or Basic with user "operator").' : '; set OPERATOR_TOKEN to also allow a token.'),
    );
  };
}
