// The workflow code bundle, built once per version of the source and cached: bundling (webpack) in
// every worker process would cost each one seconds of start-up and a hundred-odd MB of memory it
// never gives back. The bundle is built in a child process, so its memory goes with it. A release
// (`npm run build`) carries its bundle, built with it: its workers use that one.
import { createHash } from 'node:crypto';
import { execFile } from 'node:child_process';
import { existsSync, mkdirSync, readdirSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { promisify } from 'node:util';

const root = new URL('..', import.meta.url).pathname;
export const workflowsPath = join(root, 'workflows/index.ts');
const cacheDir = join(root, 'node_modules/.cache/workflow-bundles');
/** The release's bundle, beside its compiled code (dist/). */
export const prebuiltBundleName = 'workflows.bundle.js';

/** Every source the workflows could import, and the lock file (the SDK's version). */
function sourceHash(): string {
  const hash = createHash('sha256');
  for (const dir of ['workflows', 'lib', 'activities', 'connectors', 'mirror']) {
    for (const entry of readdirSync(join(root, dir), { recursive: true, withFileTypes: true })) {
      if (!entry.isFile() || !entry.name.endsWith('.ts')) continue;
      const path = join(entry.parentPath, entry.name);
      hash.update(path.slice(root.length)).update('\0').update(readFileSync(path)).update('\0');
    }
  }
  hash.update(readFileSync(join(root, 'package-lock.json')));
  return hash.digest('hex').slice(0, 16);
}

/** The path of the bundle of the current sources: built now (in a child process) if missing. */
export async function workflowBundlePath(): Promise<string> {
  const prebuilt = join(root, prebuiltBundleName);
  if (existsSync(prebuilt)) return prebuilt;
  const path = join(cacheDir, `workflows-${sourceHash()}.js`);
  if (existsSync(path)) return path;
  mkdirSync(cacheDir, { recursive: true });
  const partial = `${path}.${process.pid}.${Date.now()}.partial`;
  await promisify(execFile)(process.execPath, ['--import', 'tsx', new URL(import.meta.url).pathname, partial], { cwd: root, maxBuffer: 16 * 2 ** 20 });
  // Concurrent builders (parallel test files) each write their own file; the last rename wins, and
  // every one of them is the same bundle.
  renameSync(partial, path);
  return path;
}

async function buildTo(out: string): Promise<void> {
  const { bundleWorkflowCode } = await import('@temporalio/worker');
  const { code } = await bundleWorkflowCode({ workflowsPath, ignoreModules: [], logger: undefined });
  writeFileSync(out, code);
}

if (process.argv[1] === new URL(import.meta.url).pathname && process.argv[2]) {
  await buildTo(process.argv[2]);
}
