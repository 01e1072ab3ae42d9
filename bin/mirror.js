#!/usr/bin/env node
// Bootstrap of the `mirror` command: on a fresh clone it installs the npm dependencies and generates
// the Prisma client, then runs the TypeScript CLI (bin/cli.ts) through tsx. Plain JavaScript on
// purpose: it must run before anything is installed. In a release (`npm run build` copies this file
// into dist/bin/, beside the compiled cli.js) it runs the compiled CLI with node alone: nothing is
// installed, generated or compiled at run time.
import { spawnSync } from 'node:child_process';
import { existsSync, statSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

const root = fileURLToPath(new URL('..', import.meta.url));
const mtime = (p) => (existsSync(p) ? statSync(p).mtimeMs : 0);
const release = existsSync(fileURLToPath(new URL('./cli.js', import.meta.url)));

function run(cmd, args, env = process.env) {
  const r = spawnSync(cmd, args, { cwd: root, stdio: ['ignore', 'inherit', 'inherit'], env });
  if (r.status !== 0) {
    console.error(`mirror: \`${cmd} ${args.join(' ')}\` failed (exit ${r.status ?? r.signal}).`);
    process.exit(r.status ?? 1);
  }
}

const installed = `${root}node_modules/.package-lock.json`;
if (!release && mtime(installed) < mtime(`${root}package-lock.json`)) {
  console.error('mirror: installing npm dependencies (npm ci) ...');
  run('npm', ['ci', '--no-audit', '--no-fund', '--loglevel=error']);
}

const generated = `${root}prisma/generated/client.ts`;
if (!release && mtime(generated) < mtime(`${root}prisma/schema.prisma`)) {
  // Prisma's CLI fetches a native schema engine first; `generate` does not need it, so any
  // executable stands in where none can be downloaded.
  const env = { ...process.env };
  env.PRISMA_SCHEMA_ENGINE_BINARY ??= existsSync('/bin/false') ? '/bin/false' : '/usr/bin/false';
  run(process.execPath, [`${root}node_modules/prisma/build/index.js`, 'generate'], { ...env, PRISMA_HIDE_UPDATE_MESSAGE: '1' });
}

// A worker or an API process needs settings that only a process's start can give
// (bin/worker-relaunch.js): started without them, it starts again with them, in a process of its own
// that this one waits for.
if (process.argv[2] === 'worker' || process.argv[2] === 'api') {
  if (process.env.MIRROR_WORKER_RELAUNCHED === '1' && process.channel) {
    // Started by the process below: if that one dies (kill -9), so does this one, at once.
    process.channel.unref();
    process.on('disconnect', () => process.kill(process.pid, 'SIGKILL'));
  } else {
    const { missingSettings } = await import('./worker-relaunch.js');
    const missing = missingSettings(process.execArgv, process.env, process.argv[2]);
    if (missing.nodeArgs.length > 0 || Object.keys(missing.env).length > 0) await relaunch(missing);
  }
}

/** Runs this command again in a child with the missing settings; exits as the child exits. */
async function relaunch(missing) {
  const { spawn } = await import('node:child_process');
  const { constants } = await import('node:os');
  const child = spawn(process.execPath, [...process.execArgv, ...missing.nodeArgs, fileURLToPath(import.meta.url), ...process.argv.slice(2)], {
    stdio: ['inherit', 'inherit', 'inherit', 'ipc'],
    env: { ...process.env, ...missing.env, MIRROR_WORKER_RELAUNCHED: '1' },
    // A process group of its own: a terminal's Ctrl-C reaches it once, through this process.
    detached: true,
  });
  for (const signal of ['SIGINT', 'SIGTERM', 'SIGHUP']) process.on(signal, () => child.kill(signal));
  const [code, signal] = await new Promise((resolve) => {
    child.once('error', (error) => {
      console.error(`mirror: could not start the ${process.argv[2]} process: ${error.message}`);
      resolve([1, null]);
    });
    child.once('exit', (c, s) => resolve([c, s]));
  });
  process.exit(code ?? 128 + (constants.signals[signal] ?? 0));
}

if (release) {
  await import('./cli.js');
} else {
  const { register } = await import('tsx/esm/api');
  register();
  await import('./cli.ts');
}
