// Headless Chromium for browser tests and the status-page screenshot: Debian's package driven by
// playwright-core (no browser download). Installed with apt-get where missing and we are root;
// otherwise `chromiumMissing` says why, so a test can skip saying so.
import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { BrowserContext } from 'playwright-core';

const candidates = [process.env.CHROMIUM_PATH, '/usr/bin/chromium', '/usr/bin/chromium-browser', '/usr/bin/google-chrome'].filter((p): p is string =>
  Boolean(p),
);

function found(): string | undefined {
  return candidates.find((p) => existsSync(p));
}

/** The Chromium executable, installing Debian's package first where possible; else why it cannot be had. */
export function ensureChromium(log: (line: string) => void = (l) => console.error(l)): { path: string } | { missing: string } {
  const have = found();
  if (have) return { path: have };
  if (process.platform !== 'linux' || !existsSync('/usr/bin/apt-get'))
    return { missing: 'no Chromium at /usr/bin/chromium and no apt-get to install it (set CHROMIUM_PATH)' };
  if (process.getuid?.() !== 0)
    return { missing: 'no Chromium at /usr/bin/chromium, and installing it needs root (`sudo apt-get install -y chromium`, or set CHROMIUM_PATH)' };
  log("browser: installing Debian's chromium package (apt-get install -y chromium) ...");
  const env = { ...process.env, DEBIAN_FRONTEND: 'noninteractive' };
  let r = spawnSync('apt-get', ['install', '-y', '-q', 'chromium'], { stdio: ['ignore', 'ignore', 'pipe'], env, timeout: 600_000 });
  if (r.status !== 0) {
    spawnSync('apt-get', ['update', '-q'], { stdio: 'ignore', env, timeout: 300_000 });
    r = spawnSync('apt-get', ['install', '-y', '-q', 'chromium'], { stdio: ['ignore', 'ignore', 'pipe'], env, timeout: 600_000 });
  }
  const path = found();
  if (path) return { path };
  return {
    missing: `apt-get could not install chromium (exit ${r.status}): ${String(r.stderr ?? '')
      .trim()
      .split('\n')
      .slice(-2)
      .join(' ')}`,
  };
}

export interface Browser {
  context: BrowserContext;
  close(): Promise<void>;
}

/** Launches headless Chromium with a fresh profile; `httpCredentials` answers Basic-auth challenges. */
export async function launchChromium(
  executablePath: string,
  options: { httpCredentials?: { username: string; password: string }; viewport?: { width: number; height: number } } = {},
): Promise<Browser> {
  const { chromium } = await import('playwright-core');
  const profile = mkdtempSync(join(tmpdir(), 'mirror-chromium-'));
  const context = await chromium.launchPersistentContext(profile, {
    executablePath,
    headless: true,
    args: [
      '--headless',
      '--no-sandbox',
      '--disable-gpu',
      '--disable-quic',
      '--no-first-run',
      '--disable-background-networking',
      '--disable-component-update',
      '--disable-sync',
    ],
    viewport: options.viewport ?? { width: 1400, height: 900 },
    ...(options.httpCredentials ? { httpCredentials: options.httpCredentials } : {}),
  });
  return {
    context,
    async close() {
      await context.close().catch(() => undefined);
      rmSync(profile, { recursive: true, force: true });
    },
  };
}
