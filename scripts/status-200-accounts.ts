// Takes the README's screenshot of the status page with 200 accounts in mixed states (linked, idle,
// credentials refused, unlinked, some with failing or stalled streams): seeds them into a throwaway
// database (no upstream, no Temporal), serves /status from the API, and shoots it with headless
// Chromium. `--keep` leaves the database and prints its URL, to look at `npx mirror status` on it.
//   node --import tsx scripts/status-200-accounts.ts [--out docs/images/status-200-accounts.png] [--keep]
import { randomBytes, randomUUID } from 'node:crypto';
import { mkdirSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { buildApp } from '../api/app.ts';
import { createServices } from '../bin/services.ts';
import { parseConfig } from '../lib/config.ts';
import { randomSecret } from '../lib/crypto.ts';
import { createLogger } from '../lib/logger.ts';
import { ensureChromium, launchChromium } from '../test/helpers/browser.ts';
import { createTestDatabase } from '../test/helpers/database.ts';
import { seedAccounts } from '../test/helpers/many-accounts.ts';

const { values } = parseArgs({ options: { out: { type: 'string', default: 'docs/images/status-200-accounts.png' }, keep: { type: 'boolean' } } });
const out = resolve(new URL('..', import.meta.url).pathname, values.out);

const chromium = ensureChromium();
if ('missing' in chromium) {
  console.error(`status-200-accounts: ${chromium.missing}`);
  process.exit(1);
}
const db = await createTestDatabase('mirror_status200');
const config = parseConfig({
  DATABASE_URL: db.url,
  UPSTREAM_CLIENT_ID: randomUUID(),
  UPSTREAM_CLIENT_SECRET: randomSecret(40),
  MIRROR_CLIENT_ID: randomUUID(),
  MIRROR_CLIENT_SECRET: randomSecret(40),
  MIRROR_ENCRYPTION_KEY: randomBytes(32).toString('base64'),
  MIRROR_SIGNING_KEY: randomBytes(32).toString('base64'),
  LOG_LEVEL: 'silent',
});
const services = createServices(config, { logger: createLogger({ level: 'silent' }) });
const operatorToken = randomSecret(32);
const app = await buildApp({
  pool: services.pool,
  prisma: services.prisma,
  accounts: services.accounts,
  logger: services.logger,
  operator: { token: operatorToken, refreshMs: 60_000 },
});
const browser = await launchChromium(chromium.path, {
  httpCredentials: { username: 'operator', password: operatorToken },
  viewport: { width: 1440, height: 1400 },
});
try {
  await seedAccounts(services.pool);
  const url = await app.listen({ port: 0, host: '127.0.0.1' });
  const page = await browser.context.newPage();
  await page.goto(`${url}/status`);
  await page.waitForFunction(`document.querySelectorAll('tr.account').length === 200`, undefined, { timeout: 60_000 });
  mkdirSync(dirname(out), { recursive: true });
  await page.screenshot({ path: out, fullPage: false });
  console.error(`status-200-accounts: wrote ${out}`);
  if (values.keep) console.error(`status-200-accounts: the database stays: DATABASE_URL=${db.url} npx mirror status`);
} finally {
  await browser.close();
  await app.close();
  await services.close();
  if (!values.keep) await db.drop();
}
