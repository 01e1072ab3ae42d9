// ESLint rule `mirror/no-module-state`: no state held by a module. State that makes code fast belongs
// to an object whose signature shows it (a reader, a store), made by whoever owns its lifetime, not to
// a module that every caller of the process shares unseen. Reported at a module's top level:
//   - `let` and `var`;
//   - a `const` whose value is made mutable at load: `new X(...)`, an array or object literal, a call
//     that makes an array or object (`Array.from`, `Object.fromEntries`, `xs.map(...)`, ...), or an
//     immediately called function (its closure is the module's state);
//   - a class's static field that is not `readonly`, or whose value is made mutable as above.
// Constant data stays: a literal marked `as const`, frozen (`Object.freeze`), or declared with a
// readonly type (`readonly T[]`, `ReadonlyArray`, `Readonly<...>`, `ReadonlyMap`, `ReadonlySet`); and
// values that hold no state of their own (strings, numbers, functions, calls of other functions).

/** Calls whose result is a new array or object, mutable unless the declaration says it is readonly. */
const makers = new Set(['Array', 'Array.from', 'Array.of', 'Object.assign', 'Object.create', 'Object.fromEntries', 'structuredClone']);
/** Array methods that answer a new (mutable) array. */
const arrayMakers = new Set([
  'map',
  'filter',
  'slice',
  'concat',
  'flat',
  'flatMap',
  'toSorted',
  'toReversed',
  'toSpliced',
  'with',
  'split',
  'entries',
  'keys',
  'values',
]);
const readonlyTypes = /^(Readonly|ReadonlyArray|ReadonlyMap|ReadonlySet)$/;

function calleeName(callee) {
  if (callee.type === 'Identifier') return callee.name;
  if (callee.type === 'MemberExpression' && !callee.computed && callee.property.type === 'Identifier') {
    const object = callee.object.type === 'Identifier' ? callee.object.name : undefined;
    return object ? `${object}.${callee.property.name}` : `.${callee.property.name}`;
  }
  return undefined;
}

/** Whether a declared type says the value is not to be changed (the type checker then refuses changes). */
function readonlyAnnotation(typeAnnotation) {
  const t = typeAnnotation?.typeAnnotation;
  if (!t) return false;
  if (t.type === 'TSTypeOperator' && t.operator === 'readonly') return true;
  return t.type === 'TSTypeReference' && t.typeName.type === 'Identifier' && readonlyTypes.test(t.typeName.name);
}

/** Why `init` is state made at load (undefined: it is not). `declaredReadonly`: its declaration's type is readonly. */
function mutableValue(init, declaredReadonly) {
  let e = init;
  for (;;) {
    if (e.type === 'TSAsExpression' && e.typeAnnotation.type === 'TSTypeReference' && e.typeAnnotation.typeName.name === 'const') return undefined;
    if (e.type === 'TSAsExpression' || e.type === 'TSSatisfiesExpression' || e.type === 'TSNonNullExpression' || e.type === 'TSTypeAssertion') e = e.expression;
    else break;
  }
  switch (e.type) {
    case 'NewExpression': {
      const name = calleeName(e.callee);
      // A set or map declared ReadonlySet or ReadonlyMap: the type checker refuses every change.
      if (declaredReadonly && (name === 'Set' || name === 'Map')) return undefined;
      return `\`new ${name ?? '...'}\` made at load`;
    }
    case 'ArrayExpression':
    case 'ObjectExpression':
      return declaredReadonly ? undefined : `a mutable ${e.type === 'ArrayExpression' ? 'array' : 'object'} (mark it \`as const\`, or declare a readonly type)`;
    case 'CallExpression': {
      if (e.callee.type === 'FunctionExpression' || e.callee.type === 'ArrowFunctionExpression') return 'a function called at load (its closure is state)';
      const name = calleeName(e.callee);
      if (name === 'Object.freeze') return undefined;
      if (declaredReadonly) return undefined;
      if (name !== undefined && (makers.has(name) || (name.startsWith('.') && arrayMakers.has(name.slice(1))) || arrayMakers.has(name.split('.')[1] ?? '')))
        return `\`${name}(...)\` makes a mutable value at load (declare a readonly type)`;
      return undefined;
    }
    default:
      return undefined;
  }
}

function checkDeclaration(context, declaration) {
  if (declaration.kind !== 'const') {
    context.report({ node: declaration, messageId: 'state', data: { why: `\`${declaration.kind}\` at the module's top level` } });
    return;
  }
  for (const d of declaration.declarations) {
    if (!d.init) continue;
    const why = mutableValue(d.init, readonlyAnnotation(d.id.typeAnnotation));
    if (why) context.report({ node: d, messageId: 'state', data: { why } });
  }
}

function checkClass(context, node) {
  for (const member of node.body.body) {
    if (member.type !== 'PropertyDefinition' || !member.static) continue;
    if (!member.readonly) {
      context.report({ node: member, messageId: 'state', data: { why: 'a static field that is not `readonly`' } });
      continue;
    }
    const why = member.value ? mutableValue(member.value, readonlyAnnotation(member.typeAnnotation)) : undefined;
    if (why) context.report({ node: member, messageId: 'state', data: { why: `a static field: ${why}` } });
  }
}

export default {
  meta: {
    type: 'problem',
    docs: { description: 'No state held by a module: it belongs to an object whose signature shows it.' },
    messages: {
      state: 'Module-level state ({{why}}): keep it in an object whose signature shows it (made by whoever owns its lifetime, and passed in).',
    },
    schema: [],
  },
  create(context) {
    const visit = (statement) => {
      const s = statement.type === 'ExportNamedDeclaration' || statement.type === 'ExportDefaultDeclaration' ? statement.declaration : statement;
      if (!s) return;
      if (s.type === 'VariableDeclaration') checkDeclaration(context, s);
      else if (s.type === 'ClassDeclaration' || s.type === 'ClassExpression') checkClass(context, s);
    };
    return {
      Program(program) {
        for (const statement of program.body) visit(statement);
      },
      // Classes anywhere in the module: a static field is one per class, as shared as a module's.
      'ClassDeclaration, ClassExpression'(node) {
        if (node.parent.type !== 'Program' && node.parent.type !== 'ExportNamedDeclaration' && node.parent.type !== 'ExportDefaultDeclaration')
          checkClass(context, node);
      },
    };
  },
};
