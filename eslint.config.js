// ESLint flat config for the whole repository (`npm run lint` = `eslint .`).
// TypeScript files get typescript-eslint's type-checked recommended rules through the project service
// (tsconfig.json); plain JavaScript gets the untyped recommended rules. Workflow code additionally may not
// import anything that does I/O: it runs inside Temporal's deterministic workflow sandbox. Every other
// folder has its walls too (see `walls` below): SQL, Prisma and pg only in mirror/, upstream HTTP
// only in connectors/, lib/ beneath everything, sandbox/ (the fake upstream) on lib/ alone.
// mirror/ holds no state in its modules (scripts/eslint/no-module-state.js): what makes reads and writes
// fast belongs to an object whose signature shows it.
// test/unit/lint/walls.test.ts crosses each wall and checks that it is reported.
import { builtinModules } from 'node:module';
import js from '@eslint/js';
import { defineConfig, globalIgnores } from 'eslint/config';
import tseslint from 'typescript-eslint';
import noModuleState from './scripts/eslint/no-module-state.js';

const nodeGlobals = Object.fromEntries(
  [
    'process',
    'console',
    'Buffer',
    'URL',
    'URLSearchParams',
    'TextEncoder',
    'TextDecoder',
    'AbortController',
    'AbortSignal',
    'fetch',
    'structuredClone',
    'queueMicrotask',
    'setTimeout',
    'clearTimeout',
    'setInterval',
    'clearInterval',
    'setImmediate',
    'clearImmediate',
  ].map((name) => [name, 'readonly']),
);

const sandbox =
  "Workflow code runs in Temporal's deterministic sandbox: do the I/O in an activity and call it through " + 'proxyActivities (`import type` is fine).';

/** Restrictions for workflows/**: Node built-ins and I/O libraries, value imports only. */
const workflowImportRestrictions = {
  paths: builtinModules.filter((name) => !name.startsWith('_')).map((name) => ({ name, message: `Node built-in module. ${sandbox}`, allowTypeImports: true })),
  patterns: [
    { regex: '^node:', message: `Node built-in module. ${sandbox}`, allowTypeImports: true },
    {
      regex: '^(pg|pg-[^/]+|undici|fastify|fastify-[^/]+|@fastify/.+|pino|pino-[^/]+|prisma|@prisma/.+)(/.*)?$',
      message: `I/O library. ${sandbox}`,
      allowTypeImports: true,
    },
    {
      regex: '^@temporalio/(client|worker|activity|testing)(/.*)?$',
      message: 'Workflow code may import only @temporalio/workflow and @temporalio/common (`import type` is fine).',
      allowTypeImports: true,
    },
    {
      // ../mirror, ../../connectors/x.ts, ... : the modules that talk to Postgres, upstream APIs and HTTP.
      regex: '^(\\.\\./)+(mirror|connectors|api|activities|bin|prisma)(/.*)?$',
      message: `Module that does I/O. ${sandbox}`,
      allowTypeImports: true,
    },
  ],
};

/** A relative import of one of the project's top-level folders, from any depth below another one. */
const folderImport = (folders) => `^(\\.\\./)+(${folders.join('|')})(/.*)?$`;

const dbLibraries = {
  regex: '^(pg|pg-[^/]+|@prisma/.+|prisma)(/.*)?$',
  message: 'Database library: only mirror/ talks to Postgres. Call a function of mirror/ (`import type` is fine).',
  allowTypeImports: true,
};
const prismaModule = {
  // mirror/db/prisma.ts: its client is mirror/'s to use; elsewhere only its types (bin/ wires it up, see below).
  regex: '^(\\.\\./)+(mirror/db/)?prisma(\\.ts|/.*)?$',
  message: 'The Prisma client is used inside mirror/ only: call a store of mirror/ (`import type` is fine).',
  allowTypeImports: true,
};
const upstreamHttp = {
  regex: '^undici(/.*)?$',
  message: 'HTTP to the upstream goes through connectors/ (its one client, its budgets and body limits).',
  allowTypeImports: true,
};
const layerRule = (folders, message, allowTypeImports = false) => ({ regex: folderImport(folders), message, allowTypeImports });

