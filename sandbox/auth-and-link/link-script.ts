// The Link front-end script: `GET /link/init.js` defines a global `<Brand>Link` (the brand is
// the configured header prefix: `Svc` gives `SvcLink`) with `openLink({ linkToken, onSuccess(publicToken),
// onExit(error?), sourceSystem?, category?, showSandboxSourceSystems?, showProductionSourceSystems? })`,
// as the real service's official component does. It opens the sandbox's Link page (link-page.ts) in a
// modal iframe; the page hands the public token, or the exit, to the opener by postMessage, aimed at
// the opener's origin only, and the script accepts messages only from that iframe and the sandbox's
// origin. A front end written for the real component can be tried against the sandbox by pointing the
// script's URL at it.
import type { FastifyInstance } from 'fastify';
import type { SandboxContext } from '../context.ts';

/** `SvcLink` for the header prefix `Svc`: the global the script defines (letters and digits only). */
export function linkBrand(headerPrefix: string): string {
  const brand = headerPrefix.replace(/[^A-Za-z0-9]/g, '');
  return `${/^[A-Za-z]/.test(brand) ? brand : `Svc${brand}`}Link`;
}

/** A value as a JavaScript literal safe inside an HTML `<script>` (no `</script>`, no line separators). */
export function scriptLiteral(value: unknown): string {
  return JSON.stringify(value)
    .replace(/</g, '\\u003c')
    .replace(/\u2028/g, '\\u2028')
    .replace(/\u2029/g, '\\u2029');
}

/** The message every Link page event carries (`source` is the brand, `event` success or exit). */
export interface LinkMessage {
  source: string;
  event: 'success' | 'exit';
  public_token?: string;
  error?: { error_code: string; message: string };
}

function script(brand: string, fallbackBase: string): string {
  return `/* ${brand}: the sandbox's Link component. ${brand}.openLink({ linkToken, onSuccess(publicToken), onExit(error?),
   sourceSystem?, category?, showSandboxSourceSystems?, showProductionSourceSystems? }) */
(function () {
  'use strict';
  var brand = ${scriptLiteral(brand)};
  if (window[brand]) return;
  var current = document.currentScript && document.currentScript.src;
  var base = current ? new URL(current).origin : ${scriptLiteral(fallbackBase)};
  var open = null;

  function openLink(options) {
    if (!options || typeof options.linkToken !== 'string' || options.linkToken === '') {
      throw new TypeError(brand + '.openLink: linkToken (the link token your server created) is required');
    }
    if (open) open.close();
    var q = new URLSearchParams({ link_token: options.linkToken, origin: window.location.origin });
    if (options.sourceSystem) q.set('source_system', String(options.sourceSystem));
    if (options.category) q.set('category', String(options.category));
    if (options.showSandboxSourceSystems === false) q.set('show_sandbox', 'false');
    if (options.showProductionSourceSystems === false) q.set('show_production', 'false');

    var overlay = document.createElement('div');
    overlay.id = brand + '-overlay';
    overlay.setAttribute('role', 'dialog');
    overlay.setAttribute('aria-modal', 'true');
    overlay.style.cssText = 'position:fixed;inset:0;z-index:2147483647;background:rgba(0,0,0,.45);display:flex;align-items:center;justify-content:center';
    var frame = document.createElement('iframe');
    frame.id = brand + '-frame';
    frame.title = 'Link your account';
    frame.src = base + '/link?' + q.toString();
    frame.style.cssText = 'width:min(30rem,100vw);height:min(40rem,100vh);border:0;border-radius:10px;background:#fff';
    var close = document.createElement('button');
    close.id = brand + '-close';
    close.type = 'button';
    close.setAttribute('aria-label', 'Close');
    close.textContent = '\\u00d7';
    close.style.cssText = 'position:absolute;top:1rem;right:1rem;font-size:1.6rem;line-height:1;border:0;border-radius:50%;width:2.4rem;height:2.4rem;cursor:pointer';
    overlay.appendChild(frame);
    overlay.appendChild(close);

    var done = false;
    function finish() {
      if (done) return false;
      done = true;
      window.removeEventListener('message', onMessage);
      if (overlay.parentNode) overlay.parentNode.removeChild(overlay);
      if (open && open.frame === frame) open = null;
      return true;
    }
    function onMessage(e) {
      if (e.origin !== base || e.source !== frame.contentWindow) return;
      var d = e.data;
      if (!d || d.source !== brand) return;
      if (d.event === 'success' && typeof d.public_token === 'string') {
        if (finish() && typeof options.onSuccess === 'function') options.onSuccess(d.public_token);
      } else if (d.event === 'exit') {
        if (finish() && typeof options.onExit === 'function') options.onExit(d.error || undefined);
      }
    }
    close.addEventListener('click', function () {
      if (finish() && typeof options.onExit === 'function') options.onExit(undefined);
    });
    window.addEventListener('message', onMessage);
    document.body.appendChild(overlay);
    open = { frame: frame, close: function () { if (finish() && typeof options.onExit === 'function') options.onExit(undefined); } };
  }

  window[brand] = { openLink: openLink };
})();
`;
}

export function registerLinkScript(app: FastifyInstance, ctx: SandboxContext): void {
  const brand = linkBrand(ctx.options.headerPrefix);
  app.get('/link/init.js', { config: { kind: 'public' as const } }, async (_request, reply) => {
    void reply.type('application/javascript; charset=utf-8').header('cache-control', 'no-cache');
    return reply.send(script(brand, ctx.baseUrl));
  });
}
