// A small Link page: a person picks a source system, "signs in" (any credentials), and gets the
// public token, shown on the page or sent to `redirect_uri?public_token=...`. Opened by the Link script
// (link-script.ts) with `origin`, it hands the token, or the person's exit, to that origin by postMessage.
import type { FastifyInstance } from 'fastify';
import { z } from 'zod';
import type { SandboxContext } from '../context.ts';
import { sourceSystemProfiles, profileOf } from '../source-systems/profiles.ts';
import { linkBrand, registerLinkScript, scriptLiteral, type LinkMessage } from './link-script.ts';

/** An opener's origin (`http(s)://host[:port]`), the only window the page's messages go to. */
const originSchema = z.string().regex(/^https?:\/\/[A-Za-z0-9.-]+(?::\d{1,5})?$/);

const signInSchema = z.object({
  link_token: z.string().min(1),
  source_system: z.string().min(1),
  username: z.string().optional(),
  password: z.string().optional(),
  redirect_uri: z.url().optional(),
  origin: originSchema.optional(),
});

/** A script that posts `message` to the opener at `origin` (the page is the Link script's iframe). */
function post(origin: string, message: LinkMessage): string {
  return `<script>window.parent.postMessage(${scriptLiteral(message)}, ${scriptLiteral(origin)});</script>`;
}

function escape(s: string): string {
  return s.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);
}

function page(title: string, body: string): string {
  return `<!doctype html><html lang="en"><head><meta charset="utf-8"><title>${escape(title)}</title>
<style>body{font:16px system-ui,sans-serif;max-width:34rem;margin:3rem auto;padding:0 1rem}label{display:block;margin:.4rem 0}
fieldset{border:1px solid #ccc;border-radius:6px;margin:1rem 0}input[type=text],input[type=password]{width:100%;padding:.4rem}
button{padding:.5rem 1.2rem}code{background:#f3f3f3;padding:.2rem .4rem;word-break:break-all}</style></head>
<body><h1>${escape(title)}</h1>${body}</body></html>`;
}

export function registerLinkPage(app: FastifyInstance, ctx: SandboxContext): void {
  const opts = { config: { kind: 'public' as const } };
  const brand = linkBrand(ctx.options.headerPrefix);
  registerLinkScript(app, ctx);

  app.get('/link', opts, async (request, reply) => {
    const q = request.query as Record<string, string | undefined>;
    const token = q.link_token ?? '';
    void reply.type('text/html; charset=utf-8');
    const origin = q.origin === undefined ? undefined : originSchema.safeParse(q.origin).data;
    if (q.origin !== undefined && origin === undefined) return reply.code(400).send(page('Link', "<p>The opener's origin is not an http(s) origin.</p>"));
    if (!ctx.accounts.peekLinkToken(token)) {
      const message = 'This link token is invalid, used or expired. Ask the application for a new one.';
      return reply
        .code(400)
        .send(
          page(
            'Link',
            `<p>${message}</p>${origin ? post(origin, { source: brand, event: 'exit', error: { error_code: 'INVALID_LINK_TOKEN', message } }) : ''}`,
          ),
        );
    }
    // What the Link script asked for: one source system, a category (the profiles' kind), and whether
    // sandbox systems are shown (every system of the sandbox is one; it has no production systems).
    const shown = sourceSystemProfiles.filter(
      (p) => (!q.source_system || p.slug === q.source_system) && (!q.category || p.kind === q.category) && q.show_sandbox !== 'false',
    );
    const options = shown
      .map(
        (p, i) =>
          `<label><input type="radio" name="source_system" value="${p.slug}"${i === 0 ? ' checked' : ''}> ${escape(p.name)} <small>(${p.kind})</small></label>`,
      )
      .join('');
    const closeButton = origin
      ? ` <button type="button" id="link-exit">Close</button><script>document.getElementById('link-exit').addEventListener('click', function () { window.parent.postMessage(${scriptLiteral({ source: brand, event: 'exit' } satisfies LinkMessage)}, ${scriptLiteral(origin)}); });</script>`
      : '';
    return reply.send(
      page(
        'Connect your account',
        `<form method="post" action="${ctx.baseUrl}/link/sign-in">
<input type="hidden" name="link_token" value="${escape(token)}">
${q.redirect_uri ? `<input type="hidden" name="redirect_uri" value="${escape(q.redirect_uri)}">` : ''}
${origin ? `<input type="hidden" name="origin" value="${escape(origin)}">` : ''}
<fieldset><legend>Source system</legend>${options || '<p>No source system matches what the application asked for.</p>'}</fieldset>
<label>Username <input type="text" name="username" autocomplete="username"></label>
<label>Password <input type="password" name="password" autocomplete="current-password"></label>
<p><small>Sandbox: any credentials sign in.</small></p>
<button type="submit"${options ? '' : ' disabled'}>Sign in</button>${closeButton}</form>`,
      ),
    );
  });

  app.post('/link/sign-in', opts, async (request, reply) => {
    void reply.type('text/html; charset=utf-8');
    const parsed = signInSchema.safeParse(request.body);
    const profile = parsed.success ? profileOf(parsed.data.source_system) : undefined;
    if (!parsed.success || !profile) return reply.code(400).send(page('Link', '<p>Choose a source system and sign in again.</p>'));
    let publicToken: string;
    try {
      publicToken = ctx.accounts.mintPublicToken(parsed.data.link_token, profile);
    } catch {
      return reply.code(400).send(page('Link', '<p>This link token is invalid, used or expired.</p>'));
    }
    if (parsed.data.origin) {
      return reply.send(
        page(
          `Connected to ${profile.name}`,
          `<p>Connected. You can close this window.</p>${post(parsed.data.origin, { source: brand, event: 'success', public_token: publicToken })}`,
        ),
      );
    }
    if (parsed.data.redirect_uri) {
      const target = new URL(parsed.data.redirect_uri);
      target.searchParams.set('public_token', publicToken);
      return reply.redirect(target.toString(), 302);
    }
    return reply.send(
      page(
        `Connected to ${profile.name}`,
        `<p>Hand this public token to the application (valid 10 minutes, single use):</p><p><code id="public-token">${publicToken}</code></p>`,
      ),
    );
  });
}