/**
 * Per folder: which project folders it may not import (workflows/ has its own, stricter rule above);
 * `walls()` adds the database and HTTP bans to every folder but their owners.
 */
const layerWalls = {
  lib: [
    layerRule(
      ['mirror', 'connectors', 'api', 'activities', 'workflows', 'bin', 'sandbox', 'prisma', 'test', 'bench', 'scripts'],
      'lib/ is beneath every other folder: it imports nothing from them.',
    ),
  ],
  sandbox: [
    layerRule(
      ['mirror', 'connectors', 'api', 'activities', 'workflows', 'bin', 'prisma', 'test', 'bench', 'scripts'],
      'sandbox/ is the fake upstream: it shares nothing with the mirror but lib/.',
    ),
  ],
  mirror: [
    layerRule(['connectors', 'api', 'activities', 'workflows', 'bin'], 'mirror/ is the storage layer: it knows nothing above it (pass what it needs in).'),
  ],
  connectors: [
    layerRule(['mirror'], 'connectors/ takes what it needs from mirror/ as an interface, passed in by bin/ (`import type` is fine).', true),
    layerRule(['api', 'activities', 'workflows', 'bin'], 'connectors/ talks to the upstream: it knows nothing above it.'),
  ],
  activities: [layerRule(['api', 'bin'], 'activities/ do not reach into the HTTP API or the processes: move what both need to lib/, mirror/ or connectors/.')],
  api: [
    layerRule(['activities', 'bin'], 'api/ does not run activities or reach into the processes: start a workflow (api/sync-control.ts) or move the code down.'),
  ],
  bin: [
    layerRule(
      ['test', 'bench'],
      "bin/ runs the product's processes: the bench and the test tools are entry points of their own, started as processes (bin/dev-entry.ts), never imported.",
    ),
  ],
};

/**
 * Files allowed to import undici for HTTP that is not a call to the upstream, each with its reason.
 * The upstream's own HTTP is in connectors/ only.
 */
const httpExceptions = [
  // The mirror's own webhook deliveries to its subscribers, through an address-checking dispatcher.
  'activities/delivery.ts',
];

/** The no-restricted-imports options of a folder's files. */
function walls(folder, { http = false } = {}) {
  const patterns = [...layerWalls[folder]];
  if (folder !== 'mirror') patterns.push(dbLibraries);
  if (folder !== 'mirror' && folder !== 'bin') patterns.push(prismaModule);
  // bin/'s HTTP is to the processes it runs (health checks, the sandbox), not to the upstream; the
  // sandbox is the upstream (it posts its webhook notifications to the mirror).
  if (folder !== 'connectors' && folder !== 'bin' && folder !== 'sandbox' && !http) patterns.push(upstreamHttp);
  return { patterns };
}

// SQL text outside mirror/: a string or template that starts like a statement. Prisma's model calls
// (`prisma.x.y`, `deps.prisma.x.y`) and pg's `pool.query` likewise. Closing a client is wiring (bin/).
const sqlStart = '/^\\s*(SELECT|INSERT|UPDATE|DELETE|WITH)\\s+([A-Za-z_*(]|\\$\\{|$)/';
const sqlMessage = 'SQL and Prisma calls live in mirror/: call a named function there (the statement beside the others on its tables).';
const sqlOutsideMirror = [
  { selector: `Literal[value=${sqlStart}]`, message: sqlMessage },
  { selector: `TemplateElement[value.raw=${sqlStart}]`, message: sqlMessage },
  { selector: "MemberExpression[object.name='prisma'][property.name!='$disconnect']", message: sqlMessage },
  { selector: "MemberExpression[object.property.name='prisma'][property.name!='$disconnect']", message: sqlMessage },
  { selector: "CallExpression[callee.property.name='query'][callee.object.name='pool']", message: sqlMessage },
  { selector: "CallExpression[callee.property.name='query'][callee.object.property.name='pool']", message: sqlMessage },
];

