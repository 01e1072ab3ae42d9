// A primary PostgreSQL cluster and a streaming standby of it, started on this machine from the
// server binaries (not the shared server on 5432, which the tests must not reconfigure): for tests
// of reads served by a replica. Each cluster lives in a temporary directory removed on `stop`.
import { spawn } from 'node:child_process';
import { chownSync, existsSync, mkdtempSync, readdirSync, rmSync, appendFileSync, readFileSync, chmodSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { ensureDatabase } from '../../mirror/db/database.ts';
import { migrate } from '../../mirror/db/migrate.ts';

/** The PostgreSQL server binaries: PG_BIN_DIR, else the newest of /usr/lib/postgresql/<version>/bin. */
export function postgresBinDir(): string {
  if (process.env.PG_BIN_DIR) return process.env.PG_BIN_DIR;
  const root = '/usr/lib/postgresql';
  const versions = existsSync(root) ? readdirSync(root).filter((v) => existsSync(join(root, v, 'bin', 'initdb'))) : [];
  versions.sort((a, b) => Number(b) - Number(a));
  if (!versions[0]) throw new Error('No PostgreSQL server binaries under /usr/lib/postgresql/*/bin: install them or set PG_BIN_DIR.');
  return join(root, versions[0], 'bin');
}

/** A free TCP port on 127.0.0.1 (the OS's choice, released at once). */
export async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as { port: number };
      server.close(() => resolve(port));
    });
  });
}

// The server refuses to run as root: as root, the clusters belong to (and run as) the postgres user.
const asUser = (): { uid: number; gid: number } | undefined => {
  if (process.getuid?.() !== 0) return undefined;
  const passwd = readFileSync('/etc/passwd', 'utf8')
    .split('\n')
    .find((l) => l.startsWith('postgres:'));
  if (!passwd) throw new Error('Running as root needs a postgres user to run the test clusters as.');
  const [, , uid, gid] = passwd.split(':');
  return { uid: Number(uid), gid: Number(gid) };
};

function run(bin: string, args: string[], env: Record<string, string> = {}): Promise<string> {
  const user = asUser();
  return new Promise((resolve, reject) => {
    const child = spawn(join(postgresBinDir(), bin), args, {
      ...(user ?? {}),
      env: { ...process.env, ...env, LC_ALL: 'C' },
      stdio: ['ignore', 'pipe', 'pipe'],
      cwd: tmpdir(),
    });
    let out = '';
    child.stdout.on('data', (d: Buffer) => (out += d.toString()));
    child.stderr.on('data', (d: Buffer) => (out += d.toString()));
    child.once('error', reject);
    child.once('close', (code) => (code === 0 ? resolve(out) : reject(new Error(`${bin} ${args.join(' ')} exited ${code}: ${out.slice(-2000)}`))));
  });
}

/** One cluster: its data directory, port and URL of its `mirror` database. */
export interface ClusterNode {
  dir: string;
  port: number;
  /** postgresql://postgres@127.0.0.1:<port>/mirror */
  url: string;
  start(): Promise<void>;
  /** Stops the server (fast shutdown: connections are cut). */
  stop(): Promise<void>;
  running: boolean;
}

function node(dir: string, port: number, database: string): ClusterNode {
  const self: ClusterNode = {
    dir,
    port,
    url: `postgresql://postgres@127.0.0.1:${port}/${database}`,
    running: false,
    async start() {
      await run('pg_ctl', ['start', '-w', '-t', '60', '-D', dir, '-l', join(dir, 'server.log')]);
      self.running = true;
    },
    async stop() {
      if (!self.running) return;
      await run('pg_ctl', ['stop', '-w', '-t', '60', '-m', 'fast', '-D', dir]);
      self.running = false;
    },
  };
  return self;
}

export interface ReplicaCluster {
  primary: ClusterNode;
  standby: ClusterNode;
  /** The standby's replay delay of commits (recovery_min_apply_delay), applied by a reload. */
  setApplyDelay(ms: number): Promise<void>;
  /** Resolves once the standby has replayed everything the primary has written so far. */
  caughtUp(timeoutMs?: number): Promise<void>;
  /** Stops both servers and removes their directories. */
  stop(): Promise<void>;
}

const settings = (lines: Record<string, string | number>): string =>
  `\n${Object.entries(lines)
    .map(([k, v]) => `${k} = ${typeof v === 'number' ? v : `'${v}'`}`)
    .join('\n')}\n`;

