// Shared helpers of the sandbox contract tests: start a sandbox on a free port, link accounts the
// way the mirror does (link token -> admin public token -> exchange), call it with the right headers.
import { randomUUID } from 'node:crypto';
import { startSandbox, type Sandbox, type SandboxOptions } from '../../sandbox/server.ts';

export const clientId = randomUUID();
export const clientSecret = 'S'.repeat(20) + 'ecret'.repeat(4);
export const API_VERSION = '2021-11-21';

export const baseHeaders = { 'api-version': API_VERSION, 'client-id': clientId, 'client-secret': clientSecret };

export async function start(options: Partial<SandboxOptions> = {}): Promise<Sandbox> {
  return startSandbox({ port: 0, clientId, clientSecret, logger: false, rateLimits: false, ...options });
}

/** A record as the sandbox answers it. */
export type Rec = Record<string, unknown>;

/** Any JSON answer: list fields typed, everything else unknown (tests narrow what they assert). */
export interface Body {
  data: Rec[];
  meta: { current_page: number; has_more_results: boolean | null };
  message?: string;
  error?: string;
  [key: string]: unknown;
}

export interface Json {
  status: number;
  headers: Headers;
  body: Body;
  text: string;
}

export async function call(
  sb: Sandbox,
  method: string,
  path: string,
  options: { headers?: Record<string, string>; body?: unknown; raw?: string } = {},
): Promise<Json> {
  const headers: Record<string, string> = { ...options.headers };
  let body: string | undefined;
  if (options.raw !== undefined) body = options.raw;
  else if (options.body !== undefined) {
    body = JSON.stringify(options.body);
    headers['content-type'] ??= 'application/json';
  }
  const res = await fetch(`${sb.url}${path}`, { method, headers, ...(body !== undefined ? { body } : {}) });
  const text = await res.text();
  let parsed: unknown;
  try {
    parsed = text ? JSON.parse(text) : undefined;
  } catch {
    parsed = undefined;
  }
  return { status: res.status, headers: res.headers, body: (parsed ?? {}) as Body, text };
}

export async function admin(sb: Sandbox, method: string, path: string, body?: unknown): Promise<Json> {
  return call(sb, method, path, { headers: { 'client-id': clientId, 'client-secret': clientSecret }, body });
}

export interface Linked {
  token: string;
  headers: Record<string, string>;
  account: Body;
}

export async function link(sb: Sandbox, sourceSystem: string, referenceId = `ref-${sourceSystem}`): Promise<Linked> {
  const lt = await call(sb, 'POST', '/link/token/create', { headers: baseHeaders, body: { reference_id: referenceId } });
  if (lt.status !== 200) throw new Error(`link token: ${lt.status} ${lt.text}`);
  const pt = await admin(sb, 'POST', '/_admin/link/public-token', { link_token: lt.body.link_token, source_system: sourceSystem });
  if (pt.status !== 200) throw new Error(`public token: ${pt.status} ${pt.text}`);
  const ex = await call(sb, 'POST', '/link/token/exchange', { headers: baseHeaders, body: { public_token: pt.body.public_token } });
  if (ex.status !== 200) throw new Error(`exchange: ${ex.status} ${ex.text}`);
  const token = String(ex.body.account_token);
  return { token, headers: { ...baseHeaders, 'account-token': token }, account: ex.body };
}

/** Every page of a list, following has_more_results (null: until a short page). */
export async function all(sb: Sandbox, path: string, headers: Record<string, string>, perPage = 1000): Promise<Rec[]> {
  const out: Rec[] = [];
  for (let page = 1; page < 10_000; page++) {
    const sep = path.includes('?') ? '&' : '?';
    const r = await call(sb, 'GET', `${path}${sep}page=${page}&per_page=${perPage}`, { headers });
    if (r.status !== 200) throw new Error(`${path} page ${page}: ${r.status} ${r.text}`);
    out.push(...r.body.data);
    const more = r.body.meta.has_more_results;
    if (more === false || r.body.data.length === 0) break;
    if (more === null && r.body.data.length < Math.min(perPage, 1000)) break;
  }
  return out;
}

export const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));
