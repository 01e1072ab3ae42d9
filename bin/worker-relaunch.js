// How a worker process and an API process are started: settings of the C library and of V8 that must
// be there when the process starts. bin/mirror.js starts the process again with them when it was
// started without them; whoever starts them itself (a container, the benchmarks) can start them so
// from the outset. Plain JavaScript: bin/mirror.js uses it before anything is installed.
//
// The API process: --max-semi-space-size=32. A list page is ~100 KB of JSON text made and sent per
// request, and V8's young generation (grown from 1 MB to at most 16 MB semi-spaces by default) was
// scavenged so often that the garbage collector took 19% of the API's busy time on bench [5]'s page 1
// (5% in the raw baseline). Side by side on 2026-11-26: API CPU a page-1 request 666 us with V8's
// defaults, 467 us with 32 MB semi-spaces (the baseline 332-338 us); page 1 at 0.72x the baseline's
// req/s, then 0.92x. The young generation may then take up to 96 MB more of the API's memory.
// MIRROR_API_V8_FLAGS replaces it ('' for V8's defaults).
//
// The worker:
//
// Measured by bench [2] (200k records, worker peak RSS, with the list bodies written as received):
// 328 MB with neither, 303 MB with the V8 flags, 275 MB with one malloc arena, 258 MB with both;
// pass times within noise of each other.
//  - MALLOC_ARENA_MAX=1: glibc gives each thread that allocates (V8's compiler and GC threads,
//    the Temporal core's threads) an arena of its own, and keeps what they freed; one arena keeps
//    far less.
//  - --max-semi-space-size=4: V8's young generation grows to 3 x 16 MB by default; a worker's
//    young objects are small and short-lived (a page's body is a Buffer, outside the heap).
//  - --heap-growing-percent=50: the old generation is collected before it grows far (V8's own
//    factor is larger). At 30 a worker spent a quarter of its main thread in mark-compacts, one
//    every 150 ms. Bench [2] on 2026-11-24, runs side by side: worker CPU 4.9-5.6 s at 30, 3.7 s
//    at 50, 3.5-3.8 s at 60, the pass 8-11% faster; peak RSS syncing 1M records 263 MB at 30,
//    274 MB at 50, 281 MB at 60 (and 281 MB at 200k already at 100).
// MIRROR_WORKER_V8_FLAGS replaces the V8 flags ('' for V8's defaults); a MALLOC_ARENA_MAX of the
// environment is kept.

export const defaultWorkerV8Flags = '--max-semi-space-size=4 --heap-growing-percent=50';
export const defaultApiV8Flags = '--max-semi-space-size=32';

/** The node options and environment a worker process starts with. */
export function workerProcessSettings(env = process.env) {
  const flags = (env.MIRROR_WORKER_V8_FLAGS ?? defaultWorkerV8Flags).split(/\s+/).filter(Boolean);
  return { nodeArgs: flags, env: { MALLOC_ARENA_MAX: env.MALLOC_ARENA_MAX ?? '1' } };
}

/** The node options and environment an API process starts with. */
export function apiProcessSettings(env = process.env) {
  return { nodeArgs: (env.MIRROR_API_V8_FLAGS ?? defaultApiV8Flags).split(/\s+/).filter(Boolean), env: {} };
}

/** The settings a process of this command (`worker` or `api`) lacks: node options missing from its command line, variables from its environment. */
export function missingSettings(execArgv = process.execArgv, env = process.env, command = 'worker') {
  const wanted = command === 'api' ? apiProcessSettings(env) : workerProcessSettings(env);
  const name = (arg) => arg.split('=')[0].replace(/_/g, '-');
  const present = new Set(execArgv.map(name));
  return {
    nodeArgs: wanted.nodeArgs.filter((arg) => !present.has(name(arg))),
    env: Object.fromEntries(Object.entries(wanted.env).filter(([k]) => env[k] === undefined)),
  };
}
