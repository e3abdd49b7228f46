/**
 * The lock of a run folder: one process at a time trains in a runDir. The lock is a file `run.lock` holding the
 * holder's PID, host and process start time, created whole (written aside, then hard-linked into place, which fails
 * when a lock exists). A lock whose process is gone (same host, PID dead or reused by a later process) is stale and
 * taken over; a live one makes the second process fail at once, naming the holder. Node has no flock(2), and the lock
 * libraries on npm judge staleness by age instead of by the holder's life, so it is written here.
 */
import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { link, readFile, unlink, writeFile } from 'node:fs/promises';
import { hostname } from 'node:os';
import { join } from 'node:path';
import { ensureWritableDir } from '../util/fs-errors.js';

/** The lock file's name inside a run folder. */
export const RUN_LOCK_FILE = 'run.lock';

/** Who holds a lock. */
interface Holder {
  pid: number;
  host: string;
  /** The process's start time in clock ticks after boot (/proc/PID/stat field 22); null off Linux. */
  started: string | null;
  /** When the lock was taken (ISO 8601). */
  since: string;
}

/** A held lock; `release` removes it (only if it is still this holder's). */
export interface RunLock {
  release(): Promise<void>;
}

/** The start time of `pid` from /proc, or null when it is not running or /proc is missing. */
function startTime(pid: number): string | null {
  try {
    // The command name (field 2) may hold spaces and parentheses: fields are counted after its closing one.
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return stat.slice(stat.lastIndexOf(')') + 2).split(' ')[19] ?? null;
  } catch {
    return null;
  }
}

/** True unless `h` is certainly gone: a process of this host whose PID is dead or now belongs to a later process. */
function holderAlive(h: Holder): boolean {
  if (h.host !== hostname()) return true;
  try {
    process.kill(h.pid, 0);
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === 'ESRCH') return false;
  }
  const now = startTime(h.pid);
  return h.started === null || now === null || now === h.started;
}

/** The holder recorded in a lock file's text, or null when the text is not one (a damaged lock). */
function parseHolder(text: string): Holder | null {
  try {
    const h = JSON.parse(text) as Holder;
    return Number.isInteger(h.pid) && typeof h.host === 'string' ? h : null;
  } catch {
    return null;
  }
}

/**
 * Locks `runDir` (created if needed) for this process. Throws at once, naming the holder's PID, when another live
 * process (or another run of this one) holds it; takes over a stale lock.
 */
export async function lockRunDir(runDir: string): Promise<RunLock> {
  await ensureWritableDir(runDir, 'runDir');
  const path = join(runDir, RUN_LOCK_FILE);
  const me: Holder = { pid: process.pid, host: hostname(), started: startTime(process.pid), since: '' };
  const tmp = join(runDir, `.${RUN_LOCK_FILE}.${process.pid}.${randomBytes(4).toString('hex')}`);
  // A few rounds: each either takes the lock, fails on a live holder, or removes one stale lock.
  for (let round = 0; round < 5; round++) {
    const text = JSON.stringify({ ...me, since: new Date().toISOString() }) + '\n';
    await writeFile(tmp, text);
    try {
      await link(tmp, path);
      return {
        release: async () => {
          if ((await readFile(path, 'utf8').catch(() => null)) === text) await unlink(path).catch(() => undefined);
        },
      };
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code !== 'EEXIST') throw e;
    } finally {
      await unlink(tmp).catch(() => undefined);
    }
    const held = await readFile(path, 'utf8').catch(() => null);
    if (held === null) continue;
    const holder = parseHolder(held);
    if (holder !== null && holderAlive(holder))
      throw new Error(
        `runDir ${runDir} is in use by ${holder.pid === process.pid && holder.host === me.host ? 'this process' : 'process'} ` +
          `${holder.pid} on ${holder.host} (since ${holder.since}): wait for it to end, or choose another runDir ` +
          `(${path} is its lock)`,
      );
    // Stale: removed only if unchanged since it was read, so a lock just taken by another process survives.
    if ((await readFile(path, 'utf8').catch(() => null)) === held) await unlink(path).catch(() => undefined);
  }
  throw new Error(`runDir ${runDir}: could not take its lock ${path} (it keeps changing); try again`);
}