/**
 * Starts a primary (wal_level replica, replication trusted from 127.0.0.1) with a migrated `mirror`
 * database, and a standby made by `pg_basebackup -R` streaming from it, each on a free port.
 * `applyDelayMs` delays the standby's replay of each commit (recovery_min_apply_delay).
 */
export async function startReplicaCluster(options: { applyDelayMs?: number; database?: string } = {}): Promise<ReplicaCluster> {
  const database = options.database ?? 'mirror';
  const root = mkdtempSync(join(tmpdir(), 'mirror-replicas-'));
  const user = asUser();
  // The postgres user must reach the directory (mkdtemp makes it 0700, owned by root).
  if (user) chownSync(root, user.uid, user.gid);
  chmodSync(root, 0o700);
  const primaryDir = join(root, 'primary');
  const standbyDir = join(root, 'standby');
  const [primaryPort, standbyPort] = [await freePort(), await freePort()];
  const primary = node(primaryDir, primaryPort, database);
  const standby = node(standbyDir, standbyPort, database);
  const cluster: ReplicaCluster = {
    primary,
    standby,
    async setApplyDelay(ms) {
      const c = new pg.Client({ connectionString: standby.url.replace(/\/[^/]*$/, '/postgres') });
      await c.connect();
      try {
        await c.query(`ALTER SYSTEM SET recovery_min_apply_delay = '${Math.max(0, Math.round(ms))}ms'`);
        await c.query('SELECT pg_reload_conf()');
      } finally {
        await c.end();
      }
    },
    async caughtUp(timeoutMs = 30_000) {
      const p = new pg.Client({ connectionString: primary.url });
      const s = new pg.Client({ connectionString: standby.url });
      await p.connect();
      await s.connect();
      try {
        const { rows } = await p.query<{ lsn: string }>('SELECT pg_current_wal_lsn()::text AS lsn');
        const until = Date.now() + timeoutMs;
        for (;;) {
          const r = await s.query<{ ok: boolean }>('SELECT pg_last_wal_replay_lsn() >= $1::pg_lsn AS ok', [rows[0]!.lsn]);
          if (r.rows[0]!.ok) return;
          if (Date.now() > until) throw new Error(`the standby did not replay ${rows[0]!.lsn} within ${timeoutMs} ms`);
          await new Promise((resolve) => setTimeout(resolve, 20));
        }
      } finally {
        await Promise.allSettled([p.end(), s.end()]);
      }
    },
    async stop() {
      await Promise.allSettled([standby.stop(), primary.stop()]);
      rmSync(root, { recursive: true, force: true });
    },
  };
  try {
    await run('initdb', ['-D', primaryDir, '-U', 'postgres', '--auth=trust', '-E', 'UTF8', '--no-sync', '--no-instructions']);
    // initdb's pg_hba.conf trusts local connections, replication ones from 127.0.0.1 included.
    appendFileSync(
      join(primaryDir, 'postgresql.conf'),
      settings({
        port: primaryPort,
        listen_addresses: '127.0.0.1',
        unix_socket_directories: root,
        wal_level: 'replica',
        max_wal_senders: 4,
        // A standby stopped for a while finds the WAL it missed still on the primary.
        wal_keep_size: '512MB',
        hot_standby: 'on',
        // Test clusters: nothing needs to survive a power loss.
        fsync: 'off',
        full_page_writes: 'off',
        shared_buffers: '32MB',
        max_connections: 60,
      }),
    );
    await primary.start();
    await ensureDatabase(primary.url);
    // The mirror's schema, as every other test prepares its database.
    await migrate(primary.url);
    await run('pg_basebackup', [
      '-h',
      '127.0.0.1',
      '-p',
      String(primaryPort),
      '-U',
      'postgres',
      '-D',
      standbyDir,
      '-R',
      '-X',
      'stream',
      '-c',
      'fast',
      '--no-sync',
    ]);
    appendFileSync(
      join(standbyDir, 'postgresql.auto.conf'),
      settings({
        port: standbyPort,
        // Queries on the standby are not cancelled by the primary's vacuum.
        hot_standby_feedback: 'on',
        recovery_min_apply_delay: `${options.applyDelayMs ?? 0}ms`,
      }),
    );
    await standby.start();
    await cluster.caughtUp();
    return cluster;
  } catch (error) {
    await cluster.stop();
    throw error;
  }
}
