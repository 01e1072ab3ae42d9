// Takes docs/operating.md's screenshot of the status page during a sync: a whole mirror in process (its own
// database, the sandbox slowed down so the sync can be watched, a Temporal dev server, a worker and
// the API), four linked accounts syncing, one stream failing; headless Chromium shoots /status.
//   node --import tsx scripts/screenshot-status.ts [--out docs/status-page.png]
import { mkdirSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { ensureChromium, launchChromium } from '../test/helpers/browser.ts';
import { startHarness } from '../test/helpers/harness.ts';
import { setLatency, startOperatorApp } from '../test/helpers/operator-app.ts';

const { values } = parseArgs({ options: { out: { type: 'string', default: 'docs/status-page.png' } } });
const out = resolve(new URL('..', import.meta.url).pathname, values.out);

const chromium = ensureChromium();
if ('missing' in chromium) {
  console.error(`screenshot-status: ${chromium.missing}`);
  process.exit(1);
}

const h = await startHarness({ sandbox: { size: 40, rateLimits: { windowMs: 60_000 } } });
const op = await startOperatorApp(h, { refreshMs: 1000 });
const browser = await launchChromium(chromium.path, {
  httpCredentials: { username: 'operator', password: op.operatorToken },
  viewport: { width: 1440, height: 1100 },
});
try {
  const systems = ['buildpro', 'sqlerp', 'crmcloud', 'fieldops'];
  for (const s of systems) await setLatency(h, s, 120);
  // One stream that fails, so the page shows an error the way it would.
  await fetch(`${h.sandbox.url}/_admin/faults`, {
    method: 'POST',
    headers: { ...h.upstreamHeaders, 'content-type': 'application/json' },
    body: JSON.stringify({ match: { path: '/appointments', source_system: 'fieldops' }, kind: 'status', status: 400 }),
  });
  const accounts = [];
  for (const s of systems) accounts.push(await h.link(s, `acme-${s}`));
  const handles = await Promise.all(accounts.map((a) => h.sync.start({ accountId: a.accountId, mode: 'full' })));
  const page = await browser.context.newPage();
  await page.goto(`${op.url}/status`);
  // Wait until the small accounts are done and the large one is well into its pass.
  await page.waitForFunction(
    `(() => { const rows = [...document.querySelectorAll('tr.account')]; const busy = rows.filter(r => r.querySelector('.pass-progress')); return rows.length === 4 && busy.length >= 1 && busy.length <= 2 && document.querySelectorAll('#active-streams tr.stream').length >= 3; })()`,
    undefined,
    { timeout: 120_000, polling: 250 },
  );
  await page.waitForTimeout(1200);
  mkdirSync(dirname(out), { recursive: true });
  await page.screenshot({ path: out, fullPage: false });
  console.error(`screenshot-status: wrote ${out}`);
  await Promise.allSettled(handles.map((x) => x.result()));
} finally {
  await browser.close();
  await op.close();
  await h.close();
}
