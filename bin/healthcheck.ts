// A container's health check (the image's HEALTHCHECK): exits 0 when the URL answers 200 within two
// seconds, 1 otherwise. The URL: the first argument, else MIRROR_HEALTHCHECK_URL, else the API's
// /healthz on API_PORT. A worker's is its metrics port's /healthz (`mirror worker --metrics-port`).
// Node alone: no curl or wget in a slim image, and nothing of the mirror is loaded.
const url = process.argv[2] ?? process.env.MIRROR_HEALTHCHECK_URL ?? `http://127.0.0.1:${process.env.API_PORT ?? '4000'}/healthz`;
try {
  const res = await fetch(url, { signal: AbortSignal.timeout(2000) });
  if (!res.ok) console.error(`${url}: ${res.status} ${(await res.text()).slice(0, 200)}`);
  process.exitCode = res.ok ? 0 : 1;
} catch (error) {
  console.error(`${url}: ${(error as Error).message}`);
  process.exitCode = 1;
}
