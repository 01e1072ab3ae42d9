// The Link front-end script in a real browser: a page of the application's own origin loads
// the sandbox's `/link/init.js`, calls `SvcLink.openLink(...)` as a front end written for the real
// component does, and a person signs in inside the modal. onSuccess gets a public token that
// `/link/token/exchange` accepts; onExit fires when the person closes the modal (its × or the page's
// Close button) and, with an error, for a link token that is no good. Debian's Chromium driven by
// playwright-core (test/helpers/browser.ts installs it where it can, else the test skips saying why).
import assert from 'node:assert/strict';
import { createServer, type Server } from 'node:http';
import { after, before, describe, it } from 'node:test';
import type { Page } from 'playwright-core';
import type { Sandbox } from '../../sandbox/server.ts';
import { ensureChromium, launchChromium, type Browser } from '../helpers/browser.ts';
import { baseHeaders, call, start } from './helpers.ts';

const chromium = ensureChromium();
const skip = 'missing' in chromium ? `Chromium cannot be had here: ${chromium.missing}` : false;
if (skip) console.error(`Link script browser test skipped: ${skip}`);

type Outcome = { success: string } | { exit: { error_code: string; message: string } | null };

describe('the Link script in a browser', { timeout: 150_000, skip }, () => {
  let sb: Sandbox;
  let app: Server;
  let appUrl: string;
  let browser: Browser;
  let page: Page;

  before(async () => {
    sb = await start();
    // The application's page, on an origin of its own: it only loads the script.
    app = createServer((_req, res) => {
      res.writeHead(200, { 'content-type': 'text/html; charset=utf-8' });
      res.end(`<!doctype html><html><head><title>App</title><script src="${sb.url}/link/init.js"></script></head><body><h1>App</h1></body></html>`);
    });
    await new Promise<void>((resolve) => app.listen(0, '127.0.0.1', resolve));
    appUrl = `http://127.0.0.1:${(app.address() as { port: number }).port}/`;
    browser = await launchChromium((chromium as { path: string }).path);
    page = await browser.context.newPage();
    await page.goto(appUrl);
  });
  after(async () => {
    await browser?.close();
    await new Promise((r) => app?.close(r));
    await sb?.close();
  });

  async function linkToken(): Promise<string> {
    const r = await call(sb, 'POST', '/link/token/create', { headers: baseHeaders, body: { reference_id: 'browser' } });
    assert.equal(r.status, 200, r.text);
    return String(r.body.link_token);
  }

  /**
   * Calls openLink in the page; the returned function waits for what onSuccess or onExit got. The page's
   * code is a string: functions compiled by tsx carry a `__name` helper the browser does not have.
   */
  async function open(options: Record<string, unknown>): Promise<() => Promise<Outcome>> {
    await page.evaluate(`(() => {
      window.outcome = undefined;
      window.SvcLink.openLink(Object.assign(${JSON.stringify(options)}, {
        onSuccess: function (publicToken) { window.outcome = { success: publicToken }; },
        onExit: function (error) { window.outcome = { exit: error === undefined ? null : error }; },
      }));
    })()`);
    return async () => {
      await page.waitForFunction('window.outcome !== undefined', undefined, { timeout: 30_000 });
      return page.evaluate<Outcome>('window.outcome');
    };
  }

  it('defines SvcLink (the brand of the header prefix), and openLink refuses a call without a link token', async () => {
    assert.equal(await page.evaluate<string>('typeof window.SvcLink.openLink'), 'function');
    const message = await page.evaluate<string>(`(() => {
      try {
        window.SvcLink.openLink({});
        return 'no error';
      } catch (error) {
        return String(error);
      }
    })()`);
    assert.match(message, /TypeError: SvcLink\.openLink: linkToken/);
  });

  it('hands onSuccess a public token that /link/token/exchange accepts, for the source system asked for', async () => {
    const outcome = await open({ linkToken: await linkToken(), sourceSystem: 'fieldops' });
    const frame = page.frameLocator('#SvcLink-frame');
    // sourceSystem: only that one is offered.
    await frame.locator('input[name=source_system]').first().waitFor();
    const offered: string[] = [];
    for (const input of await frame.locator('input[name=source_system]').all()) offered.push((await input.getAttribute('value')) ?? '');
    assert.deepEqual(offered, ['fieldops']);
    await frame.locator('input[name=username]').fill('someone');
    await frame.locator('input[name=password]').fill('secret');
    await frame.locator('button[type=submit]').click();
    const result = await outcome();
    assert.ok('success' in result, JSON.stringify(result));
    assert.equal(await page.locator('#SvcLink-overlay').count(), 0, 'the modal is gone');
    const exchanged = await call(sb, 'POST', '/link/token/exchange', { headers: baseHeaders, body: { public_token: result.success } });
    assert.equal(exchanged.status, 200, exchanged.text);
    assert.equal(typeof exchanged.body.account_token, 'string');
    assert.equal((exchanged.body.source_system as { slug: string }).slug, 'fieldops');
  });

  it("fires onExit without an error when the person closes the modal, by its × or the page's Close", async () => {
    let outcome = await open({ linkToken: await linkToken(), category: 'accounting' });
    const frame = page.frameLocator('#SvcLink-frame');
    await frame.locator('input[name=source_system]').first().waitFor();
    await page.locator('#SvcLink-close').click();
    assert.deepEqual(await outcome(), { exit: null });
    assert.equal(await page.locator('#SvcLink-overlay').count(), 0);

    outcome = await open({ linkToken: await linkToken() });
    await page.frameLocator('#SvcLink-frame').locator('#link-exit').click();
    assert.deepEqual(await outcome(), { exit: null });
    assert.equal(await page.locator('#SvcLink-overlay').count(), 0);
  });

  it('fires onExit with an error for a link token that is no good', async () => {
    const outcome = await open({ linkToken: 'not-a-link-token' });
    const result = await outcome();
    assert.ok('exit' in result && result.exit !== null, JSON.stringify(result));
    assert.equal(result.exit.error_code, 'INVALID_LINK_TOKEN');
  });
});
