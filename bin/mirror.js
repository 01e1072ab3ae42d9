#!/usr/bin/env node
// Bootstrap of the `mirror` command: on a fresh clone it installs the npm dependencies and generates
// the Prisma client, then runs the TypeScript CLI (bin/cli.ts) through tsx. Plain JavaScript on
// purpose: it must run before anything is installed.
import { spawnSync } from 'node:child_process';
import { existsSync, statSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

const root = fileURLToPath(new URL('..', import.meta.url));
const mtime = (p) => (existsSync(p) ? statSync(p).mtimeMs : 0);

function run(cmd, args, env = process.env) {
  const r = spawnSync(cmd, args, { cwd: root, stdio: ['ignore', 'inherit', 'inherit'], env });
  if (r.status !== 0) {
    console.error(`mirror: \`${cmd} ${args.join(' ')}\` failed (exit ${r.status ?? r.signal}).`);
    process.exit(r.status ?? 1);
  }
}

const installed = `${root}node_modules/.package-lock.json`;
if (mtime(installed) < mtime(`${root}package-lock.json`)) {
  console.error('mirror: installing npm dependencies (npm ci) ...');
  run('npm', ['ci', '--no-audit', '--no-fund', '--loglevel=error']);
}

const generated = `${root}prisma/generated/client.ts`;
if (mtime(generated) < mtime(`${root}prisma/schema.prisma`)) {
  // Prisma's CLI fetches a native schema engine first; `generate` does not need it, so any
  // executable stands in where none can be downloaded.
  const env = { ...process.env };
  env.PRISMA_SCHEMA_ENGINE_BINARY ??= existsSync('/bin/false') ? '/bin/false' : '/usr/bin/false';
  run(process.execPath, [`${root}node_modules/prisma/build/index.js`, 'generate'], { ...env, PRISMA_HIDE_UPDATE_MESSAGE: '1' });
}

// A worker's heap holds pages of parsed JSON that die young but outlive scavenges (a page is written
// while the next one is fetched); V8's default growth lets that garbage pile up past 200 MB before a
// full collection. A smaller growth factor collects it sooner. Bench [2] at 200k records, worker peak
// RSS: 442 MB by default, 343 MB with this (worker CPU +20%, pass time +7%; Postgres is the limit).
// `--optimize-for-size` went lower (276-289 MB) but tripled the worker's CPU. MIRROR_WORKER_V8_FLAGS
// replaces the flags ('' for V8's defaults).
if (process.argv[2] === 'worker') {
  const flags = process.env.MIRROR_WORKER_V8_FLAGS ?? '--heap-growing-percent=30';
  if (flags.trim() !== '') (await import('node:v8')).setFlagsFromString(flags);
}

const { register } = await import('tsx/esm/api');
register();
await import('./cli.ts');
