// A release runs with production dependencies only (`npm ci --omit=dev`): every package the processes'
// sources import must be a dependency, and the development tools (tsx, typescript, the Prisma CLI,
// Temporal's test server) must not be.
import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import { builtinModules } from 'node:module';
import { join } from 'node:path';
import { test } from 'node:test';
import { projectRoot } from '../../../bin/setup-steps.ts';

const pkg = JSON.parse(readFileSync(join(projectRoot, 'package.json'), 'utf8')) as { dependencies: Record<string, string> };
/** The folders a release's processes run from (bench/ and test/ are development tools). */
const runtimeDirs = ['bin', 'lib', 'api', 'connectors', 'mirror', 'activities', 'workflows', 'sandbox'];

/** The package a bare import names (`@scope/name/sub` -> `@scope/name`). */
function packageOf(specifier: string): string {
  const parts = specifier.split('/');
  return specifier.startsWith('@') ? parts.slice(0, 2).join('/') : parts[0]!;
}

/** Packages imported for their values (type-only imports vanish from the JavaScript). */
function valueImports(source: string): string[] {
  const out: string[] = [];
  const statement = /^\s*(?:import|export)\s+(?!type\s)(?:[^'"]*?\sfrom\s+)?['"]([^'"./][^'"]*)['"]/gm;
  const dynamic = /\bimport\(\s*['"]([^'"./][^'"]*)['"]\s*\)/g;
  for (const re of [statement, dynamic]) for (const m of source.matchAll(re)) out.push(m[1]!);
  return out;
}

test('the development tools are not dependencies of a release', () => {
  for (const tool of ['tsx', 'typescript', 'prisma', '@temporalio/testing']) assert.equal(pkg.dependencies[tool], undefined, `${tool} is a devDependency`);
});

test('every package the processes import at run time is a production dependency', () => {
  const builtins = new Set(builtinModules);
  const missing: string[] = [];
  for (const dir of runtimeDirs) {
    for (const entry of readdirSync(join(projectRoot, dir), { recursive: true, withFileTypes: true })) {
      if (!entry.isFile() || !/\.(ts|js)$/.test(entry.name) || entry.name.endsWith('.d.ts')) continue;
      const path = join(entry.parentPath, entry.name);
      for (const specifier of valueImports(readFileSync(path, 'utf8'))) {
        if (specifier.startsWith('node:') || builtins.has(specifier)) continue;
        const name = packageOf(specifier);
        if (!pkg.dependencies[name]) missing.push(`${path.slice(projectRoot.length)} imports ${name}`);
      }
    }
  }
  // The bootstrap loads tsx only when it runs from the sources, never in a release.
  assert.deepEqual(
    missing.filter((m) => m !== 'bin/mirror.js imports tsx'),
    [],
  );
});
