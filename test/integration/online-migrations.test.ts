// Online migrations: every migration, applied to a mirror of 200k records while the API
// serves it, fails no read. In an upgrade `mirror migrate` runs while the release before it still
// serves; its API is the one that must not notice. So the reads during migration M go to the API of
// the release before M: the parent of the commit that added M, or this checkout's HEAD for a migration
// not committed yet (each such release exported with `git archive` into a temporary folder, sharing
// this checkout's node_modules, with a Prisma client generated from its own schema, and loaded in this process). One database
// is migrated up to the first migration tested, loaded once with 200k records of one account, then the
// migrations are applied one by one while readers send single GETs and list pages without pause; each
// migration's duration and the reads' max latency during it are printed, and any non-2xx answer or
// error fails the test. At the end today's API serves the fully migrated database too.
//
// Where it starts: the API of every release since 20261125010000_linked_account_owner authenticates
// through Prisma, whose model of linked_accounts selects the owner columns that migration added; the
// account this test loads is registered by the first release that serves, which needs them. Before it the records table
// exists (from the init on), but an upgrade from those releases is history: their migrations are
// applied in the field and never edited (checksums). What a new migration must not do is what the lint
// test (test/unit/mirror/migration-lint.test.ts) forbids.
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { existsSync, mkdtempSync, rmSync, symlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { setTimeout as sleep } from 'node:timers/promises';
import { after, before, describe, it } from 'node:test';
import type { Services } from '../../bin/services.ts';
import { generateKey, randomSecret } from '../../lib/crypto.ts';
import { createLogger } from '../../lib/logger.ts';
import { migrate, readMigrations } from '../../mirror/db/migrate.ts';
import { createTestDatabase, type TestDatabase } from '../helpers/database.ts';

/** The first migration applied under read load: see the header for why the earlier ones are not. */
export const firstOnlineMigration = '20261125030000_cross_project_lists';

const records = 200_000;
const perPage = 100;
const readers = 4;
/** Reads go on this long after each migration ends. */
const afterMs = 1000;

const root = fileURLToPath(new URL('../../', import.meta.url));
const git = (...args: string[]) => execFileSync('git', ['-C', root, ...args], { encoding: 'utf8' }).trim();

/**
 * The commit whose code serves while `name` is applied: the release before the first commit that added
 * it or any later migration (migrations are applied in name order, but may be committed in another: a
 * release that already holds a later migration's code would read what that migration makes), else HEAD.
 */
function releaseBefore(name: string, all: readonly string[]): string {
  const added = all
    .filter((n) => n >= name)
    .map((n) => git('log', '--format=%H', '--diff-filter=A', '-1', '--', `prisma/migrations/${n}/migration.sql`))
    .filter((c) => c !== '');
  if (added.length === 0) return git('rev-parse', 'HEAD');
  // The earliest of them: the one with the fewest ancestors (the history is linear).
  const depth = (c: string) => Number(git('rev-list', '--count', c));
  const first = added.reduce((a, b) => (depth(b) < depth(a) ? b : a));
  return git('rev-parse', `${first}^`);
}

interface Api {
  url: string;
  close(): Promise<void>;
}

type Modules = {
  app: typeof import('../../api/app.ts');
  services: typeof import('../../bin/services.ts');
  config: typeof import('../../lib/config.ts');
};

/** Today's API (dir undefined) or a release's, exported into `dir`, on its own services and port. */
async function startApi(env: Record<string, string>, dir?: string): Promise<Api> {
  const load = async <T>(path: string): Promise<T> => (await import(pathToFileURL(join(dir ?? root, path)).href)) as T;
  const m: Modules = {
    app: await load('api/app.ts'),
    services: await load('bin/services.ts'),
    config: await load('lib/config.ts'),
  };
  const config = m.config.parseConfig(env);
  const services = m.services.createServices(config, { logger: createLogger({ level: config.LOG_LEVEL }), poolSize: 4 });
  const app = await m.app.buildApp({
    pool: services.pool,
    prisma: services.prisma,
    accounts: services.accounts,
    logger: services.logger,
    upstream: { client: services.upstream, target: m.services.upstreamTarget(config) },
  });
  const url = (await app.listen({ port: 0, host: '127.0.0.1' })).replace('localhost', '127.0.0.1');
  return {
    url,
    async close() {
      await app.close();
      await services.close();
    },
  };
}

/** A release's files as committed (git archive: git's state is untouched), runnable without installing anything. */
function exportRelease(commit: string): { dir: string; remove(): void } {
  const dir = mkdtempSync(join(tmpdir(), `mirror-release-${commit.slice(0, 8)}-`));
  execFileSync('sh', ['-c', `git -C "${root}" archive ${commit} | tar -x -C "${dir}"`]);
  // A symlink, read only by `import`: never run `bin/mirror.js` in such a folder (it may `npm ci`, which
  // would empty this checkout's node_modules through the link; the upgrade drill hard-links a copy).
  symlinkSync(join(root, 'node_modules'), join(dir, 'node_modules'));
  // Not in git: the release's own Prisma client, generated from its schema (a model selects every
  // column it names, so a client of a later schema fails on a database the release ran against).
  execFileSync(process.execPath, [join(root, 'node_modules/prisma/build/index.js'), 'generate', '--schema', join(dir, 'prisma/schema.prisma')], {
    cwd: dir,
    stdio: 'ignore',
    env: { ...process.env, PRISMA_SCHEMA_ENGINE_BINARY: existsSync('/bin/false') ? '/bin/false' : '/usr/bin/false', PRISMA_HIDE_UPDATE_MESSAGE: '1' },
  });
  return { dir, remove: () => rmSync(dir, { recursive: true, force: true }) };
}

interface Read {
  at: number;
  ms: number;
  ok: boolean;
}

/** The releases before each migration come from git's history: a shallow clone (or an export without .git) has none. */
function historyMissing(): string | false {
  try {
    return git('rev-parse', '--is-shallow-repository') === 'true'
      ? 'a shallow clone: the releases before each migration are not in its history (git fetch --unshallow)'
      : false;
  } catch {
    return 'no git history: the releases before each migration are exported from it';
  }
}

describe('online migrations', { timeout: 180_000, skip: historyMissing() }, () => {
  let db: TestDatabase;
  let pending: string[];
  let env: Record<string, string>;
  let headers: Record<string, string>;
  const apis = new Map<string, Api>();
  const exports: { remove(): void }[] = [];

  before(async () => {
    const names = (await readMigrations()).map((m) => m.name);
    assert.ok(names.includes(firstOnlineMigration), `${firstOnlineMigration} is one of the migrations`);
    pending = names.filter((n) => n >= firstOnlineMigration);
    db = await createTestDatabase('mirror_online', { migrate: false });
    const upTo = await migrate(db.url, { before: firstOnlineMigration });
    assert.equal(upTo.applied.length, names.length - pending.length);

    // Every API's settings, its upstream a port nothing listens on: every read must come from the mirror.
    const clientId = randomUUID();
    const clientSecret = randomSecret(40);
    const accountToken = randomSecret(40);
    env = {
      DATABASE_URL: db.url,
      UPSTREAM_BASE_URL: 'http://127.0.0.1:9',
      UPSTREAM_CLIENT_ID: randomUUID(),
      UPSTREAM_CLIENT_SECRET: randomSecret(40),
      MIRROR_CLIENT_ID: clientId,
      MIRROR_CLIENT_SECRET: clientSecret,
      MIRROR_ENCRYPTION_KEY: generateKey(),
      MIRROR_SIGNING_KEY: generateKey(),
      LOG_LEVEL: process.env.LOG_LEVEL ?? 'silent',
    };
    headers = { 'api-version': '2021-11-21', 'client-id': clientId, 'client-secret': clientSecret, 'account-token': accountToken };
    // The client and the account are registered by the release that serves first: today's code would
    // name columns the database has not got yet.
    const firstRelease = exportRelease(releaseBefore(pending[0]!, pending));
    exports.push(firstRelease);
    const load = async <T>(path: string): Promise<T> => (await import(pathToFileURL(join(firstRelease.dir, path)).href)) as T;
    const old = {
      services: await load<typeof import('../../bin/services.ts')>('bin/services.ts'),
      config: await load<typeof import('../../lib/config.ts')>('lib/config.ts'),
      auth: await load<{ upsertApiClient(prisma: unknown, id: string, secret: string): Promise<void> }>('api/auth.ts'),
    };
    const services: Services = old.services.createServices(old.config.parseConfig(env), { logger: createLogger({ level: 'silent' }), poolSize: 2 });
    try {
      const { pool, prisma, accounts } = services;
      await old.auth.upsertApiClient(prisma, clientId, clientSecret);
      const account = await accounts.register({ referenceId: 'online', accountToken, sourceSystem: { slug: 'buildpro', name: 'BuildPro' } });
      // What a completed full pass of one account-scoped list leaves: its stream, fresh, and its records.
      const t0 = performance.now();
      await pool.query(
        `INSERT INTO streams (account_id, resource, scope, state, generation, mode, pages, records, last_fresh_at)
         VALUES ($1, 'projects', '', 'synced', 1, 'full', $2, $3, now())`,
        [account.id, records / perPage, records],
      );
      await pool.query(
        `INSERT INTO records (account_id, resource, scope, id, source_id, data, hash, source_create_time, source_update_time, generation, ordinal)
         SELECT $1, 'projects', '', 'p-' || g, 's-' || g,
                jsonb_build_object('id', 'p-' || g, 'name', 'Project ' || g, 'number', g::text, 'status', 'active',
                                   'amount', g * 10, 'type', 'commercial', 'start_date', '2026-01-01',
                                   'address', jsonb_build_object('line1', g || ' Main St', 'city', 'Springfield'),
                                   'created_at', '2026-01-01T00:00:00Z', 'modified_at', '2026-01-02T00:00:00Z'),
                md5(g::text)::uuid, now(), now(), 1, g
           FROM generate_series(1, $2::int) AS g`,
        [account.id, records],
      );
      await pool.query('ANALYZE records');
      console.log(`loaded ${records} records in ${Math.round(performance.now() - t0)} ms`);
    } finally {
      await services.close();
    }
  });

  after(async () => {
    for (const api of apis.values()) await api.close().catch(() => undefined);
    for (const e of exports) e.remove();
    await db?.drop();
  });

  /** The API of a release (HEAD's files for HEAD too: this checkout's own may be ahead of it). */
  async function apiOf(commit: string): Promise<Api> {
    let api = apis.get(commit);
    if (!api) {
      const e = exportRelease(commit);
      exports.push(e);
      api = await startApi(env, e.dir);
      apis.set(commit, api);
    }
    return api;
  }

  it("applies each migration with zero failed reads on the release before it, then serves today's API", async () => {
    const reads: Read[] = [];
    const failures: string[] = [];
    let stop = false;
    let target = await apiOf(releaseBefore(pending[0]!, pending));
    const pages = records / perPage;
    const one = async (path: string, check: (body: { data?: unknown[]; id?: unknown }) => boolean) => {
      const start = performance.now();
      let ok = false;
      let why = '';
      try {
        const res = await fetch(`${target.url}${path}`, { headers });
        const text = await res.text();
        ok = res.status === 200 && check(JSON.parse(text) as { data?: unknown[]; id?: unknown });
        if (!ok) why = `${res.status} ${text.slice(0, 200)}`;
      } catch (error) {
        // fetch says only "fetch failed"; its cause says how (a refused or reset connection, a timeout).
        const cause = error instanceof Error && error.cause instanceof Error ? error.cause : undefined;
        why = error instanceof Error ? error.message : String(error);
        if (cause) why += ` (${(cause as NodeJS.ErrnoException).code ?? cause.name}: ${cause.message})`;
      }
      const end = performance.now();
      reads.push({ at: end, ms: end - start, ok });
      if (!ok && failures.length < 20) failures.push(`${path}: ${why}`);
    };
    const reader = async (n: number) => {
      for (let i = 0; !stop; i++) {
        const k = 1 + Math.floor(Math.random() * records);
        if ((i + n) % 2 === 0) await one(`/projects/p-${k}`, (b) => b.id === `p-${k}`);
        else
          await one(`/projects?page=${1 + Math.floor(Math.random() * pages)}&per_page=${perPage}`, (b) => Array.isArray(b.data) && b.data.length === perPage);
      }
    };
    const max = (xs: Read[]) => (xs.length === 0 ? 0 : Math.round(Math.max(...xs.map((r) => r.ms))));
    const loops = Array.from({ length: readers }, (_, n) => reader(n));
    const lines: string[] = [];
    try {
      // Reads are steady before the first migration: the baseline its latencies compare with.
      const warm = performance.now();
      await sleep(afterMs);
      const baseline = reads.filter((r) => r.at >= warm);
      lines.push(`baseline: ${baseline.length} reads in ${afterMs} ms, max ${max(baseline)} ms`);
      for (const [i, name] of pending.entries()) {
        const release = releaseBefore(name, pending);
        target = await apiOf(release);
        const next = pending[i + 1];
        const t0 = performance.now();
        const result = await migrate(db.url, next === undefined ? {} : { before: next });
        const t1 = performance.now();
        assert.deepEqual(result.applied, [name]);
        await sleep(afterMs);
        const during = reads.filter((r) => r.at >= t0 && r.at - r.ms <= t1);
        const later = reads.filter((r) => r.at > t1);
        lines.push(
          `${name} (served by ${release.slice(0, 8)}): ${Math.round(t1 - t0)} ms; reads during it ${during.length} (max ${max(during)} ms), ` +
            `in the ${afterMs} ms after ${later.length} (max ${max(later)} ms), failed so far ${reads.filter((r) => !r.ok).length}`,
        );
      }
      // The upgrade's second half: today's API on the migrated database.
      const today = await startApi(env);
      apis.set('today', today);
      target = today;
      const t2 = performance.now();
      await sleep(afterMs);
      const todays = reads.filter((r) => r.at > t2);
      lines.push(`today's API after every migration: ${todays.length} reads (max ${max(todays)} ms)`);
      assert.ok(todays.length > 0, "today's API was read");
    } finally {
      stop = true;
      await Promise.all(loops);
      console.log(lines.join('\n'));
      if (failures.length > 0) console.log(`failed reads (first ${failures.length}):\n${failures.join('\n')}`);
    }
    assert.ok(reads.length > 100, `the readers read (${reads.length})`);
    assert.deepEqual(failures, [], 'no read failed while the migrations ran');
  });
});
