// Exports of the product code that nothing imports (`npm run lint` runs this; it fails on any).
// Read with TypeScript's parser: every import, re-export and `import()` of every TypeScript and
// JavaScript file of the repository (tests, the bench and scripts included) counts as a use of the
// names it takes; an `import * as` or an `import()` whose names are not spelled out uses them all.
// A name used only inside its own module is not exported. The entry points whose exports Temporal
// takes by name (the workflows' and activities' index modules) are uses of themselves.
//   node --import tsx scripts/unused-exports.ts      (exit 1 and the list when there is one)
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, join, relative } from 'node:path';
import ts from 'typescript';

/** Folders whose exports must each be used somewhere. */
const productFolders = ['activities', 'api', 'bin', 'connectors', 'lib', 'mirror', 'sandbox', 'workflows'];
/** Folders read for uses. */
const readFolders = [...productFolders, 'test', 'bench', 'scripts'];
/** Modules whose exports are used by name from outside the code (Temporal's workflow bundle and worker). */
const entryModules = new Set(['workflows/index.ts', 'activities/index.ts']);
const skip = new Set(['node_modules', 'generated', 'histories', 'dist', '.data']);

function files(root: string, dir: string): string[] {
  const full = join(root, dir);
  if (!existsSync(full)) return [];
  return readdirSync(full, { withFileTypes: true }).flatMap((e) => {
    if (skip.has(e.name)) return [];
    const path = join(dir, e.name);
    if (e.isDirectory()) return files(root, path);
    return /\.(ts|js|mjs)$/.test(e.name) && !e.name.endsWith('.d.ts') ? [path] : [];
  });
}

/** `spec` imported from `from`, as a path relative to the root (undefined: a package). */
function resolve(root: string, from: string, spec: string): string | undefined {
  if (!spec.startsWith('.')) return undefined;
  const path = join(dirname(from), spec);
  for (const candidate of [path, path.replace(/\.js$/, '.ts'), `${path}.ts`, join(path, 'index.ts')]) {
    if (existsSync(join(root, candidate)) && statSync(join(root, candidate)).isFile()) return candidate;
  }
  return undefined;
}

const ALL = '*';

/** The exports of a module that nothing imports, `file: name` each, in order. */
export function unusedExports(root: string): string[] {
  const exported = new Map<string, Set<string>>();
  const used = new Map<string, Set<string>>();
  const use = (file: string | undefined, name: string) => {
    if (!file) return;
    let names = used.get(file);
    if (!names) used.set(file, (names = new Set()));
    names.add(name);
  };
  for (const file of readFolders.flatMap((d) => files(root, d))) {
    const source = ts.createSourceFile(file, readFileSync(join(root, file), 'utf8'), ts.ScriptTarget.Latest, true);
    const own = new Set<string>();
    const product = productFolders.some((d) => file.startsWith(`${d}/`)) && file.endsWith('.ts');
    const visit = (node: ts.Node) => {
      if (ts.isImportDeclaration(node) && ts.isStringLiteral(node.moduleSpecifier)) {
        const target = resolve(root, file, node.moduleSpecifier.text);
        const clause = node.importClause;
        if (!clause) use(target, ALL);
        else {
          if (clause.name) use(target, 'default');
          const bindings = clause.namedBindings;
          if (bindings && ts.isNamespaceImport(bindings)) use(target, ALL);
          if (bindings && ts.isNamedImports(bindings)) for (const e of bindings.elements) use(target, (e.propertyName ?? e.name).text);
        }
      } else if (ts.isExportDeclaration(node)) {
        const target = node.moduleSpecifier && ts.isStringLiteral(node.moduleSpecifier) ? resolve(root, file, node.moduleSpecifier.text) : undefined;
        if (!node.exportClause) use(target, ALL);
        else if (ts.isNamedExports(node.exportClause)) {
          for (const e of node.exportClause.elements) {
            if (target) use(target, (e.propertyName ?? e.name).text);
            own.add(e.name.text);
          }
        } else own.add(node.exportClause.name.text);
      } else if (ts.isCallExpression(node) && node.expression.kind === ts.SyntaxKind.ImportKeyword) {
        const [arg] = node.arguments;
        const target = arg && ts.isStringLiteral(arg) ? resolve(root, file, arg.text) : undefined;
        // `const { a, b } = await import('./x.ts')`: a and b; anything else: the whole module.
        const awaited = ts.isAwaitExpression(node.parent) ? node.parent : undefined;
        const declaration = awaited && ts.isVariableDeclaration(awaited.parent) ? awaited.parent : undefined;
        if (declaration && ts.isObjectBindingPattern(declaration.name)) {
          for (const e of declaration.name.elements) {
            const name = e.propertyName ?? e.name;
            if (ts.isIdentifier(name)) use(target, name.text);
            else use(target, ALL);
          }
        } else use(target, ALL);
      } else if (ts.isExportAssignment(node)) own.add('default');
      else if (ts.canHaveModifiers(node) && ts.getModifiers(node)?.some((m) => m.kind === ts.SyntaxKind.ExportKeyword)) {
        const isDefault = ts.getModifiers(node)?.some((m) => m.kind === ts.SyntaxKind.DefaultKeyword);
        if (isDefault) own.add('default');
        else if (ts.isVariableStatement(node)) {
          for (const d of node.declarationList.declarations) if (ts.isIdentifier(d.name)) own.add(d.name.text);
        } else if ('name' in node && node.name && ts.isIdentifier(node.name)) own.add(node.name.text);
      }
      ts.forEachChild(node, visit);
    };
    visit(source);
    if (product && !entryModules.has(file)) exported.set(file, own);
  }
  const unused: string[] = [];
  for (const [file, names] of [...exported].sort(([a], [b]) => a.localeCompare(b))) {
    const taken = used.get(file);
    if (taken?.has(ALL)) continue;
    for (const name of names) if (!taken?.has(name)) unused.push(`${file}: ${name}`);
  }
  return unused;
}

if (import.meta.filename === process.argv[1]) {
  const root = process.argv[2] ?? join(import.meta.dirname, '..');
  const unused = unusedExports(root);
  if (unused.length > 0) {
    console.error(`${unused.length} exports that nothing imports (remove the export, or the code if nothing uses it):`);
    for (const u of unused) console.error(`  ${relative('.', join(root, u.split(':')[0]!))}:${u.slice(u.indexOf(':') + 1)}`);
    process.exitCode = 1;
  }
}
