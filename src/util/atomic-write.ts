import { randomBytes } from 'node:crypto';
import { open, rename, unlink, writeFile, type FileHandle } from 'node:fs/promises';
import { basename, dirname, join } from 'node:path';
import { fsyncPath } from './fsync.js';

/**
 * What writeFileAtomic accepts: text (UTF-8), bytes, or byte chunks written one after another (a list, or made one at
 * a time so that a large file never sits whole in memory).
 */
export type AtomicData = string | Uint8Array | readonly Uint8Array[] | AsyncIterable<Uint8Array>;

/**
 * Writes `data` to `path` so that readers see either the old file or the whole new one, never a partial file:
 * the bytes go to a temporary file in the same folder (rename is only atomic within one file system), which is
 * fsynced, renamed over the target, and then the folder is fsynced so the rename itself survives a crash.
 */
export async function writeFileAtomic(path: string, data: AtomicData): Promise<void> {
  const dir = dirname(path);
  const tmp = join(dir, `.${basename(path)}.${process.pid}.${randomBytes(6).toString('hex')}.tmp`);
  const chunks = typeof data === 'string' ? [Buffer.from(data, 'utf8')] : data instanceof Uint8Array ? [data] : data;
  let renamed = false;
  try {
    const fh = await open(tmp, 'wx', 0o644);
    try {
      let first = true;
      for await (const chunk of chunks) {
        await writeAll(fh, chunk);
        if (first && process.env[STALL_ENV]) await stallForTest(process.env[STALL_ENV]);
        first = false;
      }
      await fh.sync();
    } finally {
      await fh.close();
    }
    await rename(tmp, path);
    renamed = true;
    await fsyncPath(dir, true);
  } catch (e) {
    // Errors of write() and fsync() name no file (ENOSPC, EFBIG): say which one, keeping the code for callers.
    const err = e as NodeJS.ErrnoException;
    throw err.message.includes(path)
      ? err
      : Object.assign(new Error(`writing ${path}: ${err.message}`, { cause: e }), { code: err.code });
  } finally {
    if (!renamed) await unlink(tmp).catch(() => undefined);
  }
}

/** Writes `value` as JSON (2-space indent unless `indent` says otherwise, trailing newline) atomically. */
export async function writeJsonAtomic(path: string, value: unknown, indent: number = 2): Promise<void> {
  await writeFileAtomic(path, JSON.stringify(value, null, indent) + '\n');
}

/**
 * Tests SIGKILL a writer in the middle of a file deterministically: with this variable set to a path, every atomic
 * write creates that path once its first chunk is in the temporary file, then waits for good (until killed).
 */
export const STALL_ENV = 'HACRL_TEST_STALL_ATOMIC_WRITE';

async function stallForTest(marker: string): Promise<never> {
  await writeFile(marker, '');
  // A pending timer keeps the process alive; a bare unresolved promise would let it exit.
  for (;;) await new Promise((resolve) => setTimeout(resolve, 60_000));
}

// FileHandle.write may write fewer bytes than asked (large buffers, signals), so loop until all are out.
async function writeAll(fh: FileHandle, chunk: Uint8Array): Promise<void> {
  let off = 0;
  while (off < chunk.byteLength) {
    const { bytesWritten } = await fh.write(chunk, off, chunk.byteLength - off);
    off += bytesWritten;
  }
}
