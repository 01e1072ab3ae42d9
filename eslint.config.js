// ESLint flat config for the whole repository (`npm run lint` = `eslint .`).
// TypeScript files get typescript-eslint's type-checked recommended rules through the project service
// (tsconfig.json); plain JavaScript gets the untyped recommended rules. Workflow code additionally may not
// import anything that does I/O: it runs inside Temporal's deterministic workflow sandbox.
import { builtinModules } from 'node:module';
import js from '@eslint/js';
import { defineConfig, globalIgnores } from 'eslint/config';
import tseslint from 'typescript-eslint';

const nodeGlobals = Object.fromEntries(
  [
    'process', 'console', 'Buffer', 'URL', 'URLSearchParams', 'TextEncoder', 'TextDecoder', 'AbortController',
    'AbortSignal', 'fetch', 'structuredClone', 'queueMicrotask', 'setTimeout', 'clearTimeout', 'setInterval',
    'clearInterval', 'setImmediate', 'clearImmediate',
  ].map((name) => [name, 'readonly']),
);

const sandbox =
  "Workflow code runs in Temporal's deterministic sandbox: do the I/O in an activity and call it through " +
  'proxyActivities (`import type` is fine).';

/** Restrictions for workflows/**: Node built-ins and I/O libraries, value imports only. */
const workflowImportRestrictions = {
  paths: builtinModules
    .filter((name) => !name.startsWith('_'))
    .map((name) => ({ name, message: `Node built-in module. ${sandbox}`, allowTypeImports: true })),
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

  {
    files: ['workflows/**/*.ts'],
    rules: {
      '@typescript-eslint/no-restricted-imports': ['error', workflowImportRestrictions],
    },
  },
);
