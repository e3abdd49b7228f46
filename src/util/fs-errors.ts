/**
 * Filesystem errors that say which setting they came from: every path the user gives (a flag, a config field) is
 * checked before work starts, and failures name that flag or field with a plain reason instead of a bare `ENOTDIR`.
 */
import { access, constants, mkdir, stat } from 'node:fs/promises';
import { dirname } from 'node:path';

const REASONS: Record<string, string> = {
  ENOTDIR: 'part of the path is a file, not a folder',
  EEXIST: 'a file with that name is in the way',
  EISDIR: 'it is a folder, not a file',
  EACCES: 'permission denied',
  EPERM: 'permission denied',
  EROFS: 'the file system is read-only',
  ENOSPC: 'the disk is full',
  ENOENT: 'a folder on the path does not exist',
  ENAMETOOLONG: 'the path is too long',
};

/** An error naming `what` (a flag or config field) and `path`, with a plain reason for the system error `e`. */
export function fsError(e: unknown, what: string, path: string): Error {
  const code = (e as NodeJS.ErrnoException).code ?? '';
  const reason = REASONS[code] ?? (e as Error).message;
  return new Error(`${what} ${path}: ${reason}${code ? ` (${code})` : ''}`);
}

/** Creates folder `path` (and its parents) if needed and checks it is a writable folder; errors name `what`. */
export async function ensureWritableDir(path: string, what: string): Promise<void> {
  try {
    await mkdir(path, { recursive: true });
    if (!(await stat(path)).isDirectory()) throw Object.assign(new Error('not a folder'), { code: 'EEXIST' });
    await access(path, constants.W_OK);
  } catch (e) {
    throw fsError(e, what, path);
  }
}

/** Checks that a file can be written at `path` (not a folder; its folder exists and is writable); errors name `what`. */
export async function checkWritableFile(path: string, what: string): Promise<void> {
  try {
    const s = await stat(path).catch((e: NodeJS.ErrnoException) => {
      if (e.code === 'ENOENT') return null;
      throw e;
    });
    if (s?.isDirectory()) throw Object.assign(new Error('is a folder'), { code: 'EISDIR' });
    const dir = dirname(path);
    if (!(await stat(dir)).isDirectory()) throw Object.assign(new Error('not a folder'), { code: 'ENOTDIR' });
    await access(dir, constants.W_OK);
  } catch (e) {
    throw fsError(e, what, path);
  }
}
