// Development helper: prints the SQL that Prisma's own schema engine generates for prisma/schema.prisma
// from an empty database (what `prisma migrate diff --from-empty --to-schema` prints), so a new migration
// can start from Prisma's exact DDL. Prisma's native engine cannot be downloaded here, so this runs the
// schema engine's WebAssembly build through the pg driver adapter.
//
//   node --import tsx scripts/prisma-schema-sql.ts [--schema path/to/schema.prisma] [--url postgresql://...]
//
// The engine insists on a live connection when it starts; it reads nothing from that database and writes
// nothing to it for this diff. The URL is --url, else TEST_DATABASE_URL, else the local server's `postgres`.
//
// Which WebAssembly module runs: the JS glue comes from @prisma/schema-engine-wasm (devDependency), but the
// prisma CLI package ships the engine build of its own exact version (node_modules/prisma/build/
// schema_engine_bg.wasm), and that exact build is used whenever its interface matches the glue; otherwise
// the package's own build, which may be a few commits apart from the CLI's. `engine.version` says which.
import { readFile } from 'node:fs/promises';
import { createRequire } from 'node:module';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { parseArgs } from 'node:util';
import { PrismaPg } from '@prisma/adapter-pg';
import { bindMigrationAwareSqlAdapterFactory } from '@prisma/driver-adapter-utils';
import type { SchemaEngine } from '@prisma/schema-engine-wasm';
import pg from 'pg';

export const defaultSchemaPath = fileURLToPath(new URL('../prisma/schema.prisma', import.meta.url));
const defaultServerUrl = 'postgresql://postgres@127.0.0.1:5432/postgres';

export interface EngineInfo {
  /** Git commit of prisma-engines the loaded WebAssembly was built from. */
  version: string;
  /** Where the .wasm came from. */
  wasmPath: string;
  /** True when it is the build shipped inside the installed prisma CLI (same version as its native engine). */
  matchesPrismaCli: boolean;
}

export interface SchemaSqlOptions {
  /** Schema text; defaults to the contents of `schemaPath`. */
  schema?: string;
  /** Defaults to prisma/schema.prisma. */
  schemaPath?: string;
  /** A PostgreSQL database the engine may connect to (nothing is read or written). */
  databaseUrl?: string;
}

export interface SchemaSql {
  sql: string;
  engine: EngineInfo;
}

type Glue = typeof import('@prisma/schema-engine-wasm/schema_engine_bg');

// The project compiles without the DOM lib, where TypeScript declares WebAssembly: the few calls used here.
type WasmModule = object;
interface WasmApi {
  compile(bytes: Uint8Array): Promise<WasmModule>;
  instantiate(module: WasmModule, imports: Record<string, object>): Promise<{ exports: Record<string, unknown> }>;
  Module: {
    imports(module: WasmModule): { module: string; name: string; kind: string }[];
    exports(module: WasmModule): { name: string; kind: string }[];
  };
  RuntimeError: new (...args: never[]) => Error;
}
const wasmApi = (globalThis as unknown as { WebAssembly: WasmApi }).WebAssembly;

interface LoadedEngine {
  glue: Glue;
  info: EngineInfo;
}

let loading: Promise<LoadedEngine> | undefined;

/** wasm-bindgen glue keeps one module-level instance, so the engine is loaded once per process. */
function loadEngine(): Promise<LoadedEngine> {
  loading ??= (async () => {
    const require = createRequire(import.meta.url);
    const gluePath = require.resolve('@prisma/schema-engine-wasm/schema_engine_bg');
    const glue = (await import(pathToFileURL(gluePath).href)) as Glue;
    const packageWasm = join(dirname(gluePath), 'schema_engine_bg.wasm');
    const cliWasm = join(dirname(require.resolve('prisma/package.json')), 'build', 'schema_engine_bg.wasm');

    const packageModule = await wasmApi.compile(await readFile(packageWasm));
    let module = packageModule;
    let wasmPath = packageWasm;
    const cliModule = await readFile(cliWasm).then(
      (bytes) => wasmApi.compile(bytes),
      () => undefined,
    );
    if (cliModule && sameInterface(cliModule, packageModule, glue)) {
      module = cliModule;
      wasmPath = cliWasm;
    }

    // The glue reports Rust panics through this global; without it a panic surfaces as "unreachable".
    const registry = globalThis as { PRISMA_WASM_PANIC_REGISTRY?: { message: string; set_message(m: string): void } };
    registry.PRISMA_WASM_PANIC_REGISTRY ??= {
      message: '',
      set_message(m: string) {
        this.message = m;
      },
    };

    const instance = await wasmApi.instantiate(module, { './schema_engine_bg.js': glue });
    glue.__wbg_set_wasm(instance.exports);
    (instance.exports.__wbindgen_start as () => void)();
    return { glue, info: { version: glue.version(), wasmPath, matchesPrismaCli: wasmPath === cliWasm } };
  })();
  return loading;
}