/** The config objects of the walls: one per folder, then the exceptions. */
function wallConfigs() {
  const configs = [];
  for (const folder of Object.keys(layerWalls)) {
    configs.push({
      files: [`${folder}/**/*.ts`],
      ignores: httpExceptions.filter((f) => f.startsWith(`${folder}/`)),
      rules: { '@typescript-eslint/no-restricted-imports': ['error', walls(folder)] },
    });
    const exceptions = httpExceptions.filter((f) => f.startsWith(`${folder}/`));
    if (exceptions.length > 0) {
      configs.push({ files: exceptions, rules: { '@typescript-eslint/no-restricted-imports': ['error', walls(folder, { http: true })] } });
    }
  }
  // sandbox/ is the fake upstream: its SQL is the emulated passthrough endpoint's, not the mirror's.
  configs.push({
    files: ['{api,activities,connectors,lib,bin,workflows}/**/*.ts'],
    rules: { 'no-restricted-syntax': ['error', ...sqlOutsideMirror] },
  });
  // bin/'s wall against test/ and bench/ holds for import() too (no-restricted-imports sees only static imports).
  configs.push({
    files: ['bin/**/*.ts'],
    rules: {
      'no-restricted-syntax': [
        'error',
        ...sqlOutsideMirror,
        { selector: `ImportExpression[source.value=/${folderImport(['test', 'bench']).replaceAll('/', '\\/')}/]`, message: layerWalls.bin[0].message },
      ],
    },
  });
  return configs;
}

/**
 * Files allowed the global `fetch` for HTTP that is not a call to the upstream, each with its reason.
 * The upstream's own HTTP goes through connectors/ (its one client and its budget); tests, the bench,
 * the scripts and the sandbox (the fake upstream itself) may fetch as they like.
 */
const fetchExceptions = [
  // The container's health check of its own process.
  'bin/healthcheck.ts',
  // The sandbox's admin API (a public token for the demo's and the CLI's Link flow), not the upstream.
  'bin/demo-run.ts',
  'bin/commands/link.ts',
];

export default defineConfig(
  globalIgnores(['node_modules/', 'prisma/generated/', 'dist/', '.data/', 'bench/results/']),

  {
    files: ['**/*.{js,mjs,cjs}'],
    extends: [js.configs.recommended],
    languageOptions: { ecmaVersion: 2023, sourceType: 'module', globals: nodeGlobals },
  },

  {
    files: ['**/*.{ts,mts,cts}'],
    extends: [js.configs.recommended, tseslint.configs.recommendedTypeChecked],
    languageOptions: {
      parserOptions: { projectService: true, tsconfigRootDir: import.meta.dirname },
    },
    linterOptions: { reportUnusedDisableDirectives: 'error' },
    rules: {
      '@typescript-eslint/no-floating-promises': [
        'error',
        {
          // node:test's test()/describe() return promises the runner itself awaits.
          allowForKnownSafeCalls: [{ from: 'package', package: 'node:test', name: ['test', 'it', 'describe', 'suite'] }],
        },
      ],
      '@typescript-eslint/no-misused-promises': 'error',
      // Fastify handlers and interface implementations are async by contract, with or without an await.
      '@typescript-eslint/require-await': 'off',
      '@typescript-eslint/no-unused-vars': [
        'error',
        { argsIgnorePattern: '^_', varsIgnorePattern: '^_', caughtErrorsIgnorePattern: '^_', ignoreRestSiblings: true },
      ],
    },
  },

  ...wallConfigs(),

  {
    files: ['workflows/**/*.ts'],
    rules: {
      '@typescript-eslint/no-restricted-imports': ['error', workflowImportRestrictions],
    },
  },

  {
    files: ['mirror/**/*.ts'],
    plugins: { mirror: { rules: { 'no-module-state': noModuleState } } },
    rules: { 'mirror/no-module-state': 'error' },
  },

  {
    files: ['{api,activities,mirror,lib,bin,workflows}/**/*.ts'],
    ignores: fetchExceptions,
    rules: {
      'no-restricted-globals': [
        'error',
        { name: 'fetch', message: 'HTTP to the upstream goes through connectors/ (its one client, its budget); other HTTP is named in fetchExceptions.' },
      ],
    },
  },
);
