/** Running the system's headless Chromium (Debian's `chromium` package) as a one-shot command. */
import { execFile } from 'node:child_process';
import { accessSync, constants } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

/** Where Debian's package puts the browser; HACRL_CHROMIUM overrides it (another distribution, macOS). */
export const DEFAULT_CHROMIUM = '/usr/bin/chromium';

/** The Chromium executable to use; throws, saying how to install it, when there is none. */
export function chromiumPath(): string {
  const path = process.env.HACRL_CHROMIUM ?? DEFAULT_CHROMIUM;
  try {
    accessSync(path, constants.X_OK);
  } catch {
    throw new Error(
      `Chromium not found at ${path}: install chromium (apt-get install chromium), ` +
        'or set HACRL_CHROMIUM to the browser executable',
    );
  }
  return path;
}

// Headless, and quiet: no sandbox (containers and root cannot set it up), no GPU, nothing fetched in the background
// (offline machines, reproducible output), no first-run pages, no scrollbars in screenshots, /tmp instead of a
// small /dev/shm (Docker's default 64 MB makes renderers crash).
const FLAGS = [
  '--headless',
  '--no-sandbox',
  '--disable-gpu',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
  '--no-first-run',
  '--hide-scrollbars',
  '--disable-dev-shm-usage',
];

/**
 * Runs Chromium once with `args` after the standard headless flags and a fresh, afterwards deleted profile folder
 * (a shared profile would be locked by a concurrent run); resolves to its standard output.
 */
export async function runChromium(args: readonly string[], timeoutMs = 60_000): Promise<string> {
  const exe = chromiumPath();
  const profile = await mkdtemp(join(tmpdir(), 'hacrl-chromium-'));
  try {
    return await new Promise<string>((resolve, reject) => {
      execFile(
        exe,
        [...FLAGS, `--user-data-dir=${profile}`, ...args],
        { encoding: 'utf8', timeout: timeoutMs, killSignal: 'SIGKILL', maxBuffer: 512 * 1024 * 1024 },
        (err, stdout, stderr) => {
          if (!err) return resolve(stdout);
          const why = err.killed ? `timed out after ${timeoutMs / 1000} s` : err.message.split('\n')[0];
          // Chromium logs harmless D-Bus complaints in containers; the last lines hold the real cause.
          const tail = stderr.trim().split('\n').slice(-8).join('\n');
          reject(new Error(`chromium failed (${why})${tail === '' ? '' : `:\n${tail}`}`));
        },
      );
    });
  } finally {
    await rm(profile, { recursive: true, force: true });
  }
}