/** The CLI's build fits the glue when it imports only what the glue provides and exports what the package's build does. */
function sameInterface(candidate: WasmModule, reference: WasmModule, glue: Glue): boolean {
  const provided = new Set(Object.keys(glue));
  if (!wasmApi.Module.imports(candidate).every((i) => i.module === './schema_engine_bg.js' && provided.has(i.name))) return false;
  const names = (m: WasmModule) =>
    wasmApi.Module.exports(m)
      .map((e) => `${e.kind}:${e.name}`)
      .sort()
      .join('\n');
  return names(candidate) === names(reference);
}

function panicMessage(error: unknown): unknown {
  const registry = (globalThis as { PRISMA_WASM_PANIC_REGISTRY?: { message: string } }).PRISMA_WASM_PANIC_REGISTRY;
  if (error instanceof wasmApi.RuntimeError && registry?.message) {
    return new Error(`Prisma schema engine panicked: ${registry.message}`, { cause: error });
  }
  return error;
}

/** The SQL Prisma generates to create the schema's tables, indexes and foreign keys in an empty database. */
export async function prismaSchemaSql(options: SchemaSqlOptions = {}): Promise<SchemaSql> {
  const schemaPath = options.schemaPath ?? defaultSchemaPath;
  const schema = options.schema ?? (await readFile(schemaPath, 'utf8'));
  const { glue, info } = await loadEngine();
  const pool = new pg.Pool({
    connectionString: options.databaseUrl ?? process.env.TEST_DATABASE_URL ?? defaultServerUrl,
    max: 2,
    application_name: 'prisma-schema-sql',
  });
  let engine: SchemaEngine | undefined;
  try {
    const files = [{ path: 'schema.prisma', content: schema }];
    const adapter = bindMigrationAwareSqlAdapterFactory(new PrismaPg(pool));
    engine = await glue.SchemaEngine.new({ datamodels: [['schema.prisma', schema]] }, () => undefined, adapter);
    const result = await engine.diff({
      from: { tag: 'empty' },
      to: { tag: 'schemaDatamodel', files },
      script: true,
      exitCode: null,
      filters: { externalTables: [], externalEnums: [] },
    });
    return { sql: result.stdout ?? '', engine: info };
  } catch (error) {
    throw panicMessage(error);
  } finally {
    engine?.free();
    await pool.end();
  }
}

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: { schema: { type: 'string' }, url: { type: 'string' }, help: { type: 'boolean', short: 'h' } },
  });
  if (values.help) {
    process.stdout.write('Usage: node --import tsx scripts/prisma-schema-sql.ts [--schema path] [--url postgresql://...]\n');
    return;
  }
  const { sql, engine } = await prismaSchemaSql({
    schemaPath: values.schema ? resolve(values.schema) : defaultSchemaPath,
    ...(values.url ? { databaseUrl: values.url } : {}),
  });
  process.stderr.write(
    `-- Prisma schema engine ${engine.version} (${engine.matchesPrismaCli ? "the prisma CLI's own build" : '@prisma/schema-engine-wasm'})\n`,
  );
  process.stdout.write(sql.endsWith('\n') ? sql : `${sql}\n`);
}

if (process.argv[1] && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  main().catch((error: unknown) => {
    process.stderr.write(`${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`);
    process.exitCode = 1;
  });
}
