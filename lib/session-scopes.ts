// The link-session scope rule (the upstream's): a request needs `<area>:read` for GET and HEAD of
// `/<area>...`, `<area>:write` otherwise, and a session holds a scope with or without the
// `construction.` prefix. Pure, so the API's session check and the forwarder's path rule share it.

/** The scope a request needs: `<area>:read` for GET and HEAD, `<area>:write` otherwise. */
export function requiredScope(method: string, url: string): string {
  const area = url.split('?')[0]!.split('/').filter(Boolean)[0] ?? '';
  return `${area}:${method === 'GET' || method === 'HEAD' ? 'read' : 'write'}`;
}

export function sessionAllows(scopes: readonly string[], scope: string): boolean {
  return scopes.includes(scope) || scopes.includes(`construction.${scope}`);
}
