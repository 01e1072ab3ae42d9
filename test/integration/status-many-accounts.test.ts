// Many accounts in mixed states: the status page groups them (need attention, linked, idle,
// unlinked), counts each group on top and lists those needing attention first; `mirror status` prints a
// count per state and one line per account instead of every account's tables.
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { randomBytes, randomUUID } from 'node:crypto';
import { tmpdir } from 'node:os';
import { fileURLToPath } from 'node:url';
import { after, before, describe, it } from 'node:test';
import type { FastifyInstance } from 'fastify';
import { buildApp } from '../../api/app.ts';
import { createServices, type Services } from '../../bin/services.ts';
import { parseConfig } from '../../lib/config.ts';
import { randomSecret } from '../../lib/crypto.ts';
import { createLogger } from '../../lib/logger.ts';
import { createTestDatabase, type TestDatabase } from '../helpers/database.ts';
import { seedAccounts } from '../helpers/many-accounts.ts';

const mirrorBin = fileURLToPath(new URL('../../bin/mirror.js', import.meta.url));

describe('status with many accounts', () => {
  let db: TestDatabase;
  let env: Record<string, string>;
  let services: Services;
  let app: FastifyInstance;
  const operatorToken = randomSecret(32);

  before(async () => {
    db = await createTestDatabase('mirror_many');
    env = {
      DATABASE_URL: db.url,
      UPSTREAM_CLIENT_ID: randomUUID(),
      UPSTREAM_CLIENT_SECRET: randomSecret(40),
      MIRROR_CLIENT_ID: randomUUID(),
      MIRROR_CLIENT_SECRET: randomSecret(40),
      MIRROR_ENCRYPTION_KEY: randomBytes(32).toString('base64'),
      MIRROR_SIGNING_KEY: randomBytes(32).toString('base64'),
      LOG_LEVEL: 'silent',
    };
    services = createServices(parseConfig(env), { logger: createLogger({ level: 'silent' }) });
    await seedAccounts(services.pool, [
      ['healthy', 10],
      ['idle', 5],
      ['unlinked', 3],
      ['failing', 3],
      ['stalled', 1],
      ['refused', 3],
    ]);
    app = await buildApp({
      pool: services.pool,
      prisma: services.prisma,
      accounts: services.accounts,
      logger: services.logger,
      operator: { token: operatorToken },
    });
  });
  after(async () => {
    await app?.close();
    await services?.close();
    await db?.drop();
  });

  it('the page groups the accounts, those needing attention first, with a count of each group', async () => {
    const res = await app.inject({ url: '/status', headers: { authorization: `Bearer ${operatorToken}` } });
    assert.equal(res.statusCode, 200);
    const html = res.body;
    const groups = [...html.matchAll(/<tbody id="accounts-(\w+)">/g)].map((m) => m[1]);
    assert.deepEqual(groups, ['attention', 'linked', 'idle', 'unlinked']);
    for (const [group, n] of [
      ['need attention', 7],
      ['linked', 10],
      ['idle', 5],
      ['unlinked', 3],
    ] as const)
      assert.match(html, new RegExp(`class="chip group-[a-z]+" href="#accounts-[a-z]+">${group} ${n}</a>`));
    const statuses = [...html.matchAll(/<tr class="account" data-account="[^"]+" data-status="(\w+)"/g)].map((m) => m[1]);
    assert.equal(statuses.length, 25);
    assert.deepEqual(statuses.slice(0, 3), ['credentials_refused', 'credentials_refused', 'credentials_refused']);
    assert.deepEqual(statuses.slice(-3), ['unlinked', 'unlinked', 'unlinked']);
  });

  it('`mirror status` prints a count per state and one line per account, attention first', async () => {
    const { code, out } = await new Promise<{ code: number; out: string }>((resolve, reject) => {
      const child = spawn(process.execPath, [mirrorBin, 'status'], {
        cwd: tmpdir(),
        env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '', ...env },
        stdio: ['ignore', 'pipe', 'pipe'],
      });
      let text = '';
      child.stdout.on('data', (d: Buffer) => (text += d.toString()));
      child.once('error', reject);
      child.once('exit', (c) => resolve({ code: c ?? 1, out: text }));
    });
    assert.equal(code, 1, 'streams failed');
    const lines = out.trim().split('\n');
    assert.match(lines[0]!, /^25 accounts: 7 need attention \(3 credentials refused, 4 with failed or stalled streams\), 10 linked, 5 idle, 3 unlinked;/);
    assert.ok(lines.length < 40, `one line per account, not ${lines.length}`);
    const rows = lines.filter((l) => /^[0-9a-f]{8} {2}/.test(l));
    assert.equal(rows.length, 25);
    assert.match(rows[0]!, /credentials_refused/);
    assert.match(rows.at(-1)!, /unlinked/);
  });
});
