// `npm run build`: the release. Every process's JavaScript (tsc into dist/, relative imports rewritten
// to .js), the Prisma client compiled with it, the SQL migrations and package.json beside it, the
// plain-JavaScript bootstrap, and the workflow code bundled once now, as Temporal advises for
// production workers (a prebuilt bundle: no webpack in a worker's start). A release runs with
// `node dist/bin/mirror.js <command>` and production dependencies only (`npm ci --omit=dev`).
import { spawnSync } from 'node:child_process';
import { cpSync, existsSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { prebuiltBundleName, workflowsPath } from '../bin/workflow-bundle.ts';

const root = new URL('..', import.meta.url).pathname;
const out = join(root, 'dist');
const mtime = (p: string) => (existsSync(p) ? statSync(p).mtimeMs : 0);

function run(what: string, args: string[], env: NodeJS.ProcessEnv = process.env): void {
  const r = spawnSync(process.execPath, args, { cwd: root, stdio: 'inherit', env });
  if (r.status !== 0) {
    console.error(`build: ${what} failed (exit ${r.status ?? r.signal}).`);
    process.exit(1);
  }
}

const started = Date.now();
// The Prisma client is generated, not kept in git; its CLI needs any executable as the schema engine offline.
if (mtime(join(root, 'prisma/generated/client.ts')) < mtime(join(root, 'prisma/schema.prisma'))) {
  run('prisma generate', [join(root, 'node_modules/prisma/build/index.js'), 'generate'], {
    ...process.env,
    PRISMA_SCHEMA_ENGINE_BINARY: process.env.PRISMA_SCHEMA_ENGINE_BINARY ?? '/bin/false',
    PRISMA_HIDE_UPDATE_MESSAGE: '1',
  });
}
rmSync(out, { recursive: true, force: true });
run('tsc', [join(root, 'node_modules/typescript/bin/tsc'), '-p', join(root, 'tsconfig.build.json')]);
// The bootstrap (plain JavaScript), and what the compiled code reads beside itself: package.json (the
// release's version; its "type": "module") and the migrations.
for (const file of ['bin/mirror.js', 'bin/worker-relaunch.js', 'package.json']) cpSync(join(root, file), join(out, file));
cpSync(join(root, 'prisma/migrations'), join(out, 'prisma/migrations'), { recursive: true });
const { bundleWorkflowCode, DefaultLogger } = await import('@temporalio/worker');
const { code } = await bundleWorkflowCode({ workflowsPath, logger: new DefaultLogger('WARN') });
writeFileSync(join(out, prebuiltBundleName), code);
console.log(`build: dist/ in ${((Date.now() - started) / 1000).toFixed(1)} s (node dist/bin/mirror.js <command>)`);
