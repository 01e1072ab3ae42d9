// Which release of the mirror this process runs: the package version and, when known, the git commit.
// The API reports it at /healthz, every process's /metrics as `mirror_build_info`, a worker in its
// Temporal identity (so `mirror doctor` sees what each worker polling the queue runs). The commit
// comes from MIRROR_COMMIT (set when an image is built, where there is no .git), else from
// `git rev-parse HEAD` in the project once at start; without either it is null, never an error.
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { hostname } from 'node:os';

const root = new URL('..', import.meta.url).pathname;

interface BuildInfo {
  /** package.json's version. */
  version: string;
  /** The full git commit, or null when neither MIRROR_COMMIT nor git says. */
  commit: string | null;
}

let cached: BuildInfo | undefined;

export function buildInfo(): BuildInfo {
  cached ??= readBuildInfo(process.env, root);
  return cached;
}

/** Reads it afresh (tests; buildInfo() caches it for the process's life). */
export function readBuildInfo(env: Record<string, string | undefined>, dir: string): BuildInfo {
  const { version } = JSON.parse(readFileSync(`${dir}/package.json`, 'utf8')) as { version?: string };
  return { version: version ?? 'unknown', commit: commitOf(env, dir) };
}

const sha = /^[0-9a-f]{7,64}$/;

function commitOf(env: Record<string, string | undefined>, dir: string): string | null {
  const given = env.MIRROR_COMMIT?.trim().toLowerCase();
  if (given) return sha.test(given) ? given : null;
  try {
    // A second at most: a start must not wait on a slow disk or a git that asks questions.
    const out = execFileSync('git', ['rev-parse', 'HEAD'], {
      cwd: dir,
      encoding: 'utf8',
      stdio: ['ignore', 'pipe', 'ignore'],
      timeout: 1000,
      env: { ...env, GIT_TERMINAL_PROMPT: '0' },
    }).trim();
    return sha.test(out) ? out : null;
  } catch {
    // No git, not a repository, or git refused (e.g. a directory owned by another user).
    return null;
  }
}

/** `0.1.0+1a2b3c4d5e6f`, or `0.1.0` without a commit: one short string for logs and identities. */
export function releaseLabel(info: BuildInfo = buildInfo()): string {
  return info.commit ? `${info.version}+${info.commit.slice(0, 12)}` : info.version;
}

/** A worker's Temporal identity: Temporal's default (pid@host) and the release, which describeTaskQueue shows. */
export function workerIdentity(info: BuildInfo = buildInfo()): string {
  return `${process.pid}@${hostname()} construction-mirror/${releaseLabel(info)}`;
}
