// Functions over a length in the product code (not tests, the bench or scripts), measured with
// TypeScript's parser: every function, method, constructor, accessor and arrow function, from its
// first line to its last (a nested function counts on its own, and inside its parent too).
//   node --import tsx scripts/long-functions.ts [--over 100] [--list]
// Prints the count; with --list, each function with its length, longest first.
import { readdirSync, readFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import { parseArgs } from 'node:util';
import ts from 'typescript';

/** The folders of the product code. */
export const productFolders = ['activities', 'api', 'bin', 'connectors', 'lib', 'mirror', 'sandbox', 'workflows'];

export interface LongFunction {
  file: string;
  name: string;
  line: number;
  lines: number;
}

function sourceFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) => {
    const path = join(dir, e.name);
    if (e.isDirectory()) return sourceFiles(path);
    return e.isFile() && e.name.endsWith('.ts') && !e.name.endsWith('.d.ts') ? [path] : [];
  });
}

function nameOf(node: ts.Node, source: ts.SourceFile): string {
  if ((ts.isFunctionDeclaration(node) || ts.isMethodDeclaration(node) || ts.isGetAccessor(node) || ts.isSetAccessor(node)) && node.name) {
    const owner = ts.isClassLike(node.parent) && node.parent.name ? `${node.parent.name.text}.` : '';
    return owner + node.name.getText(source);
  }
  if (ts.isConstructorDeclaration(node)) return `${ts.isClassLike(node.parent) && node.parent.name ? node.parent.name.text : '(class)'}.constructor`;
  const parent = node.parent;
  if (ts.isVariableDeclaration(parent) || ts.isPropertyAssignment(parent) || ts.isPropertyDeclaration(parent)) return parent.name.getText(source);
  if (ts.isCallExpression(parent)) return `(callback of ${parent.expression.getText(source).slice(0, 40)})`;
  return '(anonymous)';
}

/** Every function of the file longer than `over` lines. */
export function longFunctions(file: string, text: string, over: number): LongFunction[] {
  const source = ts.createSourceFile(file, text, ts.ScriptTarget.Latest, true);
  const found: LongFunction[] = [];
  const visit = (node: ts.Node) => {
    if (ts.isFunctionLike(node) && 'body' in node && node.body) {
      const first = source.getLineAndCharacterOfPosition(node.getStart(source)).line;
      const last = source.getLineAndCharacterOfPosition(node.getEnd()).line;
      const lines = last - first + 1;
      if (lines > over) found.push({ file, name: nameOf(node, source), line: first + 1, lines });
    }
    ts.forEachChild(node, visit);
  };
  visit(source);
  return found;
}

/** The product code's functions over `over` lines, longest first. */
export function productLongFunctions(root: string, over: number): LongFunction[] {
  return productFolders
    .flatMap((folder) => sourceFiles(join(root, folder)))
    .flatMap((path) => longFunctions(relative(root, path), readFileSync(path, 'utf8'), over))
    .sort((a, b) => b.lines - a.lines);
}

if (import.meta.filename === process.argv[1]) {
  const { values } = parseArgs({ options: { over: { type: 'string', default: '100' }, list: { type: 'boolean', default: false } } });
  const over = Number(values.over);
  const found = productLongFunctions(join(import.meta.dirname, '..'), over);
  if (values.list) for (const f of found) console.log(`${String(f.lines).padStart(4)}  ${f.file}:${f.line}  ${f.name}`);
  console.log(`${found.length} functions over ${over} lines in ${productFolders.join(', ')}`);
}
