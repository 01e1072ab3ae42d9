// The status page in a real browser (Debian's Chromium driven by playwright-core), during a sync: it
// asks for credentials, then shows the pass's progress (streams done of total, records) and the
// streams syncing now, with links into the Temporal UI, and shows no pass running once it is done.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { Page } from 'playwright-core';
import { ensureChromium, launchChromium, type Browser } from '../helpers/browser.ts';
import { startHarness, type Harness } from '../helpers/harness.ts';
import { setLatency, startOperatorApp, type OperatorApp } from '../helpers/operator-app.ts';

const chromium = ensureChromium();
const skip = 'missing' in chromium ? `Chromium cannot be had here: ${chromium.missing}` : false;
if (skip) console.error(`status page browser test skipped: ${skip}`);

describe('status page in a browser', { timeout: 150_000, skip }, () => {
  let h: Harness;
  let op: OperatorApp;
  let browser: Browser;
  let page: Page;

  before(async () => {
    h = await startHarness({ sandbox: { size: 12 } });
    op = await startOperatorApp(h, { refreshMs: 500 });
    browser = await launchChromium((chromium as { path: string }).path, { httpCredentials: { username: 'operator', password: op.operatorToken } });
    page = await browser.context.newPage();
  });
  after(async () => {
    await browser?.close();
    await op?.close();
    await h?.close();
  });

  it('answers 401 with a Basic challenge without credentials, and serves JSON with them', async () => {
    const anonymous = await fetch(`${op.url}/status`);
    assert.equal(anonymous.status, 401);
    assert.match(anonymous.headers.get('www-authenticate') ?? '', /^Basic realm=/);
    const wrong = await fetch(`${op.url}/status.json`, { headers: { authorization: 'Bearer not-the-token-at-all' } });
    assert.equal(wrong.status, 401);
    const bearer = await fetch(`${op.url}/status.json`, { headers: { authorization: `Bearer ${op.operatorToken}` } });
    assert.equal(bearer.status, 200);
    const client = await fetch(`${op.url}/status.json`, {
      headers: { 'client-id': h.clientHeaders['client-id']!, 'client-secret': h.clientHeaders['client-secret']! },
    });
    assert.equal(client.status, 200);
    const body = (await client.json()) as { totals: { accounts: number }; temporal: { reachable: boolean } };
    assert.equal(body.totals.accounts, 0);
    assert.equal(body.temporal.reachable, true);
  });

  it('shows the progress of a sync while it runs, then no pass running and the account synced', async () => {
    const { accountId } = await h.link('buildpro', 'status-page');
    await setLatency(h, 'buildpro', 150);
    const handle = await h.sync.start({ accountId, mode: 'full' });
    await page.goto(`${op.url}/status`);
    assert.equal(await page.title(), 'Mirror status');

    // The pass, as the account workflow reports it: a bar and "N/M streams, R records" with R > 0.
    const row = `tr.account[data-account="${accountId}"]`;
    await page.waitForFunction(
      `(() => { const p = document.querySelector('${row} .pass-progress'); return p && /\\d+\\/\\d+ streams, [1-9][\\d,]* records/.test(p.textContent); })()`,
      undefined,
      { timeout: 60_000, polling: 200 },
    );
    const progress = (await page.textContent(`${row} .pass-progress`)) ?? '';
    assert.match(progress, /^(account|projects|children|webhooks): \d+\/\d+ streams, [\d,]+ records/);
    assert.ok(await page.isVisible(`${row} [role=progressbar]`), 'a progress bar is drawn');
    const passLink = await page.getAttribute(`${row} .pass-progress a`, 'href');
    assert.ok(
      passLink?.startsWith(`${op.temporalUiUrl}/namespaces/default/workflows/${encodeURIComponent(`account-sync:${accountId}`)}/`),
      `links the running workflow: ${passLink}`,
    );

    // Streams syncing now, each linked to its workflow.
    await page.waitForSelector('#active-streams tr.stream', { timeout: 30_000 });
    const streamLink = await page.getAttribute('#active-streams tr.stream a', 'href');
    assert.ok(streamLink?.includes(encodeURIComponent(`WorkflowId="stream:${accountId}:`)), `links a stream workflow: ${streamLink}`);
    // The tile counts streams in state `syncing`; the table also lists streams of this pass that
    // finished, so between two phases of the pass the tile can read 0 for a refresh: wait for it.
    await page.waitForFunction(`/^[1-9]/.test(document.querySelector('#total-syncing')?.textContent ?? '')`, undefined, { timeout: 30_000, polling: 100 });

    const result = (await handle.result()) as { failed: unknown[]; records: number };
    assert.deepEqual(result.failed, []);
    await page.waitForFunction(
      `document.querySelector('${row}')?.dataset.syncing === '0' && document.querySelector('${row} .progress-cell')?.textContent.includes('none')`,
      undefined,
      { timeout: 20_000, polling: 200 },
    );
    const { rows } = await h.services.pool.query<{ n: number }>('SELECT count(*)::int AS n FROM records WHERE account_id = $1 AND deleted_at IS NULL', [
      accountId,
    ]);
    assert.ok(rows[0]!.n > 0);
    assert.equal((await page.textContent('#total-records'))?.replace(/,/g, ''), String(rows[0]!.n), 'the page shows every mirrored record');
    assert.match((await page.textContent(`${row}`)) ?? '', /synced \d+/);
  });
});
